// The fleet rows: four worker processes on one PostgreSQL schedule (`OvertimePostgres`),
// measured from a coordinator. Its own program, so that `overtime-bench` does not link
// postgres-nio; `overtime-bench` runs it and reads the JSON it prints.
//
//   overtime-fleet-bench --mode full        (PGHOST, PGPORT, PGUSER name an empty database)
//
// fleet_runs_per_sec: one-shots all due at once, from the commit of their submission to
// the last one recorded done, on workers that run 256 at once without start spacing;
// fleet_runs_per_sec_at_defaults: the same on workers at SchedulerConfiguration's defaults. fleet_claim_latency_p99_ms: one-shots due over a spread of
// seconds, from each due time (the database's clock) to its handler's start.
// fleet_idle_wakeups_per_sec: afterwards, nothing due, each worker's threads' wake-ups.
// fleet_status_p99_ms_database_stopped: the database stopped (SIGSTOP on every server
// process; OVERTIME_BENCH_PGDATA names its data folder) while a worker holds a run whose
// handler resubmits work through the async API every 100 ms (BGTaskScheduler's pattern),
// has entered the background and was asked for its schedule: how long its `status` takes
// over the control socket, asked every 50 ms for longer than the store's operation timeout.
// dashboard_fleet_page_p99_ms, dashboard_fleet_live_update_ms (with --dashboard PATH):
// overtime-dashboard reading this database beside the fleet, as dashboard_page_p99_ms does
// a SQLite store: 100,000 requests pending, 1,000,000 attempts in the history (inserted by
// SQL: a fleet that ran them would take an hour to make), pages over new connections, and a
// submit to the change event on an open stream.

import ArgumentParser
import BenchmarkScenarios
import Foundation
import Overtime
import OvertimePostgres
import OvertimeScheduler
import ReadyNotification

#if canImport(Glibc)
    import Glibc
#endif

struct FleetBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "overtime-fleet-bench", abstract: "The scheduler's fleet rows on a PostgreSQL database.")

    @Option(help: "full, quick or smoke.")
    var mode = "full"

    @Option(help: "Worker processes.")
    var workers = 4

    @Option(help: .hidden)
    var worker: String?

    @Flag(help: .hidden)
    var defaults = false

    @Option(help: .hidden)
    var control: String?

    @Option(help: "overtime-dashboard, for the fleet's dashboard rows.")
    var dashboard: String?

    func run() throws {
        if let log = worker { try Self.work(log: log, defaults: defaults, control: control) }
        let (runs, due, spread, idleSeconds, stoppedSeconds): (Int, Int, Double, Double, Double) =
            switch mode {
            case "full": (20_000, 2_000, 20, 10, 12)
            case "quick": (5_000, 500, 5, 3, 12)
            case "smoke": (200, 50, 1, 1, 2)
            default: throw ValidationError("unknown mode \(mode): use full, quick or smoke")
            }
        try Self.refuseUsedDatabase()
        let folder = try MeasuredProcess.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let latencies = folder + "/latencies"
        let observer = try Self.observer()
        let fleet = try (0..<workers).map { index in
            let own = folder + "/worker-\(index)"
            try FileManager.default.createDirectory(atPath: own, withIntermediateDirectories: true)
            return try MeasuredProcess(CommandLine.arguments[0], ["--worker", latencies], folder: own)
        }
        for worker in fleet { _ = try worker.waitForReady(timeout: 60) }

        // Throughput: all due at once.
        try observer.submit(contentsOf: (0..<runs).map { ScheduledTaskRequest(identifier: "t.\($0)") })
        let submitted = monotonicNanoseconds()
        try Self.waitUntilDone(observer)
        let runsPerSecond = Double(runs) / (Double(monotonicNanoseconds() - submitted) / 1e9)

        // Latency: due one after another over `spread` seconds, starting 2 s from now.
        let first = SystemClock().wallClockNow + .seconds(2)
        try observer.submit(
            contentsOf: (0..<due).map { index in
                var request = ScheduledTaskRequest(identifier: "l.\(index)")
                request.earliestBegin = first + .nanoseconds(Int64(spread * 1e9) * Int64(index) / Int64(due))
                return request
            })
        // Each handler appends its line: the file, not the database, says when all ran (a
        // count of 20,000 rows read by a poll takes the server's CPU from the claims measured).
        let deadline = monotonicNanoseconds() + 600_000_000_000
        var samples: [Int64] = []
        while samples.count < due && monotonicNanoseconds() < deadline {
            usleep(100_000)
            let text = (try? String(contentsOfFile: latencies, encoding: .utf8)) ?? ""
            // Whole lines only: a handler may be writing the last one.
            samples = text[..<(text.lastIndex(of: "\n") ?? text.startIndex)].split(separator: "\n")
                .compactMap { Int64($0) }
        }
        try Self.waitUntilDone(observer)
        guard samples.count == due else { throw ScenarioError("\(samples.count) latencies for \(due) runs") }
        let spreadOfLatencies = [0.5, 0.9, 0.99, 1.0].map {
            "p\($0 * 100): \(Double(percentile(samples, $0)) / 1e6) ms"
        }
        FileHandle.standardError.write(Data("claim latency \(spreadOfLatencies.joined(separator: ", "))\n".utf8))

        // At rest: nothing due; every thread of every worker counted.
        usleep(settleMicroseconds)
        let wakeups = fleet.map { worker in
            let measured = worker.wakeupsPerSecond(seconds: idleSeconds)
            if !measured.byThread.isEmpty {
                FileHandle.standardError.write(Data("worker \(worker.pid) woke: \(measured.byThread)\n".utf8))
            }
            return measured.rate
        }
        for worker in fleet { _ = try worker.terminate() }

        // Throughput again, on workers at the library's defaults on PostgreSQL (32 runs at once,
        // start spacing): spacing paces only a backlog, not a queue that falls due while they run.
        let atDefaults = try (0..<workers).map { index in
            let own = folder + "/defaults-\(index)"
            try FileManager.default.createDirectory(atPath: own, withIntermediateDirectories: true)
            return try MeasuredProcess(CommandLine.arguments[0], ["--worker", latencies, "--defaults"], folder: own)
        }
        for worker in atDefaults { _ = try worker.waitForReady(timeout: 60) }
        try observer.submit(contentsOf: (0..<runs).map { ScheduledTaskRequest(identifier: "t.d.\($0)") })
        let submittedAtDefaults = monotonicNanoseconds()
        try Self.waitUntilDone(observer)
        let runsPerSecondAtDefaults = Double(runs) / (Double(monotonicNanoseconds() - submittedAtDefaults) / 1e9)
        for worker in atDefaults { _ = try worker.terminate() }

        // The ceilings: the same number of one-shots claimed and completed by pgbench from as
        // many clients as workers, one per transaction; and in batches as the tuned workers'
        // cycles make them at their fullest (256 claimed in one transaction whose commit is not
        // waited for, then completed in one that is).
        let limit = try Self.pgbenchLimit(runs: runs, clients: workers, folder: folder)
        let batchedLimit = try Self.pgbenchLimit(runs: runs, clients: workers, folder: folder, batch: 256)

        var figures: [String: Double] = [
            "fleet_runs_per_sec_limit": limit.rounded(),
            "fleet_runs_per_sec_limit_batched": batchedLimit.rounded(),
            "fleet_runs_per_sec": runsPerSecond.rounded(),
            "fleet_runs_per_sec_at_defaults": runsPerSecondAtDefaults.rounded(),
            "fleet_claim_latency_p99_ms": Double(percentile(samples, 0.99)) / 1e6,
            "fleet_idle_wakeups_per_sec": wakeups.max() ?? 0,
            // The sizes, for the runner's notes.
            "runs_at_once": Double(runs), "runs_spread": Double(due),
        ]
        // Every claim latency, for the runner's distribution chart.
        let latencySamples = samples.sorted().map { Double($0) / 1e6 }
        if let data = ProcessInfo.processInfo.environment["OVERTIME_BENCH_PGDATA"] {
            let stopped = try Self.statusWithDatabaseStopped(
                observer: observer, latencies: latencies, folder: folder, data: data, seconds: stoppedSeconds)
            figures["fleet_status_p99_ms_database_stopped"] = stopped.p99
            figures["status_max_ms"] = stopped.max
            figures["status_samples"] = Double(stopped.samples)
            figures["worker_lived"] = stopped.lived ? 1 : 0
            figures["status_resubmitted"] = Double(stopped.resubmitted)
        }
        if let dashboard {
            let (pending, history, loads, changes) =
                switch mode {
                case "full": (100_000, 1_000_000, 500, 50)
                case "quick": (100_000, 200_000, 200, 20)
                default: (50, 200, 4, 2)
                }
            let measured = try Self.dashboardRows(
                observer: observer, dashboard: dashboard, folder: folder, pending: pending, history: history,
                loads: loads, changes: changes)
            figures.merge(measured) { $1 }
        }
        var printed: [String: Any] = figures
        printed["claim_latency_samples_ms"] = latencySamples
        let json = try JSONSerialization.data(withJSONObject: printed, options: [.sortedKeys])
        print(String(decoding: json, as: UTF8.self))
        observer.runtime.requestTermination()
    }

    /// A scheduler that submits and counts, never started (it claims nothing).
    static func observer() throws -> Scheduler {
        var runtimeConfiguration = RuntimeConfiguration()
        runtimeConfiguration.signalHandling = nil
        runtimeConfiguration.systemdNotify = false
        let runtime = try Runtime(configuration: runtimeConfiguration)
        runtime.start()
        var database = try PostgresScheduleConfiguration.environment()
        database.instanceName = "bench-observer"
        let scheduler = try Scheduler(
            runtime: runtime, configuration: SchedulerConfiguration(database: .postgres(database)))
        for prefix in ["t.", "l.", "s.", "job-", "due-live-"] {
            try scheduler.register(prefix: prefix) { $0.setTaskCompleted(success: false) }
        }
        return scheduler
    }

    /// The fleet's dashboard rows: `pending` requests due in a day submitted by `observer`,
    /// `history` attempts of them inserted by SQL (newest last, every tenth failed) and
    /// vacuumed (what autovacuum does as a live fleet's history grows: the BRIN of start
    /// times summarized, which one insert of them all leaves undone for a minute), then
    /// `dashboard` beside the database, its pages loaded `loads` times each kind and `changes`
    /// live updates timed (milliseconds, p50 and p99; the sizes for the notes).
    static func dashboardRows(
        observer: Scheduler, dashboard: String, folder: String, pending: Int, history: Int, loads: Int, changes: Int
    ) throws -> [String: Double] {
        let far = SystemClock().wallClockNow + .seconds(86_400)
        var index = 0
        while index < pending {
            try observer.submit(
                contentsOf: (index..<min(index + 10_000, pending)).map {
                    var request = ScheduledTaskRequest(identifier: "job-\($0)")
                    request.earliestBegin = far
                    return request
                })
            index += 10_000
        }
        let now = "(extract(epoch FROM now()) * 1000000000)::bigint"
        try psql(
            """
            INSERT INTO overtime.history (identifier, run_id, attempt, started_at, ended_at, result, owner)
            SELECT 'job-' || (g % \(pending)), 100000000 + g, 1, \(now) - (\(history) - g)::bigint * 1000000,
                \(now) - (\(history) - g)::bigint * 1000000 + 500000, CASE WHEN g % 10 = 0 THEN 'failed' ELSE 'succeeded' END, ''
            FROM generate_series(1, \(history)) g;
            ANALYZE overtime.requests
            """)
        // Alone: a string of several commands is one transaction, which VACUUM refuses.
        try psql("VACUUM ANALYZE overtime.history")
        let bounds = try psql(
            "SELECT min(sequence), max(sequence) FROM overtime.requests WHERE starts_with(identifier, 'job-')"
        ).split(separator: "|").compactMap { Int64($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        guard bounds.count == 2 else { throw ScenarioError("no job- requests in the database") }
        let environment = ProcessInfo.processInfo.environment
        let user = environment["PGUSER"] ?? "postgres"
        let url =
            "postgres://\(user)@\(environment["PGHOST"] ?? "127.0.0.1"):\(environment["PGPORT"] ?? "5432")"
            + "/\(environment["PGDATABASE"] ?? user)"
        let own = folder + "/dashboard"
        try FileManager.default.createDirectory(atPath: own, withIntermediateDirectories: true)
        let served = try DashboardPages.Served(dashboard: dashboard, store: url, folder: own)
        defer { served.stop() }
        let (first, last) = (bounds[0], bounds[1])
        let runs = Int64(100_000_000)
        var figures = try served.load(
            requestPages: [
                "/requests", "/requests?state=pending&after=\((first + last) / 2)",
                "/requests?state=all&after=\(first + (last - first) / 3)", "/requests?prefix=job-4",
            ],
            historyPages: [
                "/history", "/history?before=\(runs + Int64(history / 2)):1", "/history?prefix=job-12",
                "/history?result=failed&before=\(runs + Int64(history / 3)):1", "/history?end=1",
                "/history?after=\(runs + Int64(history / 2)):1", "/history?prefix=job-12&end=1",
            ],
            failedPages: ["/failed", "/failed?after=\((first + last) / 2)"], loads: loads, rowsExpected: true)
        figures.live = try served.timeLiveUpdates(changes) { change in
            var request = ScheduledTaskRequest(identifier: "due-live-\(change)")
            request.earliestBegin = far
            try observer.submit(request)
        }
        figures.overviewChanged = try served.timeOverviewAfterChanges(max(10, loads / 10)) { change in
            var request = ScheduledTaskRequest(identifier: "due-live-counted-\(change)")
            request.earliestBegin = far
            try observer.submit(request)
        }
        let ms = { (values: [Int64], fraction: Double) in Double(percentile(values, fraction)) / 1000 }
        return [
            "dashboard_fleet_requests_p50": ms(figures.requests, 0.5),
            "dashboard_fleet_requests_p99": ms(figures.requests, 0.99),
            "dashboard_fleet_history_p50": ms(figures.history, 0.5),
            "dashboard_fleet_history_p99": ms(figures.history, 0.99),
            "dashboard_fleet_failed_p50": ms(figures.failed, 0.5),
            "dashboard_fleet_failed_p99": ms(figures.failed, 0.99),
            "dashboard_fleet_history_few_p50": ms(figures.historyFew, 0.5),
            "dashboard_fleet_history_few_p99": ms(figures.historyFew, 0.99),
            "dashboard_fleet_overview_p50": ms(figures.overview, 0.5),
            "dashboard_fleet_overview_p99": ms(figures.overview, 0.99),
            "dashboard_fleet_overview_changed_p50": ms(figures.overviewChanged, 0.5),
            "dashboard_fleet_overview_changed_p99": ms(figures.overviewChanged, 0.99),
            "dashboard_fleet_search_p50": ms(figures.search, 0.5),
            "dashboard_fleet_search_p99": ms(figures.search, 0.99),
            "dashboard_fleet_sorted_p50": ms(figures.sorted, 0.5),
            "dashboard_fleet_sorted_p99": ms(figures.sorted, 0.99),
            "dashboard_fleet_sorted_next_run_p99": ms(figures.sortedByOrder["next_run"] ?? [], 0.99),
            "dashboard_fleet_sorted_attempts_p99": ms(figures.sortedByOrder["attempts"] ?? [], 0.99),
            "dashboard_fleet_sorted_last_run_p99": ms(figures.sortedByOrder["last_run"] ?? [], 0.99),
            "dashboard_fleet_live_p50": ms(figures.live, 0.5),
            "dashboard_fleet_live_p99": ms(figures.live, 0.99),
            "dashboard_fleet_pending": Double(pending), "dashboard_fleet_history": Double(history),
            "dashboard_fleet_loads": Double(loads),
        ]
    }

    /// One-shots in a table of their own, claimed (`FOR UPDATE SKIP LOCKED`, the oldest
    /// first) and completed — marked done, an attempt recorded — by pgbench's `clients`: one
    /// a transaction (synchronous commit, the server's default) when `batch` is 1; else
    /// `batch` at a time, as a worker's cycle does them, claimed in one transaction (not
    /// waiting for its commit's flush, as the store's claim) and completed in the next (waiting
    /// for it, as the store's record of ends). Runs per second: `runs` rounded down to whole
    /// batches of every client, so that each transaction finds a full batch.
    static func pgbenchLimit(runs: Int, clients: Int, folder: String, batch: Int = 1) throws -> Double {
        let rounds = max(1, runs / (clients * batch))
        try psql(
            """
            DROP SCHEMA IF EXISTS bench_limit CASCADE; CREATE SCHEMA bench_limit;
            CREATE TABLE bench_limit.jobs (id bigserial PRIMARY KEY, identifier text NOT NULL, due_at bigint NOT NULL,
                done boolean NOT NULL DEFAULT false, claimed_by text);
            CREATE INDEX jobs_due ON bench_limit.jobs (due_at) WHERE NOT done;
            CREATE INDEX jobs_claimed ON bench_limit.jobs (claimed_by) WHERE NOT done AND claimed_by IS NOT NULL;
            CREATE TABLE bench_limit.history (identifier text NOT NULL, run_id bigint NOT NULL, started_at bigint,
                ended_at bigint, result text NOT NULL, PRIMARY KEY (identifier, run_id));
            INSERT INTO bench_limit.jobs (identifier, due_at)
                SELECT 'l.' || g, 0 FROM generate_series(1, \(rounds * clients * batch)) g;
            ANALYZE bench_limit.jobs
            """)
        let script = folder + "/claim-and-complete-\(batch).sql"
        let text =
            batch == 1
            ? """
            BEGIN;
            WITH job AS (SELECT id, identifier FROM bench_limit.jobs WHERE NOT done ORDER BY due_at LIMIT 1
                FOR UPDATE SKIP LOCKED),
            ran AS (UPDATE bench_limit.jobs j SET done = true, claimed_by = 'pgbench' FROM job WHERE j.id = job.id
                RETURNING job.id, job.identifier)
            INSERT INTO bench_limit.history SELECT identifier, id, 0, 1, 'succeeded' FROM ran;
            COMMIT;

            """
            : """
            BEGIN;
            SET LOCAL synchronous_commit TO OFF;
            WITH job AS (SELECT id FROM bench_limit.jobs WHERE NOT done AND claimed_by IS NULL ORDER BY due_at
                LIMIT \(batch) FOR UPDATE SKIP LOCKED)
            UPDATE bench_limit.jobs j SET claimed_by = 'c' || :client_id FROM job WHERE j.id = job.id;
            COMMIT;
            BEGIN;
            WITH ran AS (UPDATE bench_limit.jobs SET done = true WHERE claimed_by = 'c' || :client_id AND NOT done
                RETURNING id, identifier)
            INSERT INTO bench_limit.history SELECT identifier, id, 0, 1, 'succeeded' FROM ran;
            COMMIT;

            """
        try text.write(toFile: script, atomically: true, encoding: .utf8)
        let output = try programOutput(
            "/usr/bin/pgbench",
            ["-n", "-f", script, "-c", String(clients), "-j", String(min(clients, 2)), "-t", String(rounds)],
            what: "pgbench")
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("tps = ") }),
            let tps = Double(line.dropFirst("tps = ".count).prefix { $0 == "." || $0.isNumber })
        else { throw ScenarioError("pgbench: \(output.suffix(400))") }
        let done = try psql("SELECT count(*) FROM bench_limit.history").trimmingCharacters(in: .whitespacesAndNewlines)
        guard Int(done) == rounds * clients * batch else {
            throw ScenarioError("pgbench completed \(done) one-shots of \(rounds * clients * batch)")
        }
        try psql("DROP SCHEMA bench_limit CASCADE")
        return tps * Double(batch)
    }

    /// Refuses a database that already holds a schedule: the rows wait until what they
    /// submitted has run, which an earlier run's requests (100,000 due in a day, with
    /// `--dashboard`) would keep from ever happening. Nothing in it is changed.
    static func refuseUsedDatabase() throws {
        let schemas = try psql("SELECT count(*) FROM pg_namespace WHERE nspname = 'overtime'")
        guard schemas.trimmingCharacters(in: .whitespacesAndNewlines) == "0" else {
            throw ScenarioError(
                "the database PGHOST, PGPORT and PGUSER name already holds a schedule (schema overtime): the fleet "
                    + "rows need an empty one (a new database, or DROP SCHEMA overtime CASCADE where an earlier run "
                    + "of this program made it)")
        }
    }

    /// Runs `sql` with psql on the database the `PG*` variables name; what it printed.
    @discardableResult
    static func psql(_ sql: String) throws -> String {
        try programOutput("/usr/bin/psql", ["-v", "ON_ERROR_STOP=1", "-tA", "-c", sql], what: "psql")
    }

    /// Polls the count of pending requests every `every` µs until none is left (not much
    /// oftener: each count is a query that takes the server's CPU from the workers).
    static func waitUntilDone(_ observer: Scheduler, every: useconds_t = 10_000) throws {
        let deadline = monotonicNanoseconds() + 600_000_000_000
        while try observer.pendingRequestCount() > 0 {
            guard monotonicNanoseconds() < deadline else { throw ScenarioError("runs not done in 600 s") }
            usleep(every)
        }
    }

    /// One worker holding a run (`s.hold`, which never ends by itself, and whose handler
    /// resubmits a request tagged `resubmitted` every 100 ms through the async API) with its
    /// control socket; the database then stopped, the worker sent to the background and asked
    /// for its schedule; then `status` asked every 50 ms for `seconds`, each on a connection
    /// of its own as `overtimectl` does. p99 and the longest in ms, how many, and whether the
    /// worker still answers once the database is back (its watchdog's limit is 2 s: a loop
    /// held that long is killed).
    static func statusWithDatabaseStopped(
        observer: Scheduler, latencies: String, folder: String, data: String, seconds: Double
    ) throws -> (p99: Double, max: Double, samples: Int, lived: Bool, resubmitted: Int) {
        let own = folder + "/stopped"
        try FileManager.default.createDirectory(atPath: own, withIntermediateDirectories: true)
        let socket = own + "/control.sock"
        let worker = try MeasuredProcess(
            CommandLine.arguments[0], ["--worker", latencies, "--control", socket], folder: own)
        _ = try worker.waitForReady(timeout: 60)
        try observer.submit(ScheduledTaskRequest(identifier: "s.hold"))
        let held = own + "/held"
        let deadline = monotonicNanoseconds() + 60_000_000_000
        while !FileManager.default.fileExists(atPath: held) {
            guard monotonicNanoseconds() < deadline else { throw ScenarioError("s.hold did not start in 60 s") }
            usleep(10_000)
        }
        let server = ServerProcesses(data: data)
        // The count before " submits begun", in whatever the control protocol wraps it in.
        func issued(_ answer: String?) -> Int {
            guard let answer, let end = answer.range(of: " submits begun") else { return 0 }
            return Int(String(answer[..<end.lowerBound].reversed().prefix { $0.isNumber }.reversed())) ?? 0
        }
        let beforeStopping = ControlRequest.ask(socket, "resubmits", timeoutMilliseconds: 5_000)
        server.signal(SIGSTOP)
        defer { server.signal(SIGCONT) }
        _ = ControlRequest.ask(socket, "background", timeoutMilliseconds: 5_000)
        let schedule = ControlRequest(socket)
        schedule?.send("schedule")
        var samples: [Int64] = []
        let end = monotonicNanoseconds() + Int64(seconds * 1e9)
        while monotonicNanoseconds() < end {
            let asked = monotonicNanoseconds()
            let answered = ControlRequest.ask(socket, "status", timeoutMilliseconds: 5_000) != nil
            samples.append(answered ? monotonicNanoseconds() - asked : 5_000_000_000)
            usleep(50_000)
        }
        let afterStopping = ControlRequest.ask(socket, "resubmits", timeoutMilliseconds: 5_000)
        server.signal(SIGCONT)
        let lived = ControlRequest.ask(socket, "status", timeoutMilliseconds: 30_000) != nil
        _ = schedule?.readLine(timeoutMilliseconds: 30_000)
        // How many submits the handler began while the database was stopped.
        let resubmitted = max(0, issued(afterStopping) - issued(beforeStopping))
        _ = try? worker.terminate()
        try observer.cancel("s.hold")  // nothing left pending for a later run on this database
        try observer.cancel(tag: "resubmitted")
        FileHandle.standardError.write(
            Data("status with the database stopped: \(samples.count) asked, worker lived: \(lived)\n".utf8))
        return (
            Double(percentile(samples, 0.99)) / 1e6, Double(samples.max() ?? 0) / 1e6, samples.count, lived,
            resubmitted
        )
    }

    /// A worker: runs every request it claims at once; a latency run appends its lateness
    /// (nanoseconds from its due time, on the database's clock, to its start) to `log`.
    /// With `control`, it answers a control socket there, its watchdog limit is 2 s, and
    /// `s.*` runs hold their grants until expired (their start marked by a file `held`).
    static func work(log: String, defaults: Bool, control: String?) throws -> Never {
        let descriptor = open(log, O_WRONLY | O_APPEND | O_CREAT, 0o644)
        guard descriptor >= 0 else { throw ScenarioError("cannot open \(log)") }
        // READY=1 said once, below: the runtime's status lines would fill the socket the
        // coordinator reads READY=1 from and stops reading.
        var runtimeConfiguration = RuntimeConfiguration()
        runtimeConfiguration.systemdNotify = false
        if let control {
            runtimeConfiguration.controlSocket = .path(control)
            runtimeConfiguration.watchdogTimeout = .seconds(2)
        }
        let runtime = try Runtime(configuration: runtimeConfiguration)
        var database = try PostgresScheduleConfiguration.environment()
        if let watchdog = runtimeConfiguration.watchdogTimeout {
            database.operationTimeout = watchdog / 2  // as the store requires
        }
        var configuration = SchedulerConfiguration(database: .postgres(database))
        if !defaults {
            configuration.maximumConcurrentRuns = 256
            configuration.startSpacing = .zero
        }
        let scheduler = try Scheduler(runtime: runtime, configuration: configuration)
        try scheduler.register(prefix: "t.") { $0.setTaskCompleted(success: true) }
        try scheduler.register(prefix: "l.") { task in
            // The runtime's wall clock is the database's on this machine (one clock).
            var line = "\(runtime.clock.wallClockNow.nanosecondsSinceEpoch - task.dueTime.nanosecondsSinceEpoch)\n"
            line.withUTF8 { _ = write(descriptor, $0.baseAddress, $0.count) }
            task.setTaskCompleted(success: true)
        }
        let resubmits = ResubmitCounts()
        if let control {
            let held = (control as NSString).deletingLastPathComponent + "/held"
            try scheduler.register(prefix: "r.") { $0.setTaskCompleted(success: true) }
            _ = runtime.addControlCommand("resubmits") { .success("\(resubmits.issued) submits begun") }
            try scheduler.register(prefix: "s.") { task in
                // While it runs, it submits more work every 100 ms from the loop, through the
                // async API: with the database stopped each submit waits off the loop.
                let running = RunningFlag()
                task.expirationHandler = {
                    running.clear()
                    task.setTaskCompleted(success: false)
                }
                resubmit(scheduler, every: .milliseconds(100), while: running, count: 0, counts: resubmits)
                close(open(held, O_WRONLY | O_CREAT, 0o644))
            }
        }
        try scheduler.start()
        notifyReady()
        runtime.run()
        Glibc.exit(0)
    }

    /// Submits `r.<count>` (tagged `resubmitted`) through the async API, then again after
    /// `interval` on the loop, while `running` holds.
    static func resubmit(
        _ scheduler: Scheduler, every interval: Duration, while running: RunningFlag, count: Int,
        counts: ResubmitCounts
    ) {
        guard running.isSet else { return }
        counts.begin()
        var request = ScheduledTaskRequest(identifier: "r.\(count)")
        request.tags = ["resubmitted"]
        Task { _ = try? await scheduler.submit(request) }
        scheduler.runtime.schedule(after: interval) {
            resubmit(scheduler, every: interval, while: running, count: count + 1, counts: counts)
        }
    }
}

/// How many submits the held run's handler began.
final class ResubmitCounts: @unchecked Sendable {
    private let lock = NSLock()
    private var begun = 0

    var issued: Int { lock.withLock { begun } }

    func begin() { lock.withLock { begun += 1 } }
}

/// Whether a held run still runs: its expiration handler clears it, the loop's timer reads it.
final class RunningFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = true

    var isSet: Bool { lock.withLock { value } }

    func clear() { lock.withLock { value = false } }
}

FleetBench.main()
