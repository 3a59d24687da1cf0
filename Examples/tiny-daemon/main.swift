// A tiny daemon showing the Overtime pattern: work that must finish after the program
// leaves the foreground runs inside a grant, and stops cleanly when the grant expires.
//
// Try it:  scripts/run-example   (or type commands into: swift run tiny-daemon)
// Commands on stdin: "work" queues a job, "bg"/"fg" move the lifecycle, "memory" acts as
// the kernel's memory pressure would (a memory warning), EOF terminates.
import Metrics
import Overtime
import OvertimePrometheus
import OvertimeSystem

#if canImport(Glibc)
    import Glibc
#endif

// First, before anything makes a thread: a SIGTERM sent while the daemon still starts
// waits, blocked, for the runtime's loop, and gets the documented stop.
SignalHandling.default.blockOnThisThread()

if CommandLine.arguments.dropFirst().contains(where: { $0 == "--help" || $0 == "-h" }) {
    say(
        """
        usage: tiny-daemon [--control-socket PATH] [--metrics-listen ADDR:PORT]
        Reads commands on stdin: "work" queues a job, "bg" and "fg" move the lifecycle,
        "memory" delivers a memory warning, EOF (or SIGTERM) terminates. Work left when it
        goes to the background is finished inside a grant of background time (3 s,
        expiring 1 s before its end). The kernel's memory pressure (PSI) is a memory
        warning too: the results kept of finished jobs are dropped on it.
        --control-socket PATH: listen for overtimectl there (`overtimectl metrics` among its commands).
        --metrics-listen ADDR:PORT: serve GET /metrics for Prometheus there (a port alone: on loopback).
        """)
    exit(0)
}

// Every argument is an option this program knows, with its value: anything else is a
// usage error (64), not silently ignored.
do {
    var arguments = CommandLine.arguments.dropFirst()
    while let argument = arguments.popFirst() {
        guard ["--control-socket", "--metrics-listen"].contains(argument) else {
            say("tiny-daemon: unknown argument '\(argument)' (see --help)")
            exit(64)
        }
        if arguments.popFirst() == nil {
            say("tiny-daemon: \(argument) needs a value (see --help)")
            exit(64)
        }
    }
}

/// The value after `name` on the command line; exits with a usage error when it is missing.
func option(_ name: String) -> String? {
    let arguments = Array(CommandLine.arguments.dropFirst())
    guard let index = arguments.firstIndex(of: name) else { return nil }
    guard index + 1 < arguments.count else {
        say("tiny-daemon: \(name) needs a value (see --help)")
        exit(64)
    }
    return arguments[index + 1]
}

// Prometheus' registry as the metrics backend, before anything makes a metric.
let metrics = PrometheusExporter()
MetricsSystem.bootstrap(metrics.factory)
let metricsAddress: MetricsListenAddress?
do {
    metricsAddress = try option("--metrics-listen").map { try MetricsListenAddress(parsing: $0) }
} catch {
    say("tiny-daemon: --metrics-listen: \(error)")
    exit(64)
}

var configuration = RuntimeConfiguration()
configuration.controlSocket = option("--control-socket").map { .path($0) }
configuration.backgroundBudget = .seconds(3)
configuration.expirationLeadTime = .seconds(1)
// What cannot be set up (a control socket in a missing folder, a port in use) is one line
// and a sysexits status, never a trap.
let runtime: Runtime
do {
    runtime = try Runtime(configuration: configuration)
    if let endpoint = try metrics.serve(on: runtime, listeningAt: metricsAddress) {
        say("metrics at \(endpoint.url)")
    }
} catch {
    say("tiny-daemon: cannot start: \(error)")
    // sysexits: 64 an address that is not one, 75 a port in use (it may be free later),
    // 78 anything else the configuration names that cannot be ours.
    switch error {
    case let error as MetricsExportError where error.code == .invalidAddress: exit(64)
    case let error as MetricsExportError where error.code == .cannotListen && error.message.contains("in use"): exit(75)
    default: exit(78)
    }
}

/// Pending work, isolated to the runtime's loop thread: observers and handlers run
/// there, so they reach it synchronously (`assumeIsolated`); other threads queue work
/// onto the loop with `runtime.execute`, or `await` it.
actor Jobs {
    let runtime: Runtime
    var pending = 0

    init(runtime: Runtime) {
        self.runtime = runtime
    }

    nonisolated var unownedExecutor: UnownedSerialExecutor { runtime.executor.asUnownedSerialExecutor() }

    /// What finished jobs produced, kept to answer again cheaply: a cache, rebuilt on
    /// demand, so the first thing to go when memory runs short.
    var results: [String] = []

    func add() { pending += 1 }

    func finishAll() -> Int {
        defer { pending = 0 }
        if results.count < 10_000 { results += (0..<pending).map { "result of job \(results.count + $0 + 1)" } }
        return pending
    }

    func dropResults() -> Int {
        defer { results = [] }
        return results.count
    }
}

let jobs = Jobs(runtime: runtime)

// The kernel's memory pressure as memory warnings (UIKit's), where this system tells it.
let memoryPressure = MemoryPressureMonitor(runtime: runtime)
do {
    try memoryPressure.start()
} catch {
    say("memory warnings from the kernel: off (\(error))")
}

// logind's sleep and shutdown (a lid closed, a device suspending) move the lifecycle:
// the work left is finished inside the delay logind grants. A system bus that is not
// there yet is waited for, at no cost until it appears.
let logind = LogindMonitor(runtime: runtime)
do {
    try logind.start()
} catch {
    say("sleep and shutdown from logind: off (\(error))")
}

let token = runtime.observe { event in
    say("event: \(event)")
    if event == .didReceiveMemoryWarning {
        say("dropped \(jobs.assumeIsolated { $0.dropResults() }) cached result(s)")
        return
    }
    let pending = jobs.assumeIsolated { $0.pending }
    guard event == .didEnterBackground, pending > 0 else { return }
    // Leaving the foreground with work left: ask for time to finish it.
    let id = runtime.beginBackgroundTask(name: "finish-jobs") {
        say("expiring: \(jobs.assumeIsolated { $0.pending }) job(s) left for next time")  // stop; keep state
    } endHandler: { reason in
        say("grant ended: \(reason)")
    }
    runtime.execute {
        let finished = jobs.assumeIsolated { $0.finishAll() }
        say("finished \(finished) job(s), \(runtime.backgroundTimeRemaining) left")
        runtime.endBackgroundTask(id)
    }
}

// Commands come on stdin, read on a thread of its own: a read blocked on a Dispatch worker
// would start libdispatch's pool monitor, which wakes once a second for good.
readOnOwnThread {
    while let line = readLine() {
        switch line {
        case "work": runtime.execute { jobs.assumeIsolated { $0.add() } }
        case "bg": runtime.requestBackground()
        case "fg": runtime.requestForeground()
        case "memory": runtime.requestMemoryWarning()
        default: say("unknown command: \(line)")
        }
    }
    runtime.requestTermination()  // stdin closed
}

runtime.run()  // until terminated
say("terminated; loop closed cleanly: \(runtime.loopClosedCleanly ?? false)")
withExtendedLifetime(token) {}

/// Runs `body` on a new detached thread.
func readOnOwnThread(_ body: @escaping @Sendable () -> Void) {
    final class Body: Sendable {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }
    var thread = pthread_t()
    let context = Unmanaged.passRetained(Body(body)).toOpaque()
    let created = pthread_create(
        &thread, nil,
        { context in
            Unmanaged<Body>.fromOpaque(context!).takeRetainedValue().run()
            return nil
        }, context)
    guard created == 0 else { fatalError("cannot start the stdin reader: error \(created)") }
    pthread_detach(thread)
}

/// Writes `line` to standard output at once: a pipe to journald, a supervisor or a test
/// sees each event when it happens, not when a buffer fills.
func say(_ line: String) {
    var text = line + "\n"
    text.withUTF8 { bytes in _ = write(STDOUT_FILENO, bytes.baseAddress, bytes.count) }
}
