// A daemon with one periodic job, scheduled: the part of Overtime to copy for "run this
// every hour, even across restarts, and retry when it fails".
//
//   swift run periodic-report --every 10 --fail-attempts 1
//   swift run periodic-report --on "Mon..Fri *-*-* 08:00 Europe/Berlin"   # systemd's OnCalendar=
//   overtimectl --socket ./periodic-report-state/control.sock schedule
//   overtimectl --socket ./periodic-report-state/control.sock history report
//
// Each run appends one line to <state>/reports.log, at most once per run ID (a retry, or
// a run interrupted by a crash and retried, finds its line and does not add another).
// Stop it with Ctrl-C or SIGTERM; start it again later and a missed run is caught up.
import ArgumentParser
import Foundation
import Logging
import Metrics
import Overtime
import OvertimePrometheus
import OvertimeScheduler

@main
struct PeriodicReport: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "periodic-report",
        abstract: "A daemon that writes a report periodically, with catch-up after downtime and retries.")

    /// Blocks the signals the runtime handles before anything makes a thread: a SIGTERM
    /// sent while the daemon still starts waits for its stop instead of killing it.
    static func main() {
        SignalHandling.default.blockOnThisThread()
        main(nil)
    }

    @Option(
        help:
            "Where the schedule, the reports and the control socket live (default: $STATE_DIRECTORY, else ./periodic-report-state)."
    )
    var stateDirectory: String?

    @Option(parsing: .unconditional, help: "Seconds between planned runs: 1 or more.")
    var every = 3600

    @Option(
        help:
            "Run at the times of this calendar expression instead, in systemd's OnCalendar= grammar (e.g. '*-*-* 02:30 Europe/Berlin')."
    )
    var on: String?

    @Option(
        parsing: .unconditional,
        help: "Seconds of the window before each planned time in which a run may start (0 to --every).")
    var flex = 0

    @Option(help: "After downtime: once (one run for all missed), every (each missed, up to 10), none.")
    var catchUp = "once"

    @Option(help: "The first N attempts of each run fail, to show retries (30 s, 60 s, … backoff).")
    var failAttempts = 0

    @Option(help: "Seconds of the first retry's backoff (doubling after each failure).")
    var retryDelay = 30

    @Option(
        help: "Requirements, comma-separated: network, external-power, battery-not-low, storage-not-low, background.")
    var requires = ""

    @Option(help: "The control socket (default: <state>/control.sock).")
    var controlSocket: String?

    @Option(
        help:
            "Serve GET /metrics for Prometheus at ADDR:PORT (a port alone: on loopback); off by default. `overtimectl metrics` prints them either way."
    )
    var metricsListen: String?

    func validate() throws {
        guard every > 0 else { throw ValidationError("--every is a whole number of seconds, 1 or more; got \(every)") }
        if let on {
            do {
                _ = try CalendarSchedule(on)
            } catch {
                throw ValidationError("--on: \(error.message)")
            }
            guard flex >= 0 else { throw ValidationError("--flex must not be negative") }
        } else {
            guard (0...every).contains(flex) else { throw ValidationError("--flex must be between 0 and --every") }
        }
        guard ["once", "every", "none"].contains(catchUp) else {
            throw ValidationError("--catch-up is once, every or none")
        }
        if let metricsListen {
            do {
                _ = try MetricsListenAddress(parsing: metricsListen)
            } catch {
                throw ValidationError("--metrics-listen: \(error)")
            }
        }
        guard retryDelay >= 10 else { throw ValidationError("--retry-delay is at least 10 seconds") }
        for name in requires.split(separator: ",") where Requirement(named: String(name)) == nil {
            throw ValidationError("unknown requirement '\(name)'; known: \(Requirement.all.map(\.description))")
        }
    }

    func run() throws {
        let environment = ProcessInfo.processInfo.environment
        let state = stateDirectory ?? environment["STATE_DIRECTORY"] ?? "./periodic-report-state"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        LoggingSystem.bootstrap(StreamLogHandler.standardError)
        let metrics = PrometheusExporter()
        MetricsSystem.bootstrap(metrics.factory)

        var runtimeConfiguration = RuntimeConfiguration()
        runtimeConfiguration.controlSocket = SocketEndpoint(argument: controlSocket ?? state + "/control.sock")
        let runtime = try Runtime(configuration: runtimeConfiguration)
        if let endpoint = try metrics.serve(
            on: runtime, listeningAt: metricsListen.map { try MetricsListenAddress(parsing: $0) })
        {
            say("metrics at \(endpoint.url)")
        }
        let scheduler = try Scheduler(
            runtime: runtime, configuration: SchedulerConfiguration(storePath: state + "/schedule.db"))
        if let aside = scheduler.recovery.movedAside {
            say("the schedule was damaged: moved aside to \(aside), starting empty")
        }

        let reports = Reports(path: state + "/reports.log")
        let failAttempts = self.failAttempts
        try scheduler.register("report") { task in
            // An async body: it runs off the loop (on the scheduler's task thread); returning
            // completes the task, throwing fails it — exactly once.
            guard task.attempt > failAttempts else {
                say("report run \(task.runID) attempt \(task.attempt): failing on purpose")
                throw ReportFailure()
            }
            let written = reports.write(run: task.runID, attempt: task.attempt)
            say("report run \(task.runID) attempt \(task.attempt): \(written ? "written" : "already written")")
        }
        runtime.start()
        try scheduler.start()

        var request = ScheduledTaskRequest(identifier: "report")
        request.repetition =
            try on.map { Repetition(on: try CalendarSchedule($0), flex: .seconds(flex)) }
            ?? Repetition(every: .seconds(every), flex: .seconds(flex))
        request.catchUp = catchUp == "every" ? .every(maximum: 10) : catchUp == "none" ? .none : .once
        request.retry.initialDelay = .seconds(retryDelay)
        request.requirements = Set(requires.split(separator: ",").compactMap { Requirement(named: String($0)) })
        // Update: a changed --every or --on takes effect, the schedule and its history stay.
        try scheduler.submit(request, ifExists: .update)
        for pending in scheduler.pendingRequests() {
            say("\(pending.request.identifier): next run \(pending.nextRun) (\(pending.waitingFor))")
        }
        runtime.waitUntilTerminated()
    }
}

/// Writes a line to standard output at once (unbuffered: a pipe to journald or a
/// supervisor sees each line when it happens).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// The job's effect: one line per run in a file, fsynced; a run already written is not
/// written again (the handler is idempotent by run ID).
final class Reports: Sendable {
    let path: String
    private let lock = NSLock()

    init(path: String) {
        self.path = path
    }

    func write(run: Int64, attempt: Int) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        let existing = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        guard !existing.split(separator: "\n").contains(where: { $0.hasPrefix("run \(run) ") }) else { return false }
        guard let handle = FileHandle(forWritingAtPath: path) ?? create() else { return false }
        defer { try? handle.close() }
        _ = try? handle.seekToEnd()
        try? handle.write(contentsOf: Data("run \(run) attempt \(attempt) at \(Date())\n".utf8))
        try? handle.synchronize()
        return true
    }

    private func create() -> FileHandle? {
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        return FileHandle(forWritingAtPath: path)
    }
}

/// The failure a report run makes on purpose (`--fail-attempts`).
struct ReportFailure: Error {}
