// A worker of a test fleet: a scheduler on the PostgreSQL database the `PG*` environment
// variables name, running every `one.*`, `tick.*`, `pause.*` and `more.*` request it claims. Each run appends
// a `start` line and an `end` line to the file `OVERTIME_FLEET_LOG` names, so that the
// tests can check, across processes killed with SIGKILL, that no run executed in two
// places at once and that each ran as often as it should.
//
// Environment: OVERTIME_FLEET_LOG (required), OVERTIME_FLEET_WORK_MS (a run's length,
// default 20, drawn from half to one and a half of it), OVERTIME_FLEET_CLAIM_MS (the
// claim's duration, default 3000), OVERTIME_FLEET_SKEW_MS (this worker's wall clock is
// wrong by this much: its scheduler reads the system's shifted by it), OVERTIME_FLEET_NAME
// (the instance name; with it the worker also submits its own `local.tick`, every second,
// per instance, logged as `local.tick@NAME`), OVERTIME_CONTROL_SOCKET (a control socket at
// that path), OVERTIME_FLEET_WATCHDOG_MS (the runtime's watchdog limit, default 10 s).

import Dispatch
import Foundation
import Overtime
import OvertimePostgres
import OvertimeScheduler

/// The system's clocks, the wall clock shifted: a machine whose clock is wrong.
struct SkewedClock: RuntimeClock {
    let skew: Int64
    var now: MonotonicInstant { SystemClock().now }
    var wallClockNow: WallClockInstant {
        WallClockInstant(nanosecondsSinceEpoch: SystemClock().wallClockNow.nanosecondsSinceEpoch + skew)
    }
}

/// Appends whole lines to the log with one `write(2)` each (O_APPEND: lines of several
/// processes never interleave).
final class RunLog: Sendable {
    let descriptor: Int32

    init(path: String) {
        descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT, 0o644)
        guard descriptor >= 0 else { fatalError("cannot open \(path)") }
    }

    func append(_ line: String) {
        var line = line + "\n"
        line.withUTF8 { bytes in _ = write(descriptor, bytes.baseAddress, bytes.count) }
    }
}

func clockReadings() -> String {
    var real = timespec()
    var monotonic = timespec()
    clock_gettime(CLOCK_REALTIME, &real)
    clock_gettime(CLOCK_MONOTONIC, &monotonic)
    return "\(Int64(real.tv_sec) * 1_000_000_000 + Int64(real.tv_nsec)) "
        + "\(Int64(monotonic.tv_sec) * 1_000_000_000 + Int64(monotonic.tv_nsec))"
}

let environment = ProcessInfo.processInfo.environment
guard let logPath = environment["OVERTIME_FLEET_LOG"] else { fatalError("OVERTIME_FLEET_LOG is not set") }
let log = RunLog(path: logPath)
let workMilliseconds = Int(environment["OVERTIME_FLEET_WORK_MS"] ?? "") ?? 20
let pid = getpid()

let claim = Duration.milliseconds(Int(environment["OVERTIME_FLEET_CLAIM_MS"] ?? "") ?? 3000)
var runtimeConfiguration = RuntimeConfiguration()
runtimeConfiguration.systemdNotify = false
runtimeConfiguration.controlSocket = environment["OVERTIME_CONTROL_SOCKET"].map(SocketEndpoint.path)
if let watchdog = environment["OVERTIME_FLEET_WATCHDOG_MS"].flatMap({ Int($0) }) {
    runtimeConfiguration.watchdogTimeout = .milliseconds(watchdog)
}
let skew = Int64(environment["OVERTIME_FLEET_SKEW_MS"] ?? "") ?? 0
let runtime = try Runtime(configuration: runtimeConfiguration, clock: SkewedClock(skew: skew * 1_000_000))

let name = environment["OVERTIME_FLEET_NAME"]
var database = try PostgresScheduleConfiguration.environment()  // PGHOST, PGPORT, PGUSER, …
database.claimDuration = claim
database.claimMargin = claim / 3
var configuration = SchedulerConfiguration(database: .postgres(database))
if let name {  // a name of its own, kept across restarts: its per-instance requests are under it
    database.instanceName = name
    configuration = SchedulerConfiguration(database: .postgres(database))
}
// Each call to the database within half the watchdog's limit, as the store requires.
if let watchdog = runtimeConfiguration.watchdogTimeout, database.operationTimeout * 2 > watchdog {
    database.operationTimeout = watchdog / 2
    configuration.database = .postgres(database)
}
configuration.maximumConcurrentRuns = 64
configuration.startSpacing = .zero
let scheduler = try Scheduler(runtime: runtime, configuration: configuration)

for prefix in ["one.", "tick.", "local."] {
    try scheduler.register(prefix: prefix) { task in
        let identifier = prefix == "local." ? "\(task.identifier)@\(name ?? "")" : task.identifier
        let run = "\(identifier) \(task.runID) \(task.attempt)"
        log.append("start \(run) \(task.dueTime.nanosecondsSinceEpoch) \(clockReadings()) \(pid)")
        task.expirationHandler = {
            log.append("end \(run) \(clockReadings()) \(pid) expired")
            task.setTaskCompleted(success: false)
        }
        let work = Int.random(in: workMilliseconds / 2...workMilliseconds * 3 / 2)
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(work)) {
            guard !task.isExpired else { return }
            log.append("end \(run) \(clockReadings()) \(pid) ok")
            task.setTaskCompleted(success: true)
        }
    }
}
// `pause.*`: the effect comes from a timer on the runtime's loop after the run's length,
// logged as `effect RUN HELD` with what `isClaimHeld` said then; the expiration handler
// cancels it. A worker paused (SIGSTOP) past its claim must not perform it on resuming.
try scheduler.register(prefix: "pause.") { task in
    let run = "\(task.identifier) \(task.runID) \(task.attempt)"
    log.append("start \(run) \(task.dueTime.nanosecondsSinceEpoch) \(clockReadings()) \(pid)")
    let effect = runtime.schedule(after: .milliseconds(workMilliseconds)) {
        guard !task.isExpired else { return }
        log.append("effect \(run) \(task.isClaimHeld) \(task.fencingToken.attempt) \(pid)")
        task.setTaskCompleted(success: true)
    }
    task.expirationHandler = {
        effect.cancel()
        log.append("end \(run) \(clockReadings()) \(pid) expired")
        task.setTaskCompleted(success: false)
    }
}
// `more.N`: once the file `OVERTIME_FLEET_LOG.go` exists, the handler submits `more.N+1`
// through the async API (BGTaskScheduler's "resubmit in the handler"), logged as
// `resubmitted more.N+1` or `resubmit failed more.N+1 REASON`: what a handler does while
// the database is stopped, with the loop free meanwhile.
try scheduler.register(prefix: "more.") { (task: ScheduledTask) async throws in
    log.append("start \(task.identifier) \(task.runID) \(task.attempt) \(pid)")
    while !FileManager.default.fileExists(atPath: logPath + ".go") {
        try await Task.sleep(for: .milliseconds(10))
    }
    let next = "more.\((Int(task.identifier.dropFirst("more.".count)) ?? 0) + 1)"
    do throws(SchedulerError) {
        try await scheduler.submit(ScheduledTaskRequest(identifier: next))
        log.append("resubmitted \(next) \(pid)")
    } catch {
        log.append("resubmit failed \(next) \(error.code) \(pid)")
    }
}
try scheduler.start()
if name != nil {
    // As the `tick.*` requests, a run a kill or a stall ended retries after 10 s, not the
    // default 30 s (most of a test's 40 s of kills).
    var local = ScheduledTaskRequest(identifier: "local.tick")
    local.repetition = Repetition(every: .seconds(1))
    local.scope = .perInstance
    local.retry.initialDelay = .seconds(10)
    try scheduler.submit(local)  // at every start: kept where it stood
}
log.append("ready \(pid)")
runtime.run()
