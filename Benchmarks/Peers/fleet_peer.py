#!/usr/bin/env python3
"""The fleet rows' peers: job queues a user would run on one PostgreSQL database instead.

  fleet_peer.py PEER SCENARIO FOLDER [N ...]        (PGHOST, PGPORT, PGUSER name the server)

PEER, each in a database of its own made afresh (peer_PEER), at its defaults but for how
many jobs a worker runs at once (32: Overtime's fleet rows run 256 per worker):
  procrastinate  3.10: workers listen (LISTEN/NOTIFY) and poll every 5 s (its default)
  pgqueuer       1.6: asyncpg, its default batch of 10
  oban           Oban for Python 0.7 (psycopg pool), one queue; needs Python 3.12
  apscheduler    3.11, SQLAlchemy's job store on PostgreSQL: one scheduler per job store (two
                 would both run every job), so its fleet is one process whatever W says; it
                 reads the store only when it wakes for a job it knows, so the jobs are
                 enqueued while it is paused and it is resumed then (SIGUSR1)
Commits are synchronous (the server's default); every worker is a process of its own.

SCENARIO (the figure is the last line printed, as JSON {"value": …}):
  runs N W          W workers at rest; N jobs due now enqueued in one statement where the peer
                    can; runs per second from the enqueue's return until each handler ran and
                    the peer's queue holds none unfinished
  latency N S W     W workers; N jobs due over S seconds from 5 s after the enqueuer connected
                    (SETTLE + 2 s; SETTLE is 3 s unless the runner says): p99 of each handler's
                    start minus its due time in ms ("samples": every one, for the CDF)
  idle W S          W workers at rest, nothing due, settled 3 s: wake-ups per second (context
                    switches of every thread) of the busiest worker over S seconds
  worker LOG        (internal) one worker; its handlers append "due started" (ns) to LOG
"""
import asyncio
import datetime
import json
import os
import signal
import subprocess
import sys
import time

PEER, SCENARIO, FOLDER = sys.argv[1], sys.argv[2], sys.argv[3]
ARGUMENTS = sys.argv[4:]
# How long workers are left to connect and settle: 3 s, or what the runner says (a smoke
# run's figures mean nothing, and it says less).
SETTLE = float(os.environ.get("OVERTIME_BENCH_SETTLE_SECONDS", "3"))
DATABASE = "peer_" + PEER
CONCURRENCY = 32
HOST = os.environ.get("PGHOST", "127.0.0.1")
PORT = os.environ.get("PGPORT", "5432")
USER = os.environ.get("PGUSER", "postgres")
DSN = f"postgresql://{USER}@{HOST}:{PORT}/{DATABASE}"


def at(nanoseconds):
    return datetime.datetime.fromtimestamp(nanoseconds / 1e9, datetime.timezone.utc)


class Ran:
    """The handlers' log: one line per run, written with one write(2) on an O_APPEND file."""

    def __init__(self, path):
        self.descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def record(self, due):
        os.write(self.descriptor, f"{int(due)} {time.time_ns()}\n".encode())


def read_runs(path):
    try:
        with open(path) as log:
            text = log.read()
    except FileNotFoundError:
        return []
    lines = text[: text.rfind("\n") + 1].splitlines()  # whole lines only
    return [tuple(int(part) for part in line.split()) for line in lines]


# Each peer: install(), worker(log) (runs until killed), enqueue(choose) and unfinished_sql
# (jobs its queue still holds to run). enqueue calls choose() for the due times (ns since the
# epoch) once it has imported and connected what it enqueues with, so that a scenario times
# only the writes. Under load an enqueue's import and connection take time of their own
# (APScheduler's, beside 24 spinning processes: 180–483 ms in all, 149–241 ms of it the
# writes after the choice), and beside a whole test run an enqueue timed from before them
# outran the latency scenario's lead.


class Procrastinate:
    def app(self):
        import procrastinate

        return procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=DSN))

    async def install(self):
        app = self.app()
        async with app.open_async():
            await app.schema_manager.apply_schema_async()

    async def worker(self, log):
        app = self.app()
        ran = Ran(log)

        @app.task(name="run_job")
        async def run_job(due):
            ran.record(due)

        async with app.open_async():
            await app.run_worker_async(concurrency=CONCURRENCY, install_signal_handlers=False)

    async def enqueue(self, choose):
        app = self.app()

        @app.task(name="run_job")
        async def run_job(due):
            pass

        async with app.open_async():
            dues = choose()
            now = time.time_ns()
            if all(due <= now for due in dues):
                await run_job.batch_defer_async(*[{"due": due} for due in dues])
            else:  # a time each: one defer per job, fifty at once
                for start in range(0, len(dues), 50):
                    await asyncio.gather(
                        *[run_job.configure(schedule_at=at(due)).defer_async(due=due) for due in dues[start : start + 50]])

    unfinished_sql = "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"


class PgQueuer:
    async def queries(self):
        import asyncpg
        from pgqueuer import AsyncpgDriver, Queries

        connection = await asyncpg.connect(DSN)
        return connection, Queries(AsyncpgDriver(connection))

    async def install(self):
        connection, queries = await self.queries()
        await queries.install()
        await connection.close()

    async def worker(self, log):
        import asyncpg
        from pgqueuer import AsyncpgDriver, PgQueuer as Queuer

        queuer = Queuer(AsyncpgDriver(await asyncpg.connect(DSN)))
        ran = Ran(log)

        @queuer.entrypoint("run_job")
        async def run_job(job):
            ran.record(int(job.payload))

        await queuer.run()

    async def enqueue(self, choose):
        connection, queries = await self.queries()
        dues = choose()
        now = time.time_ns()
        await queries.enqueue(
            ["run_job"] * len(dues), [str(due).encode() for due in dues], [0] * len(dues),
            [datetime.timedelta(microseconds=max(0, due - now) / 1000) for due in dues])
        await connection.close()

    unfinished_sql = "SELECT count(*) FROM pgqueuer"


class Oban:
    async def pool(self):
        from oban import Oban as Client

        return await Client.create_pool(dsn=DSN)

    async def install(self):
        from oban.schema import install

        pool = await self.pool()
        await install(pool)
        await pool.close()

    def job(self, ran):
        from oban import worker

        @worker(queue="default")
        class RunJob:
            async def process(self, job):
                if ran:
                    ran.record(job.args["due"])

        return RunJob

    async def worker(self, log):
        from oban import Oban as Server

        self.job(Ran(log))
        async with Server(pool=await self.pool(), queues={"default": CONCURRENCY}):
            await asyncio.Event().wait()

    async def enqueue(self, choose):
        from oban import Oban as Client

        run_job = self.job(None)
        pool = await self.pool()
        async with Client(pool=pool) as client:
            dues = choose()
            now = time.time_ns()
            jobs = [
                run_job.new({"due": due}) if due <= now else run_job.new({"due": due}, scheduled_at=at(due)) for due in dues]
            for start in range(0, len(jobs), 5_000):
                await client.enqueue_many(jobs[start : start + 5_000])
        await pool.close()

    unfinished_sql = "SELECT count(*) FROM oban_jobs WHERE state IN ('available', 'scheduled', 'executing', 'retryable')"


def run_job_apscheduler(due):
    APScheduler.ran.record(due)


class APScheduler:
    ran = None
    paused = None

    def scheduler(self, threads):
        from apscheduler.executors.pool import ThreadPoolExecutor
        from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
        from apscheduler.schedulers.background import BackgroundScheduler

        return BackgroundScheduler(
            jobstores={"default": SQLAlchemyJobStore(url=DSN.replace("postgresql://", "postgresql+psycopg://"))},
            executors={"default": ThreadPoolExecutor(threads)},
            job_defaults={"misfire_grace_time": None, "coalesce": False, "max_instances": 1})

    async def install(self):
        scheduler = self.scheduler(1)
        scheduler.start(paused=True)  # makes its table
        scheduler.shutdown(wait=False)

    async def worker(self, log):
        # A scheduler reads the store only when it wakes, and nothing wakes it for a job
        # another process added: it waits paused until the jobs are in (SIGUSR1).
        APScheduler.ran = Ran(log)
        scheduler = self.scheduler(CONCURRENCY)
        scheduler.start(paused=True)
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGUSR1, scheduler.resume)
        # Ready for the signal, which would end the process by its default action before.
        open(os.path.join(FOLDER, f"ready-{os.getpid()}"), "w").close()
        await asyncio.Event().wait()

    async def enqueue(self, choose):
        # Paused, it writes to the store and runs nothing; kept so (stopped, it would run
        # what is due here) until this process exits.
        APScheduler.paused = self.scheduler(1)
        APScheduler.paused.start(paused=True)
        dues = choose()
        for index, due in enumerate(dues):
            APScheduler.paused.add_job(run_job_apscheduler, "date", run_date=at(due), args=[due], id=f"job-{index}-{due}")

    unfinished_sql = "SELECT count(*) FROM apscheduler_jobs"


PEERS = {"procrastinate": Procrastinate, "pgqueuer": PgQueuer, "oban": Oban, "apscheduler": APScheduler}


def psql(sql, database):
    return subprocess.run(
        ["psql", "-v", "ON_ERROR_STOP=1", "-tAq", "-d", database, "-c", sql], check=True, capture_output=True,
        text=True).stdout.strip()


def die_with_parent():
    """A worker is killed when its coordinator dies (PR_SET_PDEATHSIG), also by kill -9."""
    import ctypes

    ctypes.CDLL(None).prctl(1, signal.SIGKILL)


class Fleet:
    """W worker processes of the peer, each its own `fleet_peer.py PEER worker` process."""

    def __init__(self, peer, count):
        self.log = os.path.join(FOLDER, "ran")
        if os.path.exists(self.log):
            os.remove(self.log)
        if PEER == "apscheduler":
            count = 1
        self.processes = [
            subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), PEER, "worker", FOLDER, self.log],
                stdout=subprocess.DEVNULL, stderr=open(os.path.join(FOLDER, f"worker-{index}.log"), "w"),
                preexec_fn=die_with_parent)
            for index in range(count)
        ]
        self.peer = peer
        time.sleep(SETTLE)  # connected, listening, settled
        for process in self.processes:
            if process.poll() is not None:
                raise SystemExit(f"a {PEER} worker exited: {open(os.path.join(FOLDER, 'worker-0.log')).read()[-800:]}")
        # Ready before the jobs' due times are chosen: an APScheduler worker's start (Python,
        # its imports, the job store's connection) took 0.8 s beyond the settling with six
        # spinning processes, and, waited for after the enqueue, ran past the first due time
        # of the latency scenario in a run beside the whole test suite.
        if PEER == "apscheduler":
            for process in self.processes:
                ready = os.path.join(FOLDER, f"ready-{process.pid}")
                deadline = time.monotonic() + 120
                while not os.path.exists(ready):
                    if process.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit(f"an apscheduler worker never got ready: {self.worker_log(0)}")
                    time.sleep(0.01)

    def enqueued(self):
        """The jobs are in the database."""
        if PEER == "apscheduler":
            for process in self.processes:
                process.send_signal(signal.SIGUSR1)

    def worker_log(self, index):
        return open(os.path.join(FOLDER, f"worker-{index}.log")).read()[-800:]

    def wait(self, count, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            runs = read_runs(self.log)
            if len(runs) >= count and int(psql(self.peer.unfinished_sql, DATABASE)) == 0:
                return runs
            time.sleep(0.02)
        self.stop()
        raise SystemExit(f"{PEER}: {len(read_runs(self.log))} of {count} ran in {seconds} s")

    def stop(self):
        for process in self.processes:
            process.kill()
            process.wait()


def switches(pid):
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/status") as status:
                for line in status:
                    if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass
    return total


def main():
    peer = PEERS[PEER]()
    if SCENARIO == "worker":
        asyncio.run(peer.worker(ARGUMENTS[0]))
        return
    os.makedirs(FOLDER, exist_ok=True)
    psql(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)", "postgres")
    psql(f"CREATE DATABASE {DATABASE}", "postgres")
    asyncio.run(peer.install())
    result = {}
    if SCENARIO == "runs":
        count, workers = int(ARGUMENTS[0]), int(ARGUMENTS[1])
        fleet = Fleet(peer, workers)
        asyncio.run(peer.enqueue(lambda: [time.time_ns()] * count))
        fleet.enqueued()
        started = time.monotonic()
        fleet.wait(count, 600)
        result["value"] = count / (time.monotonic() - started)
        fleet.stop()
    elif SCENARIO == "latency":
        count, spread, workers = int(ARGUMENTS[0]), float(ARGUMENTS[1]), int(ARGUMENTS[2])
        fleet = Fleet(peer, workers)
        chosen = []
        began = time.time_ns()
        connected = []  # when choose() was called: the enqueuer imported and connected

        def choose():
            connected.append(time.time_ns())
            first = connected[0] + int((SETTLE + 2) * 1e9)
            chosen.extend(first + int(spread * 1e9 * index / count) for index in range(count))
            return chosen

        asyncio.run(peer.enqueue(choose))
        fleet.enqueued()
        if time.time_ns() > chosen[0]:
            raise SystemExit(
                f"{PEER}: enqueueing {count} took longer than {SETTLE + 2} s after connecting"
                f" in {(connected[0] - began) / 1e9:.2f} s")
        runs = fleet.wait(count, spread + 120)
        fleet.stop()
        late = sorted(max(0, started - due) / 1e6 for due, started in runs)
        result["value"] = late[min(len(late) - 1, int(len(late) * 0.99))]
        result["samples"] = [round(value, 3) for value in late]
    elif SCENARIO == "idle":
        workers, seconds = int(ARGUMENTS[0]), float(ARGUMENTS[1])
        fleet = Fleet(peer, workers)
        first = [switches(process.pid) for process in fleet.processes]
        time.sleep(seconds)
        last = [switches(process.pid) for process in fleet.processes]
        fleet.stop()
        result["value"] = max((after - before) / seconds for before, after in zip(first, last))
    else:
        raise SystemExit(f"unknown scenario {SCENARIO}")
    psql(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)", "postgres")
    print(json.dumps(result), flush=True)
    os._exit(0)  # a scheduler's threads would keep the process


if __name__ == "__main__":
    main()
