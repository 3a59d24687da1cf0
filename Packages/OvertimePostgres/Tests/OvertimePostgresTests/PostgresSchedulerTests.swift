import Foundation
import Logging
import Metrics
import MetricsTestKit
import NIOConcurrencyHelpers
import Overtime
import OvertimeScheduler
import PostgresTestServer
import Testing

@testable import OvertimePostgres

/// Schedulers on a real PostgreSQL 15 that the test starts: a shared schedule, claims taken
/// over, a newer schema refused.
@Suite("The scheduler on PostgreSQL, shared by several instances", .blocking)
struct PostgresSchedulerTests {
    /// A runtime on the real clock, its loop on a thread of its own, without signal handling
    /// (the test process owns signals).
    /// A runtime on the loop of its own; `expirationLeadTime`: how long an expired run may
    /// go on before its grant is ended for it (longer than a test waits).
    static func runtime(expirationLeadTime: Duration? = nil) throws -> Runtime {
        var configuration = RuntimeConfiguration()
        if let expirationLeadTime {
            configuration.expirationLeadTime = expirationLeadTime
            configuration.backgroundBudget = expirationLeadTime * 2
        }
        configuration.signalHandling = nil
        configuration.systemdNotify = false
        configuration.watchdogTimeout = nil
        let runtime = try Runtime(configuration: configuration)
        runtime.start()
        return runtime
    }

    /// The metrics every store of this process reports to (bootstrapped before the first).
    static let metrics: TestMetrics = {
        let metrics = TestMetrics()
        MetricsSystem.bootstrap(metrics)
        return metrics
    }()

    static func configuration(
        _ server: PostgresServer, claim: Duration = .seconds(30), margin: Duration? = nil,
        reconnectInterval: Duration? = nil, operationTimeout: Duration? = nil, name: String? = nil
    ) -> SchedulerConfiguration {
        _ = metrics
        var database = PostgresScheduleConfiguration(host: "127.0.0.1", port: server.port, username: "postgres")
        if let name { database.instanceName = name }
        if let reconnectInterval { database.reconnectInterval = reconnectInterval }
        if let operationTimeout { database.operationTimeout = operationTimeout }
        database.claimDuration = claim
        database.claimMargin = margin ?? claim / 3
        var configuration = SchedulerConfiguration(database: .postgres(database))
        configuration.startSpacing = .zero
        configuration.maximumConcurrentRuns = 16
        return configuration
    }

    /// Waits up to `seconds` for `condition`.
    static func eventually(_ seconds: Double, _ condition: () throws -> Bool) rethrows -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            if try condition() { return true }
            usleep(20_000)
        }
        return try condition()
    }

    /// `body`'s result; what it throws is recorded with `step` first, so that a failure of a
    /// test calling the store many times names the call that failed.
    static func naming<T>(_ step: String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch {
            Issue.record("\(step): \(error)")
            throw error
        }
    }

    /// `body`'s result, as the synchronous ``naming(_:_:)`` for an asynchronous call.
    static func naming<T>(_ step: String, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch {
            Issue.record("\(step): \(error)")
            throw error
        }
    }

    /// Waits up to `seconds` for `condition`, which reads asynchronously (an inspector).
    static func eventually(_ seconds: Double, reading condition: () async throws -> Bool) async rethrows -> Bool {
        let end = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < end {
            if try await condition() { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return try await condition()
    }

    @Test func twoInstancesShareOneScheduleAndRunEachOneShotExactlyOnce() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let runs = NIOLockedValueBox<[String: [String]]>([:])
        var schedulers: [Scheduler] = []
        for name in ["a", "b"] {
            let scheduler = try Scheduler(runtime: try Self.runtime(), configuration: Self.configuration(server))
            try scheduler.register(prefix: "job.") { task in
                runs.withLockedValue { $0[task.identifier, default: []].append("\(name) run \(task.runID)") }
                task.setTaskCompleted(success: true)
            }
            try scheduler.start()
            schedulers.append(scheduler)
        }
        let identifiers = (0..<300).map { "job.\($0)" }
        try schedulers[0].submit(contentsOf: identifiers.map { ScheduledTaskRequest(identifier: $0) })
        let done = try Self.eventually(60) { try schedulers[1].pendingRequestCount() == 0 }
        #expect(done, "every one-shot ran within 60 s")
        let seen = runs.withLockedValue { $0 }
        for identifier in identifiers {
            #expect(seen[identifier]?.count == 1, "\(identifier): \(seen[identifier] ?? [])")
            let history = try schedulers[0].history(identifier)
            #expect(history.map(\.result) == [.succeeded], "\(identifier): \(history)")
        }
        let byInstance = Dictionary(grouping: seen.values.flatMap { $0 }, by: { $0.prefix(1) }).mapValues(\.count)
        #expect(byInstance.values.reduce(0, +) == identifiers.count)
        // Run IDs come from the database: unique across both instances.
        let runIDs = try identifiers.map { try schedulers[0].history($0).first!.runID }
        #expect(Set(runIDs).count == identifiers.count)
        for scheduler in schedulers { scheduler.runtime.requestTermination() }
    }

    /// A fleet's instance runs 32 at once unless told otherwise, however the database was
    /// named (at the configuration's making or set on one made for a file); a device's
    /// SQLite store keeps 4, and a limit set stays set whichever database is named after.
    @Test func aFleetsInstanceRunsThirtyTwoAtOnceByDefaultAndASetLimitHolds() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let database = ScheduleDatabase.postgres(
            PostgresScheduleConfiguration(host: "127.0.0.1", port: server.port, username: "postgres"))
        var named = SchedulerConfiguration(storePath: "/var/tmp/unused/schedule.db")
        #expect(named.maximumConcurrentRuns == 4)
        named.database = database
        #expect(named.maximumConcurrentRuns == 32)
        var set = SchedulerConfiguration(storePath: "/var/tmp/unused/schedule.db")
        set.maximumConcurrentRuns = 4
        set.database = database
        #expect(set.maximumConcurrentRuns == 4)
        let device = SchedulerConfiguration(database: .sqlite(path: "/var/tmp/unused/schedule.db"))
        #expect(device.maximumConcurrentRuns == 4)

        // At the default, 40 one-shots due whose handlers hold on: 32 start, 8 wait.
        var configuration = SchedulerConfiguration(database: database)
        configuration.startSpacing = .zero
        let scheduler = try Scheduler(runtime: try Self.runtime(), configuration: configuration)
        let held = NIOLockedValueBox<[ScheduledTask]>([])
        try scheduler.register(prefix: "held.") { task in held.withLockedValue { $0.append(task) } }
        try scheduler.start()
        try scheduler.submit(contentsOf: (0..<40).map { ScheduledTaskRequest(identifier: "held.\($0)") })
        #expect(Self.eventually(30) { held.withLockedValue(\.count) == 32 }, "32 runs started at once")
        // A cycle has nothing left to start while all 32 run: none more within a second.
        usleep(1_000_000)
        #expect(held.withLockedValue(\.count) == 32)
        for task in held.withLockedValue({ $0 }) { task.setTaskCompleted(success: true) }
        #expect(Self.eventually(30) { held.withLockedValue(\.count) == 40 }, "the other 8 started as slots freed")
        for task in held.withLockedValue({ $0.dropFirst(32) }) { task.setTaskCompleted(success: true) }
        #expect(try Self.eventually(30) { try scheduler.pendingRequestCount() == 0 })
        scheduler.runtime.requestTermination()
    }

    /// A submission kept by policy is one statement for the whole batch: a thousand requests
    /// in one statement a request were a thousand round trips under one operation's
    /// deadline, which a loaded machine took past it (3.0–3.4 s of 5 s under TSan alone,
    /// 4.5 s to the deadline with both cores busy). Every column arrives, and the
    /// submission numbers follow the batch's order.
    @Test func aBatchKeptByPolicyIsWrittenInOneStatementInItsOrder() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let scheduler = try Scheduler(
            runtime: try Self.runtime(), configuration: Self.configuration(server, name: "batch"))
        try scheduler.register(prefix: "batch.") { $0.setTaskCompleted(success: true) }
        try scheduler.submit(ScheduledTaskRequest(identifier: "batch.pending"))
        func roundTrips() throws -> Int {
            try Self.metrics.expectTimer("overtime_fleet_database_round_trip_seconds", [("fleet_instance", "batch")])
                .values.count
        }
        let before = try roundTrips()
        var requests = (0..<1000).reversed().map { ScheduledTaskRequest(identifier: "batch.\($0)") }
        requests[0].input = [0, 1, 2]
        requests[0].tags = ["nightly"]
        requests[1].repetition = Repetition(on: try CalendarSchedule("*-*-* 03:00:00 UTC"))
        requests[2].earliestBegin = WallClockInstant(nanosecondsSinceEpoch: 2_000_000_000_000_000_000)
        requests.append(ScheduledTaskRequest(identifier: "batch.pending"))  // kept: it is pending
        let outcomes = try scheduler.submit(contentsOf: requests)
        let statements = try roundTrips() - before
        #expect(statements < 20, "\(statements) round trips for one submission")
        #expect(outcomes.filter { $0 == .added }.count == 1000 && outcomes.last == .kept, "\(outcomes.suffix(3))")
        let order = try server.psql(
            "SELECT string_agg(identifier, ',' ORDER BY sequence) FROM overtime.requests WHERE identifier <> 'batch.pending'"
        )
        #expect(
            order.trimmingCharacters(in: .whitespacesAndNewlines)
                == requests.dropLast().map(\.identifier).joined(separator: ","))
        let first = try #require(try scheduler.workInfo("batch.999"))
        #expect(first.request.input == [0, 1, 2] && first.request.tags == ["nightly"])
        #expect(try scheduler.workInfo("batch.998")?.request.repetition?.calendar?.expression == "*-*-* 03:00:00 UTC")
        #expect(
            try scheduler.workInfo("batch.997")?.request.earliestBegin
                == WallClockInstant(nanosecondsSinceEpoch: 2_000_000_000_000_000_000))
        #expect(try scheduler.workInfo("batch.996")?.request == requests[3])
        scheduler.runtime.requestTermination()
    }

    @Test func aRunWhoseClaimEndsIsTakenOverRetriedWithTheSameRunIDAndTheLateEndSuperseded() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let started = NIOLockedValueBox<[String]>([])
        let expired = NIOLockedValueBox<[String]>([])
        // The first instance hangs in its run, and ends it only when the test says, after
        // the takeover: until then its one slot is taken, so the retry is the second's.
        // (With the slot freed at the expiry, the first instance took the retry itself in
        // busy run 138: it heard of the reclaim as the second did, and claimed sooner.)
        var firstConfiguration = Self.configuration(server, claim: .seconds(3), name: "first")
        firstConfiguration.maximumConcurrentRuns = 1
        let first = try Scheduler(
            runtime: try Self.runtime(expirationLeadTime: .seconds(120)), configuration: firstConfiguration)
        let dueTimes = NIOLockedValueBox<[(WallClockInstant, WallClockInstant)]>([])
        let hanging = NIOLockedValueBox<ScheduledTask?>(nil)
        try first.register("job") { task in
            dueTimes.withLockedValue { $0.append((task.dueTime, task.attemptDueTime)) }
            started.withLockedValue { $0.append("first \(task.runID)/\(task.attempt)") }
            hanging.withLockedValue { $0 = task }
            task.expirationHandler = {
                expired.withLockedValue { $0.append("first \(task.runID)/\(task.attempt)") }
            }
        }
        try first.start()
        try first.submit(ScheduledTaskRequest(identifier: "job"))
        #expect(Self.eventually(10) { !started.withLockedValue { $0 }.isEmpty })
        // Which instance holds the run: in the API, the control socket's table and metrics.
        let pending = first.pendingRequests()
        let holder = "first (\(ProcessInfo.processInfo.hostName):\(getpid()))"
        #expect(pending.map(\.holder) == [holder] && pending.map(\.waitingFor) == [.running], "\(pending)")
        #expect(try Self.metrics.expectGauge("overtime_fleet_held_runs", [("fleet_instance", "first")]).lastValue == 1)
        #expect(
            try Self.metrics.expectTimer("overtime_fleet_database_round_trip_seconds", [("fleet_instance", "first")])
                .values.count > 5)
        #expect(
            Self.eventually(10) {
                (try? Self.metrics.expectGauge("overtime_fleet_listen_connected", [("fleet_instance", "first")])
                    .lastValue) == 1
            })

        // Its claim ends as if its instance had died (the database says so), and stays ended
        // until the second instance takes the run over: the first, alive in this process,
        // renews its claims every second, and renewed this one before a second instance that
        // started under load looked for it (CI run 34: no instance ever took the run over).
        let expire =
            "UPDATE overtime.requests SET claim_until = now() - interval '1 second' WHERE running"
            + " AND claimed_by LIKE 'first %'"
        try server.psql(expire)
        let second = try Scheduler(
            runtime: try Self.runtime(), configuration: Self.configuration(server, claim: .seconds(3), name: "second"))
        try second.register("job") { task in
            dueTimes.withLockedValue { $0.append((task.dueTime, task.attemptDueTime)) }
            started.withLockedValue { $0.append("second \(task.runID)/\(task.attempt)") }
            task.setTaskCompleted(success: true)
        }
        try second.start()
        #expect(
            Self.eventually(15) {
                guard started.withLockedValue({ $0 }).count < 2 else { return true }
                _ = try? server.psql(expire)
                return false
            })
        // The first instance finds its claim taken at its next renewal and stops its run.
        #expect(Self.eventually(15) { !expired.withLockedValue { $0 }.isEmpty })
        hanging.withLockedValue { $0 }?.setTaskCompleted(success: false)
        let runs = started.withLockedValue { $0 }
        #expect(runs.count == 2 && runs[0].hasPrefix("first") && runs[1].hasPrefix("second"), "\(runs)")
        let history = try second.history("job")
        #expect(history.map(\.attempt) == [2, 1], "\(history)")
        // The first instance's end came after the takeover: it does not count, and says so.
        #expect(
            Self.eventually(15) { (try? second.history("job").last?.result) == .superseded },
            "\((try? second.history("job")) ?? [])")
        let recorded = try second.history("job")
        #expect(recorded.map(\.result) == [.succeeded, .superseded], "\(recorded)")
        #expect(Set(history.map(\.runID)).count == 1, "one run, two attempts: \(history)")
        // The takeover's attempt stands for the run's planned time; its own time is apart.
        let due = dueTimes.withLockedValue { $0 }
        #expect(due.count == 2 && due[1].0 == due[0].0, "the planned time kept: \(due)")
        #expect(due.count == 2 && due[0].1 == due[0].0 && due[1].1 > due[0].0, "the attempt's own time: \(due)")
        #expect(try second.pendingRequestCount() == 0)
        #expect(
            try Self.metrics.expectCounter("overtime_fleet_reclaimed_runs_total", [("fleet_instance", "second")])
                .totalValue
                == 1)
        #expect(
            try Self.metrics.expectCounter("overtime_fleet_lost_claims_total", [("fleet_instance", "first")]).totalValue
                == 1)
        first.runtime.requestTermination()
        second.runtime.requestTermination()
    }

    @Test func aPerInstanceRequestRunsOnEveryInstanceAndASharedOneOncePerPeriodAcrossThem() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        struct Run: Sendable {
            let instance: String
            let identifier: String
            let due: Int64
        }
        let runs = NIOLockedValueBox<[Run]>([])
        var local = ScheduledTaskRequest(identifier: "local.rotate")
        local.repetition = Repetition(every: .seconds(1))
        local.scope = .perInstance
        var shared = ScheduledTaskRequest(identifier: "fleet.tick")
        shared.repetition = Repetition(every: .seconds(1))
        // What each instance does at every start: register, start, submit (kept if there).
        func instance(_ name: String) throws -> Scheduler {
            let scheduler = try Scheduler(
                runtime: try Self.runtime(), configuration: Self.configuration(server, claim: .seconds(3), name: name))
            for identifier in [local.identifier, shared.identifier] {
                try scheduler.register(identifier) { task in
                    runs.withLockedValue {
                        $0.append(
                            Run(instance: name, identifier: task.identifier, due: task.dueTime.nanosecondsSinceEpoch))
                    }
                    task.setTaskCompleted(success: true)
                }
            }
            try scheduler.start()
            try scheduler.submit(contentsOf: [local, shared])
            return scheduler
        }
        func count(_ name: String, _ identifier: String) -> Int {
            runs.withLockedValue { $0.filter { $0.instance == name && $0.identifier == identifier }.count }
        }
        func rows() throws -> String {
            try server.psql(
                "SELECT string_agg(identifier || '@' || owner, ',' ORDER BY identifier, owner) FROM overtime.requests"
            )
            .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let a = try instance("a")
        let b = try instance("b's")  // a quote in the name: kept a literal
        #expect(Self.eventually(20) { count("a", local.identifier) >= 4 && count("b's", local.identifier) >= 4 })
        // One row per instance for the per-instance request, one for the fleet's.
        #expect(try rows() == "fleet.tick@,local.rotate@a,local.rotate@b's")
        let seen = try #require(a.pendingRequests().first { $0.request.identifier == local.identifier })
        #expect(seen.request.scope == .perInstance && a.pendingRequests().count == 2, "\(a.pendingRequests())")

        // A restarted instance (same name) finds its own request where it stood, on its grid.
        a.runtime.requestTermination()
        let firstDue = try #require(
            runs.withLockedValue { $0.first { $0.instance == "a" && $0.identifier == local.identifier } }
        ).due
        let before = count("a", local.identifier)
        let again = try instance("a")
        #expect(try rows() == "fleet.tick@,local.rotate@a,local.rotate@b's", "submitted again: kept, not added")
        #expect(Self.eventually(10) { count("a", local.identifier) >= before + 2 })
        let dues = runs.withLockedValue { $0.filter { $0.identifier == local.identifier } }
        for name in ["a", "b's"] {
            let mine = dues.filter { $0.instance == name }.map(\.due)
            #expect(Set(mine).count == mine.count, "\(name) ran no planned time twice: \(mine)")
        }
        #expect(
            dues.filter { $0.instance == "a" }.allSatisfy { ($0.due - firstDue) % 1_000_000_000 == 0 }, "on the grid")
        // Each instance's history of its own request lists its own attempts only.
        let histories = try [("a", again), ("b's", b)].map { name, scheduler in
            (name, try scheduler.history(local.identifier).filter { $0.result != .running })
        }
        for (name, history) in histories {
            #expect(
                !history.isEmpty && history.count <= count(name, local.identifier),
                "\(name): \(history.count) attempts in its history, \(count(name, local.identifier)) runs")
        }
        #expect(
            Set(histories[0].1.map(\.runID)).isDisjoint(with: histories[1].1.map(\.runID)),
            "no attempt in both instances' histories")
        let ticks = runs.withLockedValue { $0.filter { $0.identifier == shared.identifier }.map(\.due) }
        #expect(ticks.count >= 4 && Set(ticks).count == ticks.count, "the fleet's request once per period: \(ticks)")

        // Submitted as shared, the request becomes the fleet's: every instance's own is gone.
        var fleetWide = local
        fleetWide.scope = .shared
        try b.submit(fleetWide, ifExists: .replace)
        #expect(try rows() == "fleet.tick@,local.rotate@")
        #expect(again.pendingRequests().first { $0.request.identifier == local.identifier }?.request.scope == .shared)
        again.runtime.requestTermination()
        b.runtime.requestTermination()
    }

    @Test func aCalendarRequestTwoInstancesShareRunsEachOfItsTimesOnceWithItsInputAndGoesByItsTag() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        struct Run: Sendable {
            let instance: String
            let due: Int64
            let input: [UInt8]
        }
        let runs = NIOLockedValueBox<[Run]>([])
        var request = ScheduledTaskRequest(identifier: "fleet.calendar")
        request.repetition = Repetition(on: try CalendarSchedule("*:*:* UTC"))
        request.tags = ["fleet", "every-second"]
        request.input = Array("payload".utf8)
        // What each instance does at every start: register, start, submit (kept if there).
        func instance(_ name: String) throws -> Scheduler {
            let scheduler = try Scheduler(
                runtime: try Self.runtime(), configuration: Self.configuration(server, claim: .seconds(3), name: name))
            try scheduler.register(request.identifier) { task in
                runs.withLockedValue {
                    $0.append(Run(instance: name, due: task.dueTime.nanosecondsSinceEpoch, input: task.input))
                }
                try? task.setOutput(Array(name.utf8))
                task.setTaskCompleted(success: true)
            }
            try scheduler.start()
            try scheduler.submit(request)
            return scheduler
        }
        let a = try instance("a")
        let b = try instance("b")
        #expect(Self.eventually(30) { runs.withLockedValue { $0.count } >= 6 })
        let seen = runs.withLockedValue { $0 }
        let dues = seen.map(\.due)
        #expect(Set(dues).count == dues.count, "each of the calendar's times once across the fleet: \(dues)")
        #expect(dues.allSatisfy { $0 % 1_000_000_000 == 0 }, "the calendar's whole seconds: \(dues)")
        #expect(seen.allSatisfy { $0.input == Array("payload".utf8) }, "the input reached every run")
        let outputs = try a.history(request.identifier).compactMap(\.output).map { String(decoding: $0, as: UTF8.self) }
        #expect(!outputs.isEmpty && Set(outputs).isSubset(of: ["a", "b"]), "\(outputs)")
        #expect(b.pendingRequests(tag: "every-second").map(\.request.identifier) == [request.identifier])
        #expect(try b.cancel(tag: "fleet") == 1, "cancelled by its tag from either instance")
        #expect(a.pendingRequests().isEmpty && b.pendingRequests().isEmpty)
        let after = runs.withLockedValue { $0.count }
        usleep(2_500_000)
        #expect(runs.withLockedValue { $0.count } <= after + 1, "no run starts once it is cancelled")
        a.runtime.requestTermination()
        b.runtime.requestTermination()
    }

    /// A repeating request cancelled on one instance while another runs it stays cancelled
    /// when that run ends: the end's plan, made before the cancellation, does not write the
    /// request's next time over it (it did, and the request ran on every second).
    @Test func aRequestCancelledElsewhereWhileItRunsStaysCancelledWhenItsRunEnds() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let held = NIOLockedValueBox<[ScheduledTask]>([])
        let a = try Scheduler(runtime: try Self.runtime(), configuration: Self.configuration(server, name: "a"))
        try a.register("job") { task in held.withLockedValue { $0.append(task) } }
        try a.start()
        var request = ScheduledTaskRequest(identifier: "job")
        request.repetition = Repetition(every: .seconds(1))
        try a.submit(request)
        #expect(Self.eventually(10) { held.withLockedValue { $0.count } == 1 })
        let b = try Scheduler(runtime: try Self.runtime(), configuration: Self.configuration(server, name: "b"))
        try b.register("job") { task in held.withLockedValue { $0.append(task) } }
        try b.start()
        try b.cancel("job")
        #expect(b.pendingRequests().isEmpty, "cancelled, its run still in progress on the other instance")
        held.withLockedValue { $0.first }?.setTaskCompleted(success: true)
        #expect(Self.eventually(10) { (try? a.history("job").first?.result) == .succeeded })
        #expect(a.pendingRequests().isEmpty && b.pendingRequests().isEmpty, "\(a.pendingRequests())")
        #expect(
            try server.psql("SELECT finished, running, due_at IS NULL, cancelled_at IS NOT NULL FROM overtime.requests")
                .trimmingCharacters(in: .whitespacesAndNewlines) == "t|f|t|t")
        #expect(held.withLockedValue { $0.count } == 1)
        a.runtime.requestTermination()
        b.runtime.requestTermination()
    }

    /// A chain whose links run on different instances (each serves only its own): every
    /// link runs once, after its prerequisite, with the output the other instance set; a
    /// failure on one instance fails the links that wait on it, as both instances see.
    @Test func aChainsLinksRunOnDifferentInstancesWithTheOutputsTheOthersSet() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let runs = NIOLockedValueBox<[(link: String, instance: String, handed: [String: [UInt8]])]>([])
        // The first link's run is held open until the test has seen the others wait on it.
        // (It was set two seconds ahead instead: under load the three submissions took
        // longer, and the first two links had run by the check, in fresh-clone run 51.)
        let heldFirst = NIOLockedValueBox<ScheduledTask?>(nil)
        func instance(_ name: String, serving links: [String]) throws -> Scheduler {
            let scheduler = try Scheduler(
                runtime: try Self.runtime(), configuration: Self.configuration(server, claim: .seconds(3), name: name))
            for link in links {
                try scheduler.register("chain.\(link)") { task in
                    runs.withLockedValue { $0.append((task.identifier, name, task.prerequisiteOutputs)) }
                    try? task.setOutput(Array("\(task.identifier) on \(name)".utf8))
                    if task.identifier == "chain.one" { return heldFirst.withLockedValue { $0 = task } }
                    task.setTaskCompleted(success: !task.identifier.hasSuffix("bad"))
                }
            }
            try scheduler.start()
            return scheduler
        }
        let a = try instance("a", serving: ["one", "three", "bad"])
        let b = try instance("b", serving: ["two", "after-bad"])
        // Each link submitted by the instance that serves it (a handler is needed to submit).
        func link(_ name: String, after: String? = nil) -> ScheduledTaskRequest {
            var request = ScheduledTaskRequest(identifier: "chain.\(name)")
            request.prerequisites = after.map { ["chain.\($0)"] } ?? []
            request.retry.maximumAttempts = 1
            return request
        }
        try a.submit(link("one"))
        try b.submit(link("two", after: "one"))
        try a.submit(link("three", after: "two"))
        #expect(try b.workInfo("chain.three")?.waitingFor == .prerequisite("chain.two"))
        #expect(try b.workInfo("chain.two")?.waitingFor == .prerequisite("chain.one"))
        #expect(Self.eventually(30) { heldFirst.withLockedValue { $0 } != nil }, "the first link runs")
        heldFirst.withLockedValue { $0 }?.setTaskCompleted(success: true)
        #expect(Self.eventually(30) { (try? a.workInfo("chain.three"))??.state == .succeeded })
        let seen = runs.withLockedValue { $0 }
        #expect(seen.map(\.link) == ["chain.one", "chain.two", "chain.three"], "each once, in order")
        #expect(seen.map(\.instance) == ["a", "b", "a"], "on the instance that serves it")
        #expect(seen[1].handed == ["chain.one": Array("chain.one on a".utf8)])
        #expect(seen[2].handed == ["chain.two": Array("chain.two on b".utf8)])
        #expect(try b.workInfo("chain.three")?.lastRun?.output == Array("chain.three on a".utf8))

        try a.submit(link("bad"))
        try b.submit(link("after-bad", after: "bad"))
        #expect(Self.eventually(30) { (try? b.workInfo("chain.after-bad"))??.state == .failed })
        #expect(try a.workInfo("chain.after-bad")?.stoppedBy == "chain.bad", "as the other instance sees it")
        #expect(!runs.withLockedValue { $0.map(\.link) }.contains("chain.after-bad"))
        a.runtime.requestTermination()
        b.runtime.requestTermination()
    }

    /// An index a migration adds to a schedule that holds requests is built beside the
    /// fleet's writes, not in the migration's transaction. While its build waits for a
    /// transaction that may write requests (an operator's, left open, that took the lock
    /// writers take), the instance that migrated and another one go on submitting, a batch
    /// large enough to analyse the table too; in the transaction, the migration's lock would
    /// have stopped both until that one ended. The build is cut short (its server process
    /// ended): the next instance to open the schedule, migrated already, builds the index.
    @Test func anIndexAMigrationAddsIsBuiltWhileTheFleetGoesOnWriting() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        func instance(_ logs: CapturedLogs = CapturedLogs()) throws -> Scheduler {
            var configuration = Self.configuration(server)
            configuration.logger = Logger(label: "test") { _ in logs }
            let scheduler = try Scheduler(runtime: try Self.runtime(), configuration: configuration)
            try scheduler.register(prefix: "job.") { $0.setTaskCompleted(success: true) }
            try scheduler.start()
            return scheduler
        }
        func dueInAnHour(_ identifier: String) -> ScheduledTaskRequest {
            var request = ScheduledTaskRequest(identifier: identifier)
            request.earliestBegin = WallClockInstant(secondsSinceEpoch: Int64(Date().timeIntervalSince1970) + 3600)
            return request
        }
        let psql = { (sql: String) in Self.answer(server, sql) }
        let a = try instance()
        defer { a.runtime.requestTermination() }
        try a.submit(dueInAnHour("job.0"))
        try Self.setBackToVersion21(server)
        let operatorsTransaction = try HeldSession(
            server, "BEGIN; LOCK TABLE overtime.requests IN ROW EXCLUSIVE MODE;")
        #expect(
            Self.eventually(30) {
                psql(
                    """
                    SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                    WHERE l.relation = 'overtime.requests'::regclass AND l.mode = 'RowExclusiveLock' AND l.granted
                        AND a.state = 'idle in transaction'
                    """) == "1"
            }, "the operator's transaction holds the writers' lock")

        let bLogs = CapturedLogs()
        let b = try instance(bLogs)
        defer { b.runtime.requestTermination() }
        #expect(b.pendingRequests().count == 1, "b opened the schedule")
        let building = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'CREATE INDEX CONCURRENTLY%'"
        #expect(
            Self.eventually(30) { psql(building + " AND wait_event_type = 'Lock'") == "1" },
            "the build waits for the operator's transaction")
        try b.submit(dueInAnHour("job.b"))
        try a.submit(contentsOf: (0..<PostgresScheduleStore.manyWrites).map { dueInAnHour("job.a.\($0)") })
        #expect(psql("SELECT value FROM overtime.meta WHERE name = 'schema_version'") == "22")
        #expect(psql("SELECT value FROM overtime.meta WHERE name = 'index requests_pending'") == "0", "to build")

        try server.psql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'CREATE INDEX CONCURRENTLY%'")
        #expect(Self.eventually(30) { bLogs.lines.contains { $0.contains("indexes not built yet") } })
        #expect(
            psql("SELECT indisvalid FROM pg_index WHERE indexrelid = 'overtime.requests_pending_building'::regclass")
                == "f", "left invalid")
        operatorsTransaction.end()

        let cLogs = CapturedLogs()
        let c = try instance(cLogs)
        defer { c.runtime.requestTermination() }
        // c says so after the commit that marks it: the mark may be read before the line.
        #expect(Self.eventually(30) { cLogs.lines.contains { $0.contains("built index requests_pending") } })
        #expect(psql("SELECT value FROM overtime.meta WHERE name = 'index requests_pending'") == "22")
        #expect(Self.pendingIndexHasItsVersion22Form(server))
        #expect(psql("SELECT count(*) FROM pg_indexes WHERE indexname LIKE '%_building'") == "0")
        #expect(
            c.pendingRequests().count == 2 + PostgresScheduleStore.manyWrites,
            "c's log: \(cLogs.lines.joined(separator: "\n"))")
    }

    /// While another session holds the builders' lock (an instance building, or the server
    /// process of one that stopped while its build went on), an instance that needs the index
    /// tries again at each reconnect interval, and builds it once the lock is free.
    @Test func anIndexAnotherSessionIsBuildingIsBuiltHereOnceItsLockIsFree() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let psql = { (sql: String) in Self.answer(server, sql) }
        let a = try Scheduler(runtime: try Self.runtime(), configuration: Self.configuration(server))
        try a.register("job") { $0.setTaskCompleted(success: true) }
        try a.start()
        _ = a.pendingRequests()
        a.runtime.requestTermination()
        try Self.setBackToVersion21(server)
        let builder = try HeldSession(server, "SELECT pg_advisory_lock(hashtext('overtime indexes'));")
        #expect(
            Self.eventually(30) {
                psql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted") == "1"
            })
        let b = try Scheduler(
            runtime: try Self.runtime(),
            configuration: Self.configuration(server, reconnectInterval: .milliseconds(200)))
        defer { b.runtime.requestTermination() }
        try b.register("job") { $0.setTaskCompleted(success: true) }
        try b.start()
        _ = b.pendingRequests()
        #expect(
            psql("SELECT value FROM overtime.meta WHERE name = 'index requests_pending'") == "0", "left to the other")
        builder.end()
        #expect(
            Self.eventually(30) {
                psql("SELECT value FROM overtime.meta WHERE name = 'index requests_pending'") == "22"
            })
        #expect(Self.pendingIndexHasItsVersion22Form(server))
    }

    /// The schedule as version 21 left it: the pending requests' index in its old form, and
    /// no mark of a newer one.
    static func setBackToVersion21(_ server: PostgresServer) throws {
        try server.psql(
            """
            DROP INDEX overtime.requests_pending;
            CREATE INDEX requests_pending ON overtime.requests (sequence) INCLUDE (owner, identifier) WHERE NOT finished;
            DELETE FROM overtime.meta WHERE name = 'index requests_pending';
            UPDATE overtime.meta SET value = 21 WHERE name = 'schema_version'
            """)
    }

    /// Whether the pending requests' index has the identifier as a key (version 22).
    static func pendingIndexHasItsVersion22Form(_ server: PostgresServer) -> Bool {
        answer(server, "SELECT indexdef FROM pg_indexes WHERE indexname = 'requests_pending'")
            .contains("(sequence, identifier) INCLUDE (owner)")
    }

    /// What `sql` answers on `server`, trimmed; empty if it fails.
    static func answer(_ server: PostgresServer, _ sql: String) -> String {
        ((try? server.psql(sql)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func aScheduleOfSchemaVersion1IsMigratedWithItsRequestsKept() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let first = try Scheduler(runtime: try Self.runtime(), configuration: Self.configuration(server))
        try first.register("hourly") { $0.setTaskCompleted(success: true) }
        try first.start()
        var hourly = ScheduledTaskRequest(identifier: "hourly")
        hourly.repetition = Repetition(every: .seconds(3600))
        hourly.earliestBegin = WallClockInstant(secondsSinceEpoch: Int64(Date().timeIntervalSince1970) + 600)
        try first.submit(hourly)
        let before = try #require(first.pendingRequests().first)
        first.runtime.requestTermination()
        // The tables as version 1 made them: no owner columns, the identifier alone the key,
        // the pending index without the owner.
        try server.psql(
            """
            ALTER TABLE overtime.history DROP COLUMN owner;
            ALTER TABLE overtime.requests DROP COLUMN owner;
            ALTER TABLE overtime.requests DROP COLUMN planned_at;
            ALTER TABLE overtime.requests DROP COLUMN calendar;
            ALTER TABLE overtime.requests DROP COLUMN grid_offset_ns;
            ALTER TABLE overtime.requests DROP COLUMN previous_window_at;
            ALTER TABLE overtime.requests DROP COLUMN tags;
            ALTER TABLE overtime.requests DROP COLUMN input;
            ALTER TABLE overtime.history DROP COLUMN output;
            ALTER TABLE overtime.requests DROP COLUMN cancelled_at;
            ALTER TABLE overtime.requests DROP COLUMN prerequisites;
            ALTER TABLE overtime.requests DROP COLUMN chain;
            ALTER TABLE overtime.requests DROP COLUMN has_dependents;
            DROP TABLE overtime.prerequisites;
            ALTER TABLE overtime.requests DROP COLUMN wakes_system;
            ALTER TABLE overtime.requests DROP COLUMN progress_run_id, DROP COLUMN progress_fraction,
                DROP COLUMN progress_message;
            DROP INDEX overtime.history_by_run;
            DROP INDEX overtime.history_unusual_results;
            DROP INDEX overtime.history_started;
            DROP TABLE IF EXISTS overtime.handlers;
            DROP TABLE IF EXISTS overtime.operator_actions;
            ALTER TABLE overtime.requests ADD PRIMARY KEY (identifier);
            CREATE INDEX IF NOT EXISTS requests_pending ON overtime.requests (sequence) WHERE NOT finished;
            DELETE FROM overtime.meta WHERE name LIKE 'index %';
            UPDATE overtime.meta SET value = 1 WHERE name = 'schema_version'
            """)
        let second = try Scheduler(runtime: try Self.runtime(), configuration: Self.configuration(server))
        try second.register("hourly") { $0.setTaskCompleted(success: true) }
        let after = try #require(second.pendingRequests().first)
        #expect(after.request == hourly && after.nextRun == before.nextRun, "\(after) after \(before)")
        #expect(
            try server.psql("SELECT value FROM overtime.meta WHERE name = 'schema_version'").hasPrefix("22"))
        #expect(try server.psql("SELECT to_regclass('overtime.handlers') IS NOT NULL").hasPrefix("t"))
        // The indexes of versions 20 to 22, built after the migration's transaction.
        #expect(
            Self.eventually(30) {
                (try? server.psql("SELECT count(*) FROM overtime.meta WHERE name LIKE 'index %' AND value >= 20"))?
                    .hasPrefix("4") == true
            })
        #expect(try server.psql("SELECT to_regclass('overtime.requests_by_last_run') IS NOT NULL").hasPrefix("t"))
        #expect(Self.pendingIndexHasItsVersion22Form(server))
        #expect(try server.psql("SELECT to_regclass('overtime.operator_actions') IS NOT NULL").hasPrefix("t"))
        #expect(
            try server.psql("SELECT to_regclass('overtime.requests_failed_for_good') IS NOT NULL").hasPrefix("t"))
        let progressColumns = try server.psql(
            """
            SELECT count(*) FROM information_schema.columns WHERE table_schema = 'overtime'
                AND table_name = 'requests' AND column_name LIKE 'progress_%'
            """)
        #expect(progressColumns.hasPrefix("3"), "\(progressColumns)")
        let byteOrdered = try server.psql(
            """
            SELECT count(*) FROM information_schema.columns WHERE table_schema = 'overtime'
                AND column_name IN ('identifier', 'prerequisite') AND collation_name = 'C'
            """)
        #expect(byteOrdered.hasPrefix("4"), "identifiers compared byte by byte: \(byteOrdered)")
        let indexes = [
            "history_by_run", "requests_failed", "requests_cancelled", "history_unusual_results", "history_started",
        ]
        #expect(
            try server.psql(
                "SELECT string_agg(indexname, ',' ORDER BY indexname) FROM pg_indexes WHERE indexname IN ("
                    + indexes.map { "'\($0)'" }.joined(separator: ",") + ")") == indexes.sorted().joined(separator: ",")
        )
        second.runtime.requestTermination()
    }

    /// A request that falls due while another transaction holds its row (the claim skips
    /// locked rows) is claimed soon after the lock goes, not a claim's length (here 30 s)
    /// later: the instance had room, so the request was passed over, not claimed elsewhere.
    @Test func aDueRequestWhoseRowWasLockedAMomentIsClaimedSoonAfter() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let scheduler = try Scheduler(runtime: try Self.runtime(), configuration: Self.configuration(server))
        let ran = NIOLockedValueBox<Date?>(nil)
        try scheduler.register("locked") { task in
            ran.withLockedValue { $0 = Date() }
            task.setTaskCompleted(success: true)
        }
        try scheduler.start()
        var request = ScheduledTaskRequest(identifier: "locked")
        request.earliestBegin = SystemClock().wallClockNow + .seconds(1)
        try scheduler.submit(request)
        // Its row locked from before it is due until 3 s after: the scheduler wakes at its due
        // time and the claim passes it over.
        let locker = Thread {
            _ = try? server.psql(
                "BEGIN; SELECT 1 FROM overtime.requests WHERE identifier = 'locked' FOR UPDATE; "
                    + "SELECT pg_sleep(4); COMMIT")
        }
        let locked = Date()
        locker.start()
        #expect(Self.eventually(20) { ran.withLockedValue { $0 } != nil }, "not run 20 s after its row was unlocked")
        if let at = ran.withLockedValue({ $0 }) {
            #expect(at.timeIntervalSince(locked) >= 3, "run while its row was locked")
        }
        scheduler.runtime.requestTermination()
    }

    /// Retention on the shared schedule: a periodic request keeps its newest attempts, and
    /// a one-shot finished longer ago than the maximum age goes with its attempts.
    @Test func theHistoryKeepsWhatTheRetentionSays() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        var configuration = Self.configuration(server)
        configuration.historyRetention = HistoryRetention(
            maximumAge: .seconds(3), maximumAttemptsPerRequest: 2, checkInterval: .milliseconds(500))
        let scheduler = try Scheduler(runtime: try Self.runtime(), configuration: configuration)
        let runs = NIOLockedValueBox(0)
        try scheduler.register("often") { task in
            runs.withLockedValue { $0 += 1 }
            task.setTaskCompleted(success: true)
        }
        try scheduler.register("once") { $0.setTaskCompleted(success: true) }
        try scheduler.start()
        try scheduler.submit(ScheduledTaskRequest(identifier: "once"))
        var often = ScheduledTaskRequest(identifier: "often")
        // Few runs, far apart: the package's other suites run beside it, under TSan too.
        often.repetition = Repetition(every: .milliseconds(500))
        try scheduler.submit(often)
        #expect(Self.eventually(60) { runs.withLockedValue { $0 } >= 6 })
        #expect(try Self.eventually(30) { try scheduler.history("often").count <= 3 }, "pruned to the newest two")
        #expect(try Self.eventually(30) { try scheduler.history("once").isEmpty }, "older than three seconds")
        #expect(
            try Self.eventually(30) {
                try server.psql("SELECT count(*) FROM overtime.requests WHERE identifier = 'once'").hasPrefix("0")
            }, "the finished one-shot's row went with its attempts")
        scheduler.runtime.requestTermination()
    }

    /// A due request claimed by an instance that has no handler for it is released in the
    /// same cycle, and the instance that has one runs it as soon as it has room — not once
    /// the claim lapses (600 s here). Each instance allows one run; b's is held while b.1
    /// falls due, so a (idle, told of the submission) claims b.1 first.
    @Test func aRequestClaimedWhereNoHandlerServesItIsReleasedAtOnce() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let release = NIOLockedValueBox(false)
        defer { release.withLockedValue { $0 = true } }
        func instance(_ name: String) throws -> Scheduler {
            var configuration = Self.configuration(server, claim: .seconds(600), name: name)
            configuration.maximumConcurrentRuns = 1
            let scheduler = try Scheduler(runtime: try Self.runtime(), configuration: configuration)
            try scheduler.register(prefix: "\(name).") { task in
                guard task.identifier.hasSuffix(".hold") else { return task.setTaskCompleted(success: true) }
                Thread.detachNewThread {
                    while !release.withLockedValue({ $0 }) { usleep(10_000) }
                    task.setTaskCompleted(success: true)
                }
            }
            try scheduler.start()
            return scheduler
        }
        let idle = try instance("a")
        let b = try instance("b")
        try b.submit(ScheduledTaskRequest(identifier: "b.hold"))
        let running = { (identifier: String) in
            try server.psql("SELECT running FROM overtime.requests WHERE identifier = '\(identifier)'")
                .trimmingCharacters(in: .whitespacesAndNewlines) == "t"
        }
        #expect(try Self.eventually(30) { try running("b.hold") })
        try b.submit(ScheduledTaskRequest(identifier: "b.1"))
        // Time for a, told of the submission, to claim b.1 (a claim that started nothing
        // of its own: one that did would have been released with that start's write).
        Thread.sleep(forTimeInterval: 1)
        release.withLockedValue { $0 = true }
        #expect(
            Self.eventually(30) { (try? b.history("b.1").first?.result) == .succeeded },
            "\((try? server.psql("SELECT identifier, running, claimed_by FROM overtime.requests")) ?? "")")
        withExtendedLifetime(idle) {}
    }

    @Test func aScheduleWrittenByANewerSchemaIsRefusedWithBothVersionsNamed() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        _ = try Scheduler(runtime: try Self.runtime(), configuration: Self.configuration(server))
        try server.psql("UPDATE overtime.meta SET value = 99 WHERE name = 'schema_version'")
        do {
            _ = try Scheduler(runtime: try Self.runtime(), configuration: Self.configuration(server))
            Issue.record("a newer schema was opened")
        } catch let error as SchedulerError {
            #expect(error.code == .store)
            #expect(
                error.message.contains("schema version 99")
                    && error.message.contains("up to version 22"), "\(error)")
        }
    }

    /// A schema named `overtime` that another application made is refused and left as it
    /// was: no table added to it, its own untouched.
    @Test func aSchemaNamedOvertimeThatIsNotOursIsRefusedAndLeftAsItWas() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        try server.psql(
            "CREATE SCHEMA overtime; CREATE TABLE overtime.invoices (id int); INSERT INTO overtime.invoices VALUES (7)")
        do {
            _ = try Scheduler(runtime: try Self.runtime(), configuration: Self.configuration(server))
            Issue.record("another application's schema was taken")
        } catch let error as SchedulerError {
            #expect(error.code == .store)
            #expect(error.message.contains("not an Overtime schedule store"), "\(error)")
        }
        #expect(
            try server.psql(
                "SELECT string_agg(table_name, ',') FROM information_schema.tables WHERE table_schema = 'overtime'")
                == "invoices")
        #expect(try server.psql("SELECT id FROM overtime.invoices") == "7")
    }

    @Test func aSchedulerLetGoClosesItsConnectionsToTheDatabase() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let clients =
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
        do {
            let scheduler = try Scheduler(runtime: try Self.runtime(), configuration: Self.configuration(server))
            try scheduler.register("nothing") { $0.setTaskCompleted(success: true) }
            try scheduler.start()
            // Its connection for calls and its listening one.
            let listening = try Self.eventually(30) { try server.psql(clients) == "2" }
            #expect(listening, "client connections: \((try? server.psql(clients)) ?? "?")")
            scheduler.runtime.requestTermination()
        }
        // Nothing holds it any more: both connections end, and it does not listen again.
        // (Its queue may still be finishing a cycle when the test lets go; with the fleet's
        // kill tests beside it on a loaded machine that took over 10 s once.)
        let closed = try Self.eventually(30) { try server.psql(clients) == "0" }
        // Which connection is left, and what it last did, names the path that kept it.
        let left =
            "SELECT application_name, state, query, now() - backend_start, now() - state_change FROM pg_stat_activity"
            + " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
        #expect(closed, "client connections: \((try? server.psql(left)) ?? "?")")
        usleep(300_000)
        #expect(try server.psql(clients) == "0")
    }

    @Test func anOperatorSeesTheInstancesAndRetiresOnlyOneThatIsGone() async throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let clients = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'overtime %@'"
        func connections(_ name: String) -> String {
            (try? server.psql(clients.replacingOccurrences(of: "%@", with: name))) ?? "?"
        }
        var operatorDatabase = PostgresScheduleConfiguration(host: "127.0.0.1", port: server.port, username: "postgres")
        operatorDatabase.instanceName = "operator"
        do {
            _ = try await operatorDatabase.fleetInstances()
            Issue.record("a database without a schedule was read")
        } catch {
            #expect(error.message.contains("holds no Overtime schedule"), "\(error)")
        }
        var hourly = ScheduledTaskRequest(identifier: "local.tick")
        hourly.repetition = Repetition(every: .seconds(3600))
        hourly.scope = .perInstance
        var schedulers: [String: Scheduler] = [:]
        for name in ["worker-a", "worker-b"] {
            let scheduler = try Scheduler(
                runtime: try Self.runtime(), configuration: Self.configuration(server, name: name))
            try scheduler.register("local.tick") { $0.setTaskCompleted(success: true) }
            try scheduler.start()
            _ = try await Self.naming("\(name)'s submission") { try await scheduler.submit(hourly) }
            schedulers[name] = scheduler
        }
        let ran = try Self.naming("reading the histories") {
            try Self.eventually(30) {
                try schedulers.values.allSatisfy { try $0.history("local.tick").map(\.result) == [.succeeded] }
            }
        }
        #expect(ran, "each instance ran its own request once")
        #expect(Self.eventually(10) { connections("worker-a") == "2" && connections("worker-b") == "2" })
        let instances = try await operatorDatabase.fleetInstances()
        #expect(instances.map(\.name) == ["worker-a", "worker-b"], "\(instances)")
        for instance in instances {
            #expect(instance.pendingRequests == 1 && instance.heldRuns == 0 && instance.connections == 2, "\(instance)")
            #expect(instance.lastRunEnded != nil, "\(instance)")
        }
        // Running: refused, nothing removed.
        await #expect(throws: ScheduleStoreError.self) { try await operatorDatabase.retireInstance("worker-a") }
        do {
            try await operatorDatabase.retireInstance("worker-a")
        } catch {
            #expect(error.message.contains("instance 'worker-a' is running: 2 connections"), "\(error)")
        }
        await #expect(throws: ScheduleStoreError.self) { try await operatorDatabase.retireInstance("") }
        #expect(try server.psql("SELECT count(*) FROM overtime.requests WHERE owner = 'worker-a'") == "1")

        for name in ["worker-a", "worker-b"] { schedulers[name]?.runtime.requestTermination() }
        // A store closes its connections when its scheduler goes: a failure says whether one
        // was still held (alone and with two `yes` beside, both were gone within 0.2 s).
        let held = schedulers.values.map(WeakScheduler.init)
        schedulers = [:]
        // Generous: the other suites of this package run beside it, under TSan too.
        #expect(
            Self.eventually(60) { connections("worker-a") == "0" && connections("worker-b") == "0" },
            "schedulers still held: \(held.filter { $0.scheduler != nil }.count) of 2")
        #expect(try await operatorDatabase.retireInstance("worker-a") == 1)
        #expect(try await operatorDatabase.fleetInstances().map(\.name) == ["worker-b"])
        // Its history stays.
        #expect(try server.psql("SELECT count(*) FROM overtime.history WHERE owner = 'worker-a'") == "1")
        // A process that has just died still holds its run's claim: refused until it ends.
        try server.psql(
            "UPDATE overtime.requests SET running = true, claimed_by = 'ghost:1', claim_until = now() + interval '1 minute'"
                + " WHERE owner = 'worker-b'")
        do {
            try await operatorDatabase.retireInstance("worker-b")
            Issue.record("an instance holding a claim was retired")
        } catch {
            #expect(error.message.contains("'local.tick' by ghost:1"), "\(error)")
        }
        #expect(try await operatorDatabase.fleetInstances().map(\.heldRuns) == [1])
        try server.psql(
            "UPDATE overtime.requests SET claim_until = now() - interval '1 second' WHERE owner = 'worker-b'")
        #expect(try await operatorDatabase.retireInstance("worker-b") == 1)
        #expect(try await operatorDatabase.retireInstance("nobody") == 0)
        #expect(try await operatorDatabase.fleetInstances().isEmpty)
    }

    @Test func aURLAndTheEnvironmentNameTheDatabase() throws {
        let url = try PostgresScheduleConfiguration(url: "postgres://app:secret@db.example:6543/fleet")
        #expect(url.host == "db.example" && url.port == 6543 && url.username == "app")
        #expect(url.password == "secret" && url.database == "fleet")
        #expect(throws: PostgresScheduleConfigurationError.self) { try PostgresScheduleConfiguration(url: "http://x") }
        #expect(throws: PostgresScheduleConfigurationError.self) {
            try PostgresScheduleConfiguration(url: "postgres:///db")
        }
        let environment = try PostgresScheduleConfiguration.environment([
            "PGHOST": "10.0.0.5", "PGPORT": "5433", "PGUSER": "worker", "PGDATABASE": "jobs",
        ])
        #expect(environment.host == "10.0.0.5" && environment.port == 5433 && environment.database == "jobs")
        #expect(throws: PostgresScheduleConfigurationError.self) {
            try PostgresScheduleConfiguration.environment(["PGPORT": "http", "PGUSER": "x"])
        }
    }
}

/// A scheduler, not kept alive by this.
private final class WeakScheduler {
    weak var scheduler: Scheduler?
    init(_ scheduler: Scheduler) { self.scheduler = scheduler }
}

/// A psql session left open until ``end()``, holding what its SQL took: an operator's open
/// transaction, or a session's advisory lock.
final class HeldSession {
    private let process = Process()
    private let input = Pipe()

    /// Starts psql on `server` and sends it `sql`.
    init(_ server: PostgresServer, _ sql: String) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
        process.arguments = [
            "-u", "postgres", "--", server.bin + "/psql", "-h", server.folder, "-p", "\(server.port)", "-U", "postgres",
            "-d", "postgres", "-q", "-v", "ON_ERROR_STOP=1",
        ]
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        input.fileHandleForWriting.write(Data((sql + "\n").utf8))
    }

    /// Ends the session: its transaction rolled back, its locks released.
    func end() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}
