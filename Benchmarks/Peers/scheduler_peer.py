#!/usr/bin/env python3
"""The scheduler rows' local peers, as a user would set them up on SQLite with durability on.

  scheduler_peer.py PEER SCENARIO FOLDER [N ...]

PEER: apscheduler (3.11, BackgroundScheduler with SQLAlchemy's job store on SQLite) or huey
(3.5, SqliteHuey with a thread consumer). Both stores are SQLite in WAL mode with
synchronous=FULL, as Overtime's: a write is on disk when it returns.

SCENARIO (the figure is the last line printed, as JSON {"value": …}):
  submit N            N single durable submits of one-shots due in a day: submits per second
  runs N              N one-shots due at once, then the scheduler (consumer) started: runs per
                      second until every one has run and its completion is written
  lateness P D S      P one-shots due in a day, then D due over S seconds from 2 s on: p99 of
                      each handler's start minus its due time, in microseconds (and every
                      one as "samples", for the distribution chart)
  idle P              P one-shots due in an hour, the scheduler running; READY=1 on
                      $NOTIFY_SOCKET, then nothing more (the runner counts wake-ups)
  resident P          resident memory growth (MB) of a running scheduler with P pending
"""
import datetime
import json
import os
import socket
import sys
import threading
import time

PEER, SCENARIO, FOLDER = sys.argv[1], sys.argv[2], sys.argv[3]
NUMBERS = [float(value) for value in sys.argv[4:]]
DATABASE = os.path.join(FOLDER, PEER + ".db")
ran = []  # (due, started) of each run, appended by the handlers' threads
ran_lock = threading.Lock()


def run_job(due):
    started = time.time()
    with ran_lock:
        ran.append((due, started))


def resident_kb():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def ready():
    address = os.environ.get("NOTIFY_SOCKET")
    if address:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
            notify.sendto(b"READY=1", "\0" + address[1:] if address.startswith("@") else address)


class APScheduler:
    def __init__(self):
        from apscheduler.executors.pool import ThreadPoolExecutor
        from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
        from apscheduler.schedulers.background import BackgroundScheduler
        from sqlalchemy import create_engine, event

        engine = create_engine("sqlite:///" + DATABASE)

        @event.listens_for(engine, "connect")
        def durable(connection, _):
            cursor = connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=FULL")
            cursor.close()

        self.scheduler = BackgroundScheduler(
            jobstores={"default": SQLAlchemyJobStore(engine=engine)},
            executors={"default": ThreadPoolExecutor(20)},
            job_defaults={"misfire_grace_time": None, "coalesce": False, "max_instances": 1})
        # Paused: submits are written to the store at once, nothing runs until resume().
        self.scheduler.start(paused=True)

    def submit(self, index, due):
        self.scheduler.add_job(
            run_job, "date", run_date=datetime.datetime.fromtimestamp(due, datetime.timezone.utc),
            args=[due], id=f"job-{index}")

    def start(self):
        self.scheduler.resume()

    def pending(self):
        return len(self.scheduler.get_jobs())


class Huey:
    def __init__(self):
        from huey import SqliteHuey

        self.huey = SqliteHuey(filename=DATABASE, fsync=True, journal_mode="wal")
        self.task = self.huey.task()(run_job)
        self.consumer = None

    def submit(self, index, due):
        if due <= time.time():
            self.task(due)
        else:
            self.task.schedule(args=(due,), eta=datetime.datetime.fromtimestamp(due, datetime.timezone.utc))

    def start(self):
        # Its defaults but the workers: eight threads, polling with its backoff.
        self.consumer = self.huey.create_consumer(workers=8, worker_type="thread", periodic=False)
        self.consumer.start()

    def pending(self):
        return self.huey.pending_count() + self.huey.scheduled_count()


def make():
    os.makedirs(FOLDER, exist_ok=True)
    return {"apscheduler": APScheduler, "huey": Huey}[PEER]()


def main():
    peer = make()
    extra = {}
    far = time.time() + 86_400
    if SCENARIO == "submit":
        count = int(NUMBERS[0])
        started = time.monotonic()
        for index in range(count):
            peer.submit(index, far)
        value = count / (time.monotonic() - started)
    elif SCENARIO == "runs":
        count = int(NUMBERS[0])
        now = time.time()
        for index in range(count):
            peer.submit(index, now)
        started = time.monotonic()
        peer.start()
        while len(ran) < count or peer.pending() > 0:
            time.sleep(0.005)
        value = count / (time.monotonic() - started)
    elif SCENARIO == "lateness":
        pending, due, spread = int(NUMBERS[0]), int(NUMBERS[1]), NUMBERS[2]
        for index in range(pending):
            peer.submit(index, far)
        peer.start()
        first = time.time() + 2
        for index in range(due):
            peer.submit(pending + index, first + spread * index / due)
        deadline = time.monotonic() + spread + 60
        while len(ran) < due and time.monotonic() < deadline:
            time.sleep(0.01)
        late = sorted(max(0.0, started - due_at) * 1e6 for due_at, started in ran)
        if len(late) < due:
            raise SystemExit(f"{len(late)} of {due} ran within {spread + 60} s")
        value = late[min(len(late) - 1, int(len(late) * 0.99))]
        extra["samples"] = [round(each, 1) for each in late]
    elif SCENARIO == "idle":
        hour = time.time() + 3600
        for index in range(int(NUMBERS[0])):
            peer.submit(index, hour)
        peer.start()
        ready()
        while True:
            time.sleep(3600)
    elif SCENARIO == "resident":
        before = resident_kb()
        for index in range(int(NUMBERS[0])):
            peer.submit(index, far)
        peer.start()
        time.sleep(1)
        value = (resident_kb() - before) / 1024
    else:
        raise SystemExit(f"unknown scenario {SCENARIO}")
    print(json.dumps({"value": value, **extra}), flush=True)
    os._exit(0)  # the schedulers' threads would keep the process


if __name__ == "__main__":
    main()
