// A daemon whose schedule has a request in every state, for the dashboard's browser tests:
// it owns its SQLite store and listens on a control socket, as a real daemon does.
//
//   dashboard-fixture-daemon --store DIR/schedule.db --control-socket DIR/control.sock
//   dashboard-fixture-daemon --postgres URL --name NAME --control-socket DIR/control.sock  (a fleet's instance)
//   dashboard-fixture-daemon --postgres URL --name NAME --member-only
//
// In a fleet each instance also keeps a request of its own, `local.rotate` (due in a day). A
// member only connects and submits that request, and runs nothing (it does not start its
// scheduler): killed, it is an instance that died, for the dashboard to retire.
//   dashboard-fixture-daemon --store DIR/schedule.db --seed-orphan  (before the daemon: see below)
//
// Requests by prefix: `ok.` succeed, `fail.` fail, `hang.` report 40 % and never complete (a grant of an
// hour), `xss.` fail with markup in their output. Control commands it adds: `submit ID`
// (a one-shot due in an hour) for tests that need the schedule to change.

import Foundation
import Overtime
import OvertimePostgres
import OvertimeScheduler

func option(_ name: String) -> String? {
    let arguments = CommandLine.arguments
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let memberOnly = CommandLine.arguments.contains("--member-only")
let database: ScheduleDatabase
if let url = option("--postgres"), let name = option("--name") {
    var fleet = try PostgresScheduleConfiguration(url: url)
    fleet.instanceName = name
    database = .postgres(fleet)
} else if let store = option("--store") {
    database = .sqlite(path: store)
} else {
    FileHandle.standardError.write(
        Data("usage: dashboard-fixture-daemon (--store PATH | --postgres URL --name NAME) --control-socket PATH\n".utf8)
    )
    exit(64)
}
let isFleet = option("--postgres") != nil
var runtimeConfiguration = RuntimeConfiguration()
runtimeConfiguration.controlSocket = option("--control-socket").map(SocketEndpoint.path)
let runtime = try Runtime(configuration: runtimeConfiguration)
var configuration = SchedulerConfiguration(database: database)
configuration.maximumConcurrentRuns = 1
configuration.startSpacing = .zero
let scheduler = try Scheduler(runtime: runtime, configuration: configuration)
try scheduler.register(prefix: "ok.") { task in task.setTaskCompleted(success: true) }
try scheduler.register(prefix: "local.") { task in task.setTaskCompleted(success: true) }
if isFleet {
    var local = ScheduledTaskRequest(identifier: "local.rotate")
    local.scope = .perInstance
    local.earliestBegin = runtime.clock.wallClockNow + .seconds(86_400)
    try scheduler.submit(local)
}
// A request no started program has a handler for, `orphan.waits` (due now): submitted by a
// program that never starts its scheduler — a fleet's member, or this fixture run once with
// `--seed-orphan` before the daemon — as a request a program dropped the handler of stays.
if memberOnly || CommandLine.arguments.contains("--seed-orphan") {
    try scheduler.register(prefix: "orphan.") { task in task.setTaskCompleted(success: true) }
    try scheduler.submit(ScheduledTaskRequest(identifier: "orphan.waits"))
    if !memberOnly {
        say("SEEDED")
        exit(0)
    }
}
if memberOnly {
    say("READY")
    runtime.start()
    runtime.waitUntilTerminated()
    exit(0)
}
try scheduler.register(prefix: "fail.") { task in task.setTaskCompleted(success: false) }
try scheduler.register(prefix: "hang.") { task in
    task.expirationHandler = { task.setTaskCompleted(success: false) }
    task.setProgress(0.4, message: "segment 2 of 5")
}
try scheduler.register(prefix: "xss.") { task in
    try? task.setOutput(Array("<script>alert('output')</script>".utf8))
    task.setTaskCompleted(success: false)
}
// Answered later, from the async submit: a command runs on the loop, which the
// synchronous form would hold until the store answered (it refuses there).
_ = runtime.addControlCommand(
    "submit",
    replying: { arguments, reply in
        guard let identifier = arguments.first else {
            return reply(.failure(ControlCommandError("usage: submit ID [TAG...]")))
        }
        var request = ScheduledTaskRequest(identifier: identifier)
        request.tags = Set(arguments.dropFirst())
        request.earliestBegin = runtime.clock.wallClockNow + .seconds(3600)
        Task {
            do {
                try await scheduler.submit(request)
                reply(.success("submitted '\(identifier)'"))
            } catch {
                reply(.failure(ControlCommandError("\(error)")))
            }
        }
    })
runtime.start()
try scheduler.start()

func request(_ identifier: String, _ change: (inout ScheduledTaskRequest) -> Void = { _ in }) -> ScheduledTaskRequest {
    var request = ScheduledTaskRequest(identifier: identifier)
    change(&request)
    return request
}
let now = runtime.clock.wallClockNow
// What runs at once, first: its results are history before the hanging run takes the one slot.
try scheduler.submit(request("ok.done") { $0.tags = ["nightly"] })
try scheduler.submit(request("fail.broken") { $0.retry.maximumAttempts = 1 })
try scheduler.submit(request("fail.retrying") { $0.retry.initialDelay = .seconds(3600) })
try scheduler.submit(request("xss.<img src=x onerror=alert(1)>") { $0.retry.maximumAttempts = 1 })
// A kilobyte-long identifier, and one with a right-to-left override that would show it reversed.
let long = "fail.long-" + String(repeating: "x", count: 1014)
try scheduler.submit(request(long) { $0.retry.maximumAttempts = 1 })
try scheduler.submit(request("fail.invoice-\u{202E}gnp.exe") { $0.retry.maximumAttempts = 1 })
let first = [
    "ok.done", "fail.broken", "fail.retrying", "xss.<img src=x onerror=alert(1)>", long, "fail.invoice-\u{202E}gnp.exe",
]
for _ in 0..<1000 {
    guard first.contains(where: { (try? scheduler.history($0, limit: 1))?.isEmpty ?? true }) else { break }
    usleep(10_000)
}
try scheduler.submit(request("hang.running") { $0.maximumDuration = .seconds(3600) })
for _ in 0..<500 {
    guard (try? scheduler.workInfo("hang.running"))??.state != .running else { break }
    usleep(10_000)
}
try scheduler.submit(
    request("ok.later") {
        $0.earliestBegin = now + .seconds(86_400)
        $0.tags = ["weekly"]
    })
try scheduler.submit(
    request("ok.link") {
        $0.prerequisites = ["ok.later"]
        $0.tags = ["nightly", "eu"]
    })
try scheduler.submit(request("ok.background") { $0.requirements = [.background] })
try scheduler.submit(request("ok.queued"))
try scheduler.submit(
    request("ok.hourly") {
        $0.repetition = Repetition(every: .seconds(3600), flex: .seconds(600))
        $0.earliestBegin = now + .seconds(3600)
        $0.tags = ["weekly"]
    })
try scheduler.submit(
    request("ok.nightly") { $0.repetition = Repetition(on: try! CalendarSchedule("*-*-* 02:30 UTC")) })
try scheduler.submit(request("ok.gone") { $0.earliestBegin = now + .seconds(60) })
try scheduler.cancel("ok.gone")
for _ in 0..<1000 {
    guard (try? scheduler.workInfo("ok.gone"))??.state != .cancelled else { break }
    usleep(10_000)
}
say("READY")
runtime.waitUntilTerminated()
