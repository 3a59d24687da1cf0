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
// process; OVERTIME_BENCH_PGDATA names its data folder) while a worker holds a run, has
// entered the background and was asked for its schedule: how long its `status` takes over
// the control socket, asked every 50 ms for longer than the store's operation timeout.

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

    func run() throws {
        if let log = worker { try Self.work(log: log, defaults: defaults, control: control) }
        let (runs, due, spread, idleSeconds, stoppedSeconds): (Int, Int, Double, Double, Double) =
            switch mode {
            case "full": (20_000, 2_000, 20, 10, 12)
            case "quick": (5_000, 500, 5, 3, 12)
            case "smoke": (200, 50, 1, 1, 2)
            default: throw ValidationError("unknown mode \(mode): use full, quick or smoke")
            }
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
        usleep(3_000_000)
        let wakeups = fleet.map { worker in
            let measured = worker.wakeupsPerSecond(seconds: idleSeconds)
            if !measured.byThread.isEmpty {
                FileHandle.standardError.write(Data("worker \(worker.pid) woke: \(measured.byThread)\n".utf8))
            }
            return measured.rate
        }
        for worker in fleet { _ = try worker.terminate() }

        // Throughput again, on workers at the library's defaults (a few runs at once, start
        // spacing): spacing paces only a backlog, not a queue that falls due while they run.
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

        var figures: [String: Double] = [
            "fleet_runs_per_sec": runsPerSecond.rounded(),
            "fleet_runs_per_sec_at_defaults": runsPerSecondAtDefaults.rounded(),
            "fleet_claim_latency_p99_ms": Double(percentile(samples, 0.99)) / 1e6,
            "fleet_idle_wakeups_per_sec": wakeups.max() ?? 0,
            // The sizes, for the runner's notes.
            "runs_at_once": Double(runs), "runs_spread": Double(due),
        ]
        if let data = ProcessInfo.processInfo.environment["OVERTIME_BENCH_PGDATA"] {
            let stopped = try Self.statusWithDatabaseStopped(
                observer: observer, latencies: latencies, folder: folder, data: data, seconds: stoppedSeconds)
            figures["fleet_status_p99_ms_database_stopped"] = stopped.p99
            figures["status_max_ms"] = stopped.max
            figures["status_samples"] = Double(stopped.samples)
            figures["worker_lived"] = stopped.lived ? 1 : 0
        }
        let json = try JSONSerialization.data(withJSONObject: figures, options: [.sortedKeys])
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
        for prefix in ["t.", "l.", "s."] {
            try scheduler.register(prefix: prefix) { $0.setTaskCompleted(success: false) }
        }
        return scheduler
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

    /// One worker holding a run (`s.hold`, which never ends by itself) with its control
    /// socket; the database then stopped, the worker sent to the background and asked for
    /// its schedule; then `status` asked every 50 ms for `seconds`, each on a connection of
    /// its own as `overtimectl` does. p99 and the longest in ms, how many, and whether the
    /// worker still answers once the database is back (its watchdog's limit is 2 s).
    static func statusWithDatabaseStopped(
        observer: Scheduler, latencies: String, folder: String, data: String, seconds: Double
    ) throws -> (p99: Double, max: Double, samples: Int, lived: Bool) {
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
        server.signal(SIGCONT)
        let lived = ControlRequest.ask(socket, "status", timeoutMilliseconds: 30_000) != nil
        _ = schedule?.readLine(timeoutMilliseconds: 30_000)
        _ = try? worker.terminate()
        try observer.cancel("s.hold")  // nothing left pending for a later run on this database
        FileHandle.standardError.write(
            Data("status with the database stopped: \(samples.count) asked, worker lived: \(lived)\n".utf8))
        return (
            Double(percentile(samples, 0.99)) / 1e6, Double(samples.max() ?? 0) / 1e6, samples.count, lived
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
        var configuration = SchedulerConfiguration(database: .postgres(try .environment()))
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
        if let control {
            let held = (control as NSString).deletingLastPathComponent + "/held"
            try scheduler.register(prefix: "s.") { task in
                task.expirationHandler = { task.setTaskCompleted(success: false) }
                close(open(held, O_WRONLY | O_CREAT, 0o644))
            }
        }
        try scheduler.start()
        notifyReady()
        runtime.run()
        Glibc.exit(0)
    }
}

FleetBench.main()
