import Foundation
import NIOConcurrencyHelpers
import Overtime
import OvertimePostgres
import OvertimeScheduler
import PostgresTestServer
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Fleets of worker processes on a real PostgreSQL 15: workers killed with SIGKILL, the
/// database crashed and restarted, clocks that are wrong.
/// One test at a time: several fleets' workers at once would overrun two cores. The
/// fifty kills (``FleetKillTests``) run beside them.
@Suite("A fleet of worker processes sharing one schedule", .serialized, .blockingFleet)
struct FleetTests {
    /// A scheduler in the test process that submits and reads history; never started, so
    /// it claims nothing (its handlers, which a submission needs, never run).
    static func observer(_ server: PostgresServer) throws -> Scheduler {
        let scheduler = try Scheduler(
            runtime: try PostgresSchedulerTests.runtime(), configuration: PostgresSchedulerTests.configuration(server))
        for prefix in ["one.", "tick.", "more."] {
            try scheduler.register(prefix: prefix) { task in task.setTaskCompleted(success: false) }
        }
        return scheduler
    }

    /// One-shot requests `one.0`… due `spacing` apart from `start`, retried after 10 s.
    static func oneShots(_ count: Int, from start: Int64, spacing: Duration) -> [ScheduledTaskRequest] {
        (0..<count).map { index in
            var request = ScheduledTaskRequest(identifier: "one.\(index)")
            request.earliestBegin = WallClockInstant(
                nanosecondsSinceEpoch: start + Int64(index) * Int64(spacing.components.attoseconds / 1_000_000_000))
            request.retry.initialDelay = .seconds(10)
            return request
        }
    }

    /// Repeating requests `tick.0`… every second.
    static func ticks(_ count: Int) -> [ScheduledTaskRequest] {
        (0..<count).map { index in
            var request = ScheduledTaskRequest(identifier: "tick.\(index)")
            request.repetition = Repetition(every: .seconds(1))
            request.retry.initialDelay = .seconds(10)
            return request
        }
    }

    /// Every one-shot succeeded once in the history; the problems found otherwise.
    static func completedOnce(_ observer: Scheduler, count: Int) throws -> [String] {
        var problems: [String] = []
        var runIDs = Set<Int64>()
        for index in 0..<count {
            let history = try observer.history("one.\(index)")
            let succeeded = history.filter { $0.result == .succeeded }
            if succeeded.count != 1 { problems.append("one.\(index): \(history)") }
            if let run = succeeded.first, !runIDs.insert(run.runID).inserted {
                problems.append("one.\(index): run ID \(run.runID) is another request's too")
            }
        }
        return problems
    }

    /// Repeating requests ran once per planned time: no due time under two run IDs.
    static func oncePerPlannedTime(_ log: FleetLog) -> [String] {
        var runsByDue: [String: Set<Int64>] = [:]
        for execution in log.executions where !execution.identifier.hasPrefix("one.") {
            runsByDue["\(execution.identifier) due \(execution.due)", default: []].insert(execution.runID)
        }
        return runsByDue.filter { $0.value.count > 1 }.map { "\($0.key) ran as runs \($0.value.sorted())" }
    }

    static func waitFor(_ seconds: Double, _ condition: () throws -> Bool) -> Bool {
        PostgresSchedulerTests.eventually(seconds) { (try? condition()) ?? false }
    }

    @Test func theDatabaseCrashingTwiceDuringRunsLosesNothingAndCompletesNothingTwice() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let observer = try Self.observer(server)
        let fleet = try Fleet(
            server: server, count: 2,
            environment: ["OVERTIME_FLEET_WORK_MS": "200", "OVERTIME_FLEET_CLAIM_MS": "15000"])
        defer { fleet.removeFolder() }
        let start = Fleet.realNow() + 1_000_000_000
        try observer.submit(contentsOf: Self.oneShots(300, from: start, spacing: .milliseconds(40)))
        for pause: useconds_t in [4_000_000, 4_000_000] {
            usleep(pause)
            try server.restartImmediately()
        }
        let drained = Self.waitFor(90) { try observer.pendingRequestCount() == 0 }
        fleet.stop()
        #expect(drained, "the one-shots ran within 90 s\n\(fleet.output())")
        let log = try FleetLog(path: fleet.logPath, killedAt: [:])
        #expect(log.overlaps().isEmpty, "\(log.overlaps().prefix(10))")
        #expect(try Self.completedOnce(observer, count: 300).isEmpty)
        // Each handler completed once: none ran again because its end was not recorded.
        let completions = log.count("ok")
        let twice = completions.filter { $0.value != 1 }
        let said = fleet.output().split(separator: "\n").filter { line in twice.keys.contains { line.contains($0) } }
        #expect(
            completions.count == 300 && twice.isEmpty,
            "\(completions.count) completed; twice: \(twice)\n\(log.describe(twice.keys))\n\(said.joined(separator: "\n"))"
        )
        observer.runtime.requestTermination()
    }

    /// The rest of the fleet reads the schedule no more when a worker starts a run and then
    /// dies: they must have learnt of the run's claim (or that it was being claimed) when
    /// they last read, to take the run over when the claim ends.
    @Test func aRunStartedWhileTheRestOfTheFleetReadsNothingIsTakenOverWhenItsWorkerDies() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        // In this process, an instance busy with a run of its own (its limit is one), so
        // that it cannot claim the next request itself; then it hears of nothing more.
        var configuration = PostgresSchedulerTests.configuration(server, claim: .seconds(3), name: "watcher")
        configuration.maximumConcurrentRuns = 1
        let watcher = try Scheduler(runtime: try PostgresSchedulerTests.runtime(), configuration: configuration)
        let busy = NIOLockedValueBox<ScheduledTask?>(nil)
        let ran = NIOLockedValueBox<[String]>([])
        try watcher.register(prefix: "one.") { task in
            if task.identifier == "one.busy" {
                busy.withLockedValue { $0 = task }
                return
            }
            ran.withLockedValue { $0.append("\(task.identifier) \(task.runID)/\(task.attempt)") }
            task.setTaskCompleted(success: true)
        }
        try watcher.start()
        try watcher.submit(ScheduledTaskRequest(identifier: "one.busy"))
        #expect(Self.waitFor(30) { busy.withLockedValue { $0 } != nil })
        // A worker whose runs last ten minutes claims the next request.
        let fleet = try Fleet(server: server, count: 1, environment: ["OVERTIME_FLEET_WORK_MS": "600000"])
        defer { fleet.removeFolder() }
        let logText = { (try? String(contentsOfFile: fleet.logPath, encoding: .utf8)) ?? "" }
        #expect(Self.waitFor(30) { logText().contains("ready") }, "\(fleet.output())")
        try watcher.submit(ScheduledTaskRequest(identifier: "one.0"))
        #expect(Self.waitFor(30) { logText().contains("start one.0") }, "\(fleet.output())")
        fleet.killForGood(0)
        // Its claim ends within 3 s: the watcher records the attempt as interrupted.
        let takenOver = Self.waitFor(15) { try watcher.history("one.0").contains { $0.result == .interrupted } }
        #expect(takenOver, "history: \((try? watcher.history("one.0")) ?? [])")
        // Its own run done, the watcher runs the retry: the same run, attempt 2.
        busy.withLockedValue { $0 }?.setTaskCompleted(success: true)
        #expect(Self.waitFor(15) { ran.withLockedValue { $0 }.count == 1 })
        // Its end is written by the scheduler's next cycle, after the handler returns.
        #expect(Self.waitFor(15) { try watcher.history("one.0").first?.result == .succeeded })
        let history = try watcher.history("one.0")
        #expect(history.map(\.result) == [.succeeded, .interrupted], "\(history)")
        #expect(ran.withLockedValue { $0 }.first?.hasSuffix("/2") == true, "\(ran.withLockedValue { $0 })")
        fleet.stop()
        watcher.runtime.requestTermination()
    }

    /// A worker frozen (SIGSTOP) past its claim while its run's effect waits on a timer:
    /// another worker takes the run over and performs it; the frozen one, resumed, stops
    /// the run before its timer can act, and its late end is recorded as superseded.
    @Test func aWorkerPausedPastItsClaimDoesNotActForTheRunOnResuming() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let fleet = try Fleet(
            server: server, count: 1,
            environment: ["OVERTIME_FLEET_WORK_MS": "4000", "OVERTIME_FLEET_CLAIM_MS": "3000"])
        defer { fleet.removeFolder() }
        let logText = { (try? String(contentsOfFile: fleet.logPath, encoding: .utf8)) ?? "" }
        #expect(Self.waitFor(30) { logText().contains("ready") }, "\(fleet.output())")
        // Submits and reads; never started, it claims nothing.
        var configuration = PostgresSchedulerTests.configuration(server, claim: .seconds(3), name: "observer")
        configuration.maximumConcurrentRuns = 1
        let observer = try Scheduler(runtime: try PostgresSchedulerTests.runtime(), configuration: configuration)
        defer { observer.runtime.requestTermination() }
        try observer.register(prefix: "pause.") { $0.setTaskCompleted(success: false) }
        try observer.submit(ScheduledTaskRequest(identifier: "pause.job"))
        #expect(Self.waitFor(30) { logText().contains("start pause.job") }, "\(fleet.output())")
        fleet.signal(0, SIGSTOP)
        try fleet.add()
        // The second worker takes the run over once the claim ends and performs it.
        #expect(Self.waitFor(30) { logText().contains("effect pause.job") }, "\(logText())")
        fleet.signal(0, SIGCONT)
        #expect(Self.waitFor(30) { logText().contains("expired") }, "the resumed worker stopped the run: \(logText())")
        #expect(
            Self.waitFor(30) { try observer.history("pause.job").last?.result == .superseded },
            "\((try? observer.history("pause.job")) ?? [])")
        usleep(5_000_000)  // the resumed worker's timer was due long ago: give it every chance to act
        let effects = logText().split(separator: "\n").filter { $0.hasPrefix("effect ") }
        #expect(effects.count == 1, "one effect: \(effects)")
        #expect(effects.first?.split(separator: " ").dropFirst(4).first == "true", "held when acting: \(effects)")
        let history = try observer.history("pause.job")
        #expect(history.map(\.result) == [.succeeded, .superseded], "\(history)")
        #expect(history.last?.stopReason?.contains("after its claim was taken over") == true, "\(history)")
        fleet.stop()
        #expect(fleet.output().contains("stopping the runs whose claims may have ended"), "\(fleet.output())")
    }

    /// The database stopped (SIGSTOP: a hung server, a frozen VM): a worker entering the
    /// background, asked for its status and its schedule, and whose handler submits more
    /// work through the async API meanwhile, keeps its loop answering and is never killed by
    /// its own watchdog, whose limit is 2 s (the store's calls end within half of it). The
    /// handler's submit, queued behind the scheduler's own reads, fails within a few
    /// seconds: once a connection has gone unanswered, the calls after it fail at once
    /// rather than each waiting its deadline (behind eleven of them, it once waited past
    /// the test's twelve seconds). Asked for its schedule meanwhile, it says it cannot read
    /// it; once the database is back, it shows it.
    @Test func aStoppedDatabaseNeverStallsTheLoopNorTripsTheWatchdog() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let observer = try Self.observer(server)
        let socket = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-\(UUID().uuidString).sock")
            .path
        let fleet = try Fleet(
            server: server, count: 1,
            environment: ["OVERTIME_CONTROL_SOCKET": socket, "OVERTIME_FLEET_WATCHDOG_MS": "2000"])
        defer { fleet.removeFolder() }
        let logText = { (try? String(contentsOfFile: fleet.logPath, encoding: .utf8)) ?? "" }
        #expect(Self.waitFor(30) { logText().contains("ready") }, "\(fleet.output())")
        try observer.submit(contentsOf: Self.ticks(2) + [ScheduledTaskRequest(identifier: "more.0")])
        #expect(Self.waitFor(30) { logText().contains("start tick.") }, "\(fleet.output())")
        #expect(Self.waitFor(30) { logText().contains("start more.0 ") }, "\(fleet.output())")

        server.signalAll(SIGSTOP)
        defer { server.signalAll(SIGCONT) }
        // The handler in progress now submits `more.1`, awaiting the stopped database.
        #expect(FileManager.default.createFile(atPath: fleet.logPath + ".go", contents: nil))
        let background = try ControlLine(socket)
        #expect(background.ask("background", waitingSeconds: 5)?.contains(#""ok":true"#) == true)
        let schedule = try ControlLine(socket)
        schedule.send("schedule")
        // Past the watchdog's limit several times and past the store's operation timeout:
        // every status is answered, and the worker lives on. It is in the background while
        // the run in progress holds its grant, and suspended from when that run stops (its
        // claim could not be renewed) and the grant ends: which of the two a status sees
        // depends on when it asks, but never back from suspended, nor any other state.
        var suspendedAt: Int?
        for second in 0..<12 {
            let status = try ControlLine(socket).ask("status", waitingSeconds: 5)
            let background = status?.contains(#""state":"background""#) == true
            let suspended = status?.contains(#""state":"suspended""#) == true
            if suspended, suspendedAt == nil { suspendedAt = second }
            #expect(
                suspendedAt == nil ? background : suspended,
                "second \(second), suspended since \(suspendedAt.map(String.init) ?? "never"): \(status ?? "no answer")"
            )
            #expect(fleet.workers[0].isRunning, "second \(second): \(fleet.output())")
            usleep(1_000_000)
        }
        #expect(logText().contains("resubmit failed more.1 store"), "\(logText())\n\(fleet.output())")
        // Asked while the database was stopped, the schedule is said to be unreadable, not
        // shown as empty.
        let unread = schedule.readLine(waitingSeconds: 30)
        #expect(
            unread?.contains(#""ok":false"#) == true && unread?.contains("cannot read the pending requests") == true,
            "\(unread ?? "no answer")")
        server.signalAll(SIGCONT)
        var table: String?
        #expect(
            Self.waitFor(60) {
                table = try ControlLine(socket).ask("schedule", waitingSeconds: 5)
                return table?.contains(#""ok":true"#) == true
            }, "the schedule is answered once the database is back: \(table ?? "none")")
        // The repeating ticks stay pending whatever ran since (more.0 may have been retried).
        #expect(table?.contains("tick.0") == true && table?.contains("tick.1") == true, "\(table ?? "none")")
        #expect(fleet.workers[0].isRunning, "\(fleet.output())")
        fleet.stop()
        #expect(fleet.workers[0].terminationStatus != WatchdogPolicy.defaultExitStatus, "\(fleet.output())")
        #expect(!fleet.output().contains("watchdog"), "\(fleet.output())")
        observer.runtime.requestTermination()
    }

    @Test(arguments: [600_000, -600_000])
    func aWorkerWhoseClockIsWrongRunsNothingEarlyNorLate(skewMilliseconds: Int) throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let observer = try Self.observer(server)
        let fleet = try Fleet(server: server, count: 1, environment: ["OVERTIME_FLEET_SKEW_MS": "\(skewMilliseconds)"])
        defer { fleet.removeFolder() }
        let start = Fleet.realNow() + 2_000_000_000
        let requests = Self.oneShots(40, from: start, spacing: .milliseconds(50))
        try observer.submit(contentsOf: requests + Self.ticks(2))
        let drained = Self.waitFor(30) { try observer.pendingRequestCount() == 2 }
        usleep(3_000_000)  // a few planned times of the repeating requests
        fleet.stop()
        #expect(drained, "\(fleet.output())")
        let log = try FleetLog(path: fleet.logPath, killedAt: [:])
        let dueAt = Dictionary(
            uniqueKeysWithValues: requests.map { ($0.identifier, $0.earliestBegin!.nanosecondsSinceEpoch) })
        // Late counts from its planned time or the worker's previous start, whichever is
        // later: the scheduler starts due runs in cycles on its queue, a transaction in the
        // database each, and on a loaded machine (two `yes`, the main package's tests beside)
        // the 40 one-shots 50 ms apart queued behind each other's cycles, one.36 and one.37
        // starting 2.07 and 2.02 s after their times. A worker planning by its own clock
        // would sit idle past a run's time.
        var previousStart: Int64?
        for execution in log.executions.sorted(by: { $0.startedReal < $1.startedReal }) {
            // On this machine the database's clock is the real one.
            let due = dueAt[execution.identifier] ?? execution.due
            #expect(
                execution.startedReal >= due,
                "\(execution.identifier) started early by \(due - execution.startedReal) ns")
            let afterPrevious = previousStart.map { "\(execution.startedReal - $0) ns after the previous start" }
            #expect(
                execution.startedReal - max(due, previousStart ?? due) < 2_000_000_000,
                "\(execution.identifier) started late by \(execution.startedReal - due) ns, \(afterPrevious ?? "the first")"
            )
            previousStart = execution.startedReal
        }
        #expect(log.executions.filter { $0.identifier.hasPrefix("one.") }.count == 40)
        #expect(log.executions.filter { $0.identifier.hasPrefix("tick.") }.count >= 4)
        observer.runtime.requestTermination()
    }
}

/// A seeded generator, so that a failing run can be repeated (`OVERTIME_TEST_SEED`).
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// One connection to a control socket, one JSON request line at a time.
final class ControlLine {
    private let fd: Int32
    private var pending: [UInt8] = []

    init(_ path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.prefix(raw.count - 1).enumerated() { raw[index] = byte }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else { throw ServerError("cannot connect to \(path): errno \(errno)") }
    }

    deinit { close(fd) }

    func send(_ command: String) {
        let line = Array("{\"command\":\"\(command)\"}\n".utf8)
        _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }

    /// The next answer line, or `nil` when none comes within `waitingSeconds`.
    func readLine(waitingSeconds: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            if let end = pending.firstIndex(of: UInt8(ascii: "\n")) {
                defer { pending.removeSubrange(...end) }
                return String(decoding: pending[..<end], as: UTF8.self)
            }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, waitingSeconds * 1000) == 1 else { return nil }
            let count = read(fd, &buffer, buffer.count)
            guard count > 0 else { return nil }
            pending += buffer[0..<count]
        }
    }

    func ask(_ command: String, waitingSeconds: Int32) -> String? {
        send(command)
        return readLine(waitingSeconds: waitingSeconds)
    }
}
