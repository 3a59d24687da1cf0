import Foundation
import Logging
import NIOConcurrencyHelpers
import Overtime
@_spi(ScheduleStore) import OvertimeScheduler
@_spi(ScheduleStore) import OvertimeSchedulerTesting
import PostgresTestServer
import Testing

@testable import OvertimePostgres

/// A fleet's schedule read beside its instances: what a dashboard shows of a real
/// PostgreSQL 15 that two instances share.
@Suite("Inspecting a fleet's schedule on PostgreSQL", .blocking)
struct PostgresScheduleInspectorTests {
    static func database(_ server: PostgresServer) -> PostgresScheduleConfiguration {
        PostgresScheduleConfiguration(host: "127.0.0.1", port: server.port, username: "postgres")
    }

    @Test func everyStateWaitHolderAndInstanceOfAFleetIsReadAndNothingWritten() async throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let release = NIOLockedValueBox(false)
        func instance(_ name: String) throws -> Scheduler {
            let scheduler = try Scheduler(
                runtime: try PostgresSchedulerTests.runtime(),
                configuration: PostgresSchedulerTests.configuration(server, name: name))
            try scheduler.register(prefix: "hold.") { task in
                task.setProgress(0.3, message: "segment <b>1</b> of 3")
                Thread.detachNewThread {
                    while !release.withLockedValue({ $0 }) { usleep(10_000) }
                    task.setTaskCompleted(success: true)
                }
            }
            try scheduler.register(prefix: "ok.") { $0.setTaskCompleted(success: true) }
            try scheduler.register(prefix: "fail.") { task in
                try? task.setOutput(Array("disk <full>".utf8))
                task.setTaskCompleted(success: false)
            }
            try scheduler.register(prefix: "later.") { $0.setTaskCompleted(success: true) }
            try scheduler.register(prefix: "local.") { $0.setTaskCompleted(success: true) }
            try scheduler.start()
            return scheduler
        }
        let a = try instance("a")
        let b = try instance("b")
        let inspector = try await ScheduleDatabase.postgres(Self.database(server)).inspector()
        defer { inspector.close() }
        #expect(inspector.isShared)

        var failing = ScheduledTaskRequest(identifier: "fail.1")
        failing.retry.maximumAttempts = 1
        var later = ScheduledTaskRequest(identifier: "later.<img src=x>")
        later.earliestBegin = WallClockInstant(secondsSinceEpoch: Int64(Date().timeIntervalSince1970) + 3600)
        later.tags = ["nightly"]
        var link = ScheduledTaskRequest(identifier: "ok.after-hold")
        link.prerequisites = ["hold.1"]
        var local = ScheduledTaskRequest(identifier: "local.rotate")
        local.scope = .perInstance
        local.earliestBegin = later.earliestBegin
        try await b.submit(ScheduledTaskRequest(identifier: "hold.1"))
        try await a.submit(contentsOf: [ScheduledTaskRequest(identifier: "ok.1"), failing, later, link, local])
        var cancelled = ScheduledTaskRequest(identifier: "later.cancelled")
        cancelled.earliestBegin = later.earliestBegin
        try await b.submit(cancelled)
        try await b.cancel("later.cancelled")
        let now = { SystemClock().wallClockNow }
        func state(_ identifier: String) async throws -> InspectedRequest? {
            try await inspector.request(identifier, now: now())
        }
        let ran = try await PostgresSchedulerTests.eventually(30) {
            let (ok, failed, hold) = (try await state("ok.1"), try await state("fail.1"), try await state("hold.1"))
            return ok?.state == .succeeded && failed?.state == .failed && hold?.state == .running
        }
        let holding = try? await state("hold.1")
        #expect(ran, "ran: \(String(describing: holding))")

        let running = try #require(try await state("hold.1")?.running)
        #expect(running.holder.map { $0.hasPrefix("a (") || $0.hasPrefix("b (") } == true, "\(running)")
        #expect(running.deadline > now() && running.attempt == 1)
        // The progress its handler reported, written by the instance that holds the run.
        let reported = try await PostgresSchedulerTests.eventually(30) {
            try await state("hold.1")?.running?.progress != nil
        }
        let progress = try await state("hold.1")?.running?.progress
        #expect(reported && progress == RunProgress(fraction: 0.3, message: "segment <b>1</b> of 3"), "\(progress)")
        #expect(try await state("ok.after-hold")?.waitingFor == .prerequisite("hold.1"))
        if case .plannedTime(let time) = try await state("later.<img src=x>")?.waitingFor {
            #expect(abs(time.nanosecondsSinceEpoch - later.earliestBegin!.nanosecondsSinceEpoch) < 2_000_000_000)
        } else {
            Issue.record(
                "later waits for its planned time: \(String(describing: try await state("later.<img src=x>")))")
        }
        #expect(try await state("later.cancelled")?.state == .cancelled)
        #expect(try await state("local.rotate")?.request.scope == .perInstance)
        #expect(try await state("no.such") == nil)

        // Selections, a prefix, a tag; pages that cover the selection.
        func identifiers(_ query: RequestQuery) async throws -> [String] {
            try await inspector.requests(query, now: now()).requests.map(\.request.identifier)
        }
        #expect(try await identifiers(RequestQuery(selection: .failed)) == ["fail.1"])
        #expect(try await identifiers(RequestQuery(selection: .running)) == ["hold.1"])
        #expect(try await identifiers(RequestQuery(selection: .cancelled)) == ["later.cancelled"])
        #expect(try await identifiers(RequestQuery(selection: .pending, tag: "nightly")) == ["later.<img src=x>"])
        #expect(Set(try await identifiers(RequestQuery(selection: .all, identifierPrefix: "later."))).count == 2)
        // Totals, counted up to a bound; none where only reading each row could tell.
        #expect(try await inspector.count(RequestQuery(selection: .all), upTo: 100) == 7)
        #expect(try await inspector.count(RequestQuery(selection: .all), upTo: 3) == 3, "at least 3")
        #expect(try await inspector.count(RequestQuery(selection: .all, identifierPrefix: "later."), upTo: 100) == 2)
        #expect(try await inspector.count(RequestQuery(selection: .cancelled), upTo: 100) == 1)
        #expect(try await inspector.count(RequestQuery(selection: .running), upTo: 100) == 1)
        #expect(try await inspector.count(RequestQuery(selection: .failed), upTo: 100) == nil)
        #expect(try await inspector.count(RequestQuery(selection: .pending, tag: "nightly"), upTo: 100) == nil)
        let all = try await identifiers(RequestQuery(selection: .all, limit: 1000))
        var paged: [String] = []
        var after: Int64?
        repeat {
            let page = try await inspector.requests(RequestQuery(selection: .all, after: after, limit: 2), now: now())
            paged += page.requests.map(\.request.identifier)
            after = page.next
        } while after != nil
        #expect(paged == all && all.count == 7, "\(paged) against \(all)")
        var newestFirst: [String] = []
        var before: Int64?
        repeat {
            var query = RequestQuery(selection: .all, after: before, limit: 2)
            query.newestFirst = true
            let page = try await inspector.requests(query, now: now())
            newestFirst += page.requests.map(\.request.identifier)
            before = page.next
        } while before != nil
        #expect(newestFirst == all.reversed(), "newest first: \(newestFirst) against \(all)")
        try await Self.expectEachOrderSorted(inspector, server, now())

        // History: newest first, filtered, in pages.
        let failedRuns = try await inspector.history(HistoryQuery(result: .failed))
        #expect(failedRuns.map(\.identifier) == ["fail.1"] && failedRuns.first?.output == Array("disk <full>".utf8))
        let history = try await inspector.history(HistoryQuery(limit: 1000))
        #expect(history.count == 2 && history.map(\.runID) == history.map(\.runID).sorted(by: >), "\(history)")
        let firstPage = try await inspector.history(HistoryQuery(limit: 1))
        let secondPage = try await inspector.history(HistoryQuery(before: HistoryPosition(firstPage[0]), limit: 1))
        #expect(firstPage + secondPage == history)
        #expect(try await inspector.history(HistoryQuery(identifierPrefix: "ok.")).map(\.identifier) == ["ok.1"])
        var own = HistoryQuery()
        own.identifier = "fail.1"
        #expect(try await inspector.history(own).map(\.identifier) == ["fail.1"])
        own.identifier = "fail."
        #expect(try await inspector.history(own).isEmpty, "exact, not a prefix")
        // Each request's newest attempt, in one read: as its own history says.
        let newest = try await inspector.newestAttempts(of: ["fail.1", "ok.1", "fail.1", "fail.", "never"])
        #expect(Set(newest.keys) == ["fail.1", "ok.1"], "\(newest)")
        for identifier in ["fail.1", "ok.1"] {
            own.identifier = identifier
            #expect(newest[identifier] == (try await inspector.history(own).first))
        }
        #expect(try await inspector.newestAttempts(of: []).isEmpty)

        // Instances: both connected, the holder's claim counted, a's own request.
        let instances = try await inspector.instances(now: now())
        #expect(Set(instances.map(\.name)) == ["a", "b"], "\(instances)")
        #expect(instances.allSatisfy { $0.connections >= 1 && $0.lastSeen != nil }, "\(instances)")
        #expect(instances.map(\.claims).reduce(0, +) == 1)
        #expect(instances.first { $0.name == "a" }?.requests == 1, "\(instances)")

        // The overview: a link its failed prerequisite stops counts as failed; the counts
        // are those the pages show, the handlers those the instances registered.
        var stopped = ScheduledTaskRequest(identifier: "ok.after-fail")
        stopped.prerequisites = ["fail.1"]
        try await a.submit(stopped)
        let stops = try await PostgresSchedulerTests.eventually(30) {
            try await state("ok.after-fail")?.state == .failed
        }
        #expect(stops)
        let overview = try await inspector.overview(now: now())
        let counts = [overview.waiting, overview.retrying, overview.running, overview.failed, overview.cancelled]
        #expect(counts == [3, 0, 1, 2, 1] && overview.succeeded == 1, "\(overview)")
        #expect(
            overview.handlers == [
                HandlerLoad(handler: "hold.", isPrefix: true, waiting: 0, running: 1),
                HandlerLoad(handler: "later.", isPrefix: true, waiting: 1, running: 0),
                HandlerLoad(handler: "local.", isPrefix: true, waiting: 1, running: 0),
                HandlerLoad(handler: "ok.", isPrefix: true, waiting: 1, running: 0),
            ], "\(overview.handlers)")
        #expect(overview.minutes.map(\.ended).reduce(0, +) == 2 && overview.minutes.map(\.failed).reduce(0, +) == 1)
        let fromPages = try await PagesOnly(inspector).overview(now: now())
        #expect(
            [fromPages.waiting, fromPages.retrying, fromPages.running, fromPages.failed, fromPages.cancelled]
                == counts && fromPages.succeeded == overview.succeeded && fromPages.minutes == overview.minutes)
        // The one tagged request that waits; the same counted from the pages.
        #expect(overview.tags == [TagLoad(tag: "nightly", waiting: 1, running: 0)], "\(overview.tags)")
        #expect(fromPages.tags == overview.tags)

        // The mark moves when an instance writes (a submit, notified; a cancel, not), and
        // rests while nothing happens.
        let rests = try await PostgresSchedulerTests.eventually(10) {
            try await inspector.changeMark() == inspector.changeMark()
        }
        #expect(rests)
        var mark = try await inspector.changeMark()
        try await b.submit(ScheduledTaskRequest(identifier: "later.2"))
        #expect(try await inspector.changeMark() != mark)
        mark = try await inspector.changeMark()
        try await a.cancel("later.2")
        #expect(try await inspector.changeMark() != mark)
        // A run that starts at its planned time (a claim, which no instance notifies of). The
        // mark is read after the submit, whose write it then holds, and counts only if the run
        // still waited after that read: on a machine slow enough for the run to start first,
        // the claim is already in the mark and proves nothing, so a next request, planned
        // further out, is tried.
        var claimed: String?
        for (attempt, lead) in [2, 4, 8, 16].enumerated() where claimed == nil {
            let identifier = "hold.\(attempt + 2)"
            var soon = ScheduledTaskRequest(identifier: identifier)
            soon.earliestBegin = SystemClock().wallClockNow + .seconds(lead)
            try await a.submit(soon)
            mark = try await inspector.changeMark()
            guard try await state(identifier)?.state == .enqueued else { continue }
            claimed = identifier
            let started = try await PostgresSchedulerTests.eventually(Double(lead) + 10) {
                try await state(identifier)?.state == .running
            }
            #expect(started)
            #expect(try await inspector.changeMark() != mark, "a run's start moves the mark")
        }
        let held = try #require(claimed, "every run started before the mark was read")

        // An instance that died: no connection, its own request kept until it is retired.
        release.withLockedValue { $0 = true }
        let linked = try await PostgresSchedulerTests.eventually(20) {
            let (link, hold) = (try await state("ok.after-hold"), try await state(held))
            return link?.state == .succeeded && hold?.state == .succeeded
        }
        #expect(linked)
        let fleet = try Fleet(server: server, count: 1, named: true)
        defer { fleet.removeFolder() }
        let up = try await PostgresSchedulerTests.eventually(30) {
            try await inspector.instances(now: now()).contains {
                $0.name == "worker-0" && $0.connections > 0 && $0.requests == 1
            }
        }
        let listed = try? await inspector.instances(now: now())
        #expect(up, "\(String(describing: listed))")
        fleet.killForGood(0)
        let gone = try await PostgresSchedulerTests.eventually(20) {
            try await inspector.instances(now: now()).first { $0.name == "worker-0" }?.connections == 0
        }
        #expect(gone)
        // Its claim on a run of local.tick may hold a few seconds more: retiring waits for it.
        var removed: Int?
        for _ in 0..<100 {
            guard removed == nil else { break }
            removed = try? await Self.database(server).retireInstance("worker-0")
            if removed == nil { usleep(100_000) }
        }
        #expect(removed == 1)
        #expect(try await inspector.instances(now: now()).first { $0.name == "worker-0" } == nil)
        a.runtime.requestTermination()
        b.runtime.requestTermination()

        // Nothing the inspector did wrote a row: every row is the instances'.
        #expect(
            try server.psql("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'overtime-inspector'")
                .trimmingCharacters(in: .whitespacesAndNewlines) == "1")
    }

    @Test func aDatabaseWithoutASchedulePlainlyRefusedAndLeftWithout() async throws {
        let server = try PostgresServer()
        defer { server.stop() }
        await #expect {
            try await ScheduleDatabase.postgres(Self.database(server)).inspector()
        } throws: { error in
            "\(error)".contains("holds no Overtime schedule")
        }
        #expect(
            try server.psql("SELECT count(*) FROM pg_namespace WHERE nspname = 'overtime'")
                .trimmingCharacters(in: .whitespacesAndNewlines) == "0", "no schema made")
        // A newer schema: refused, naming both versions.
        let scheduler = try Scheduler(
            runtime: try PostgresSchedulerTests.runtime(), configuration: PostgresSchedulerTests.configuration(server))
        try scheduler.start()
        scheduler.runtime.requestTermination()
        try server.psql("UPDATE overtime.meta SET value = 99 WHERE name = 'schema_version'")
        await #expect {
            try await ScheduleDatabase.postgres(Self.database(server)).inspector()
        } throws: { error in
            "\(error)".contains("schema version 99")
                && "\(error)".contains("up to version \(PostgresScheduleStore.schemaVersion)")
        }
        // No server there: the reason, no trap.
        var nowhere = Self.database(server)
        nowhere.port = try PostgresServer.freePort()
        nowhere.operationTimeout = .seconds(3)
        await #expect(throws: ScheduleStoreError.self) { try await ScheduleDatabase.postgres(nowhere).inspector() }
    }

    /// What failed for good is found from the requests marked as they finished without a
    /// success, the same as by reading every finished request (a schedule before version
    /// 14), and after the migration that marks those finished before it: not one that
    /// failed once and then succeeded, nor a chain's request that succeeded.
    @Test func whatFailedForGoodIsTheSameFoundByItsMarkOrReadInOrderAndAfterTheMigration() async throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let flakyRuns = NIOLockedValueBox(0)
        let scheduler = try Scheduler(
            runtime: try PostgresSchedulerTests.runtime(),
            configuration: PostgresSchedulerTests.configuration(server, name: "a"))
        try scheduler.register(prefix: "ok.") { $0.setTaskCompleted(success: true) }
        try scheduler.register(prefix: "fail.") { $0.setTaskCompleted(success: false) }
        try scheduler.register(prefix: "flaky.") { task in
            let run = flakyRuns.withLockedValue { runs in
                runs += 1
                return runs
            }
            task.setTaskCompleted(success: run > 1)
        }
        try scheduler.start()
        defer { scheduler.runtime.requestTermination() }
        var failing = ScheduledTaskRequest(identifier: "fail.1")
        failing.retry.maximumAttempts = 1
        var flaky = ScheduledTaskRequest(identifier: "flaky.1")
        flaky.retry.maximumAttempts = 2
        flaky.retry.initialDelay = .seconds(1)
        var stopped = ScheduledTaskRequest(identifier: "ok.stopped")
        stopped.prerequisites = ["fail.1"]
        var chained = ScheduledTaskRequest(identifier: "ok.chained")
        chained.prerequisites = ["ok.1"]
        try await scheduler.submit(contentsOf: [
            failing, ScheduledTaskRequest(identifier: "ok.1"), flaky, stopped, chained,
        ])
        let byIndexes = try await ScheduleDatabase.postgres(Self.database(server)).inspector()
        defer { byIndexes.close() }
        let now = { SystemClock().wallClockNow }
        let ended = try await PostgresSchedulerTests.eventually(30) {
            var states: [WorkInfo.State?] = []
            for identifier in ["fail.1", "ok.1", "flaky.1", "ok.stopped", "ok.chained"] {
                states.append(try await byIndexes.request(identifier, now: now())?.state)
            }
            return states == [.failed, .succeeded, .succeeded, .failed, .succeeded]
        }
        #expect(ended)
        func failed(_ inspector: any ScheduleInspector) async throws -> [String] {
            var found: [String] = []
            var after: Int64?
            repeat {
                let page = try await inspector.requests(
                    RequestQuery(selection: .failed, after: after, limit: 1), now: now())
                found += page.requests.map(\.request.identifier)
                after = page.next
            } while after != nil && found.count < 100
            return found
        }
        #expect(try await failed(byIndexes) == ["fail.1", "ok.stopped"])
        // Filtered, they are counted as read: each marked row told as a page tells it.
        for (prefix, tag, limit, expected) in [
            ("ok.", nil, 100, 1), ("", nil, 100, nil), ("", "nightly", 100, 0), ("flaky.", nil, 100, 0),
        ] as [(String, String?, Int, Int?)] {
            let query = RequestQuery(selection: .failed, identifierPrefix: prefix, tag: tag)
            #expect(try await byIndexes.count(query, upTo: limit) == expected, "\(query) up to \(limit)")
        }
        #expect(try await byIndexes.count(RequestQuery(selection: .failed, identifierPrefix: "o"), upTo: 1) == 1)
        let marked =
            "SELECT string_agg(identifier, ',' ORDER BY identifier) FROM overtime.requests WHERE failure_candidate"
        let markedAsTheyFinished = try server.psql(marked).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(markedAsTheyFinished == "fail.1,ok.stopped", "marked as they finished: \(markedAsTheyFinished)")
        // The hour's attempts as the instance counted them: those the history holds.
        func minutes(_ inspector: any ScheduleInspector) async throws -> (Int, Int, Bool) {
            let counted = try await inspector.overview(now: now()).minutes
            let fromTheHistory = try await PagesOnly(inspector).overview(now: now()).minutes
            return (counted.map(\.ended).reduce(0, +), counted.map(\.failed).reduce(0, +), counted == fromTheHistory)
        }
        #expect(try await minutes(byIndexes) == (5, 2, true), "fail.1, ok.1, flaky.1 twice, ok.chained")
        // The schedule as version 13 left it: read in order, then migrated by an instance.
        scheduler.runtime.requestTermination()
        try server.psql(
            """
            ALTER TABLE overtime.requests DROP COLUMN failure_candidate;
            ALTER TABLE overtime.requests DROP COLUMN last_started_at;
            DROP TABLE overtime.activity;
            UPDATE overtime.meta SET value = 13 WHERE name = 'schema_version'
            """)
        let inOrder = try await ScheduleDatabase.postgres(Self.database(server)).inspector()
        defer { inOrder.close() }
        #expect(try await failed(inOrder) == ["fail.1", "ok.stopped"])
        #expect(try await minutes(inOrder) == (5, 2, true), "read from the history before version 15")
        let migrating = try Scheduler(
            runtime: try PostgresSchedulerTests.runtime(),
            configuration: PostgresSchedulerTests.configuration(server, name: "b"))
        _ = await migrating.pendingRequests()
        migrating.runtime.requestTermination()
        #expect(
            try server.psql("SELECT value FROM overtime.meta WHERE name = 'schema_version'").trimmingCharacters(
                in: .whitespacesAndNewlines)
                == "\(PostgresScheduleStore.schemaVersion)")
        // Marked from their newest attempts, with every finished request of a chain (ok.chained
        // succeeded: read, and left out by its state).
        let markedByTheMigration = try server.psql(marked).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(
            markedByTheMigration == "fail.1,ok.chained,ok.stopped", "marked by the migration: \(markedByTheMigration)")
        let migrated = try await ScheduleDatabase.postgres(Self.database(server)).inspector()
        defer { migrated.close() }
        #expect(try await failed(migrated) == ["fail.1", "ok.stopped"])
        #expect(try await minutes(migrated) == (5, 2, true), "counted by the migration")
        // Each request's last run, filled in from the history by the migration (as the
        // database keeps the times; the inspector reads them on this machine's clock).
        let lastRuns = try server.psql(
            """
            SELECT count(*) FILTER (WHERE last_started_at IS NOT NULL) || ' ' || count(*) FILTER (WHERE
                last_started_at IS DISTINCT FROM coalesce(active_started_at, (SELECT max(h.started_at)
                FROM overtime.history h WHERE h.identifier = r.identifier AND h.owner = r.owner)))
            FROM overtime.requests r
            """
        ).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(lastRuns == "4 0", "fail.1, ok.1, flaky.1 and ok.chained ran; none whose is not its newest attempt")
        let listed = try await migrated.requests(RequestQuery(selection: .all), now: now()).requests
        #expect(listed.filter { $0.lastRunAt != nil }.count == 4)
        var newestFirst = RequestQuery(selection: .failed, limit: 10)
        newestFirst.newestFirst = true
        #expect(
            try await migrated.requests(newestFirst, now: now()).requests.map(\.request.identifier) == [
                "ok.stopped", "fail.1",
            ])
    }

    /// The requests counted by state as the instances write them (schema version 18) are
    /// those a pass over every request counts: after runs that succeed, fail for good, fail
    /// and wait for a retry, run on, and a cancel, from two instances (shards of their own),
    /// each handler's share the same (a registered identifier's, prefixes that overlap);
    /// after one stops and another prunes the finished ones (its shards folded into one);
    /// and counted afresh by the migration from version 17. An operator's own SQL is counted
    /// as any write, a truncation too.
    @Test func theStatesCountedAsTheyAreWrittenAreThoseAPassCounts() async throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let release = NIOLockedValueBox(false)
        defer { release.withLockedValue { $0 = true } }
        func instance(_ name: String, pruning: Bool = false) throws -> Scheduler {
            var configuration = PostgresSchedulerTests.configuration(server, name: name)
            if pruning {
                configuration.historyRetention = HistoryRetention(
                    maximumAge: .seconds(2), maximumAttemptsPerRequest: nil, checkInterval: .milliseconds(300))
            }
            let scheduler = try Scheduler(runtime: try PostgresSchedulerTests.runtime(), configuration: configuration)
            try scheduler.register(prefix: "ok.") { $0.setTaskCompleted(success: true) }
            try scheduler.register(prefix: "fail.") { $0.setTaskCompleted(success: false) }
            try scheduler.register(prefix: "hold.") { task in
                Thread.detachNewThread {
                    while !release.withLockedValue({ $0 }) { usleep(10_000) }
                    task.setTaskCompleted(success: true)
                }
            }
            // An identifier in a prefix's range, and a prefix in an earlier one's: each
            // handler's share is its range but for those.
            try scheduler.register(prefix: "fail.r") { $0.setTaskCompleted(success: false) }
            try scheduler.register("ok.nightly") { $0.setTaskCompleted(success: true) }
            try scheduler.start()
            return scheduler
        }
        let a = try instance("a")
        let b = try instance("b")
        let inspector = try await PostgresScheduleInspector.open(configuration: Self.database(server))
        defer { inspector.close() }
        let now = { SystemClock().wallClockNow }
        let later = WallClockInstant(secondsSinceEpoch: Int64(Date().timeIntervalSince1970) + 3600)
        var failing = ScheduledTaskRequest(identifier: "fail.1")
        failing.retry.maximumAttempts = 1
        var retrying = ScheduledTaskRequest(identifier: "fail.retried")
        retrying.retry.maximumAttempts = 3
        retrying.retry.initialDelay = .seconds(3600)
        var held = ScheduledTaskRequest(identifier: "hold.1")
        held.tags = ["batch"]
        var tagged = ScheduledTaskRequest(identifier: "ok.nightly")
        tagged.earliestBegin = later
        tagged.tags = ["nightly", "batch"]
        var cancelled = ScheduledTaskRequest(identifier: "ok.cancelled")
        cancelled.earliestBegin = later
        var unserved = ScheduledTaskRequest(identifier: "ok.unserved")
        unserved.earliestBegin = later
        try await a.submit(contentsOf: [failing, retrying, held, tagged, unserved])
        try await b.submit(contentsOf: (1...5).map { ScheduledTaskRequest(identifier: "ok.\($0)") } + [cancelled])
        try await b.cancel("ok.cancelled")
        // Renamed by hand to one no instance serves: counted as any write.
        try server.psql("UPDATE overtime.requests SET identifier = 'none.1' WHERE identifier = 'ok.unserved'")
        /// The overview's figures as counted and in a pass, side by side.
        func bothWays() async throws -> (counted: [String], pass: [String]) {
            func figures(_ overview: ScheduleOverview) -> [String] {
                [
                    "\([overview.waiting, overview.retrying, overview.running, overview.failed, overview.cancelled, overview.succeeded])",
                    "\(overview.handlers)", "\(overview.tags)",
                ]
            }
            let counted = try await inspector.overview(now: now(), countingEveryRow: false)
            let pass = try await inspector.overview(now: now(), countingEveryRow: true)
            return (figures(counted), figures(pass))
        }
        let settled = try await PostgresSchedulerTests.eventually(30) {
            let pass = try await inspector.overview(now: now(), countingEveryRow: true)
            return [pass.waiting, pass.retrying, pass.running, pass.failed, pass.cancelled, pass.succeeded]
                == [3, 1, 1, 1, 1, 5]
        }
        #expect(settled)
        let runs = try await bothWays()
        #expect(runs.counted == runs.pass, "after the runs")
        #expect(runs.counted[1].contains(#"HandlerLoad(handler: Optional("ok.nightly"), isPrefix: false, waiting: 1"#))
        #expect(
            runs.counted[2]
                == "\([TagLoad(tag: "batch", waiting: 1, running: 1), TagLoad(tag: "nightly", waiting: 1, running: 0)])"
        )
        let shards = try server.psql("SELECT count(DISTINCT shard) FROM overtime.request_counts WHERE shard <> 0")
        #expect(
            (Int(shards.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) >= 2, "each instance's own: \(shards)")

        // a stops and its connections end; c prunes what finished two seconds before it
        // started, and folds a's shards into one.
        a.runtime.requestTermination()
        _ = try server.psql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'overtime a'")
        try await Task.sleep(for: .milliseconds(2500))
        let c = try instance("c", pruning: true)
        defer { c.runtime.requestTermination() }
        let pruned = try await PostgresSchedulerTests.eventually(30) {
            let pass = try await inspector.overview(now: now(), countingEveryRow: true)
            let ended = try server.psql(
                """
                SELECT count(*) FROM overtime.request_counts
                WHERE shard <> 0 AND shard NOT IN (SELECT pid FROM pg_stat_activity)
                """)
            return pass.succeeded + pass.failed + pass.cancelled == 0
                && ended.trimmingCharacters(in: .whitespacesAndNewlines) == "0"
        }
        #expect(pruned)
        let afterPruning = try await bothWays()
        #expect(afterPruning.counted == afterPruning.pass, "after pruning")
        // Damaged by another program (or a backend with its triggers off), in a shard no
        // connection has: counts that cannot be the rows' are not shown, the requests are
        // counted in a pass instead (one near the smallest integer was shown as a negative
        // number of waiting requests; one near the largest failed the overview, "bigint out
        // of range").
        for (state, count) in [
            (0, "-9223372036854775807"), (0, "9223372036854775807"), (CountedRequestState.finished, "-3"),
            (CountedRequestState.running, "-1"),
        ] {
            try server.psql(
                "INSERT INTO overtime.request_counts (shard, state, count) VALUES (-1, \(state), \(count))"
                    + " ON CONFLICT (shard, state) DO UPDATE SET count = excluded.count")
            let damaged = try await bothWays()
            #expect(damaged.counted == damaged.pass, "counts damaged: \(state) \(count)")
            try server.psql("DELETE FROM overtime.request_counts WHERE shard = -1")
        }

        // The schedule as version 17 left it: counted afresh by the migration.
        b.runtime.requestTermination()
        c.runtime.requestTermination()
        try server.psql(
            """
            DROP TRIGGER requests_counted_inserts ON overtime.requests;
            DROP TRIGGER requests_counted_updates ON overtime.requests;
            DROP TRIGGER requests_counted_deletes ON overtime.requests;
            DROP TRIGGER requests_counted_truncations ON overtime.requests;
            DROP TABLE overtime.request_counts;
            UPDATE overtime.meta SET value = 17 WHERE name = 'schema_version';
            UPDATE overtime.requests SET cancelled_at = 1 WHERE identifier = 'none.1'
            """)
        let migrating = try instance("b")
        _ = await migrating.pendingRequests()
        migrating.runtime.requestTermination()
        let migrated = try await PostgresScheduleInspector.open(configuration: Self.database(server))
        defer { migrated.close() }
        let counted = try await migrated.overview(now: now(), countingEveryRow: false)
        let pass = try await migrated.overview(now: now(), countingEveryRow: true)
        #expect(counted.cancelled == 1 && pass.cancelled == 1, "the request cancelled while nothing counted")
        #expect(
            [counted.waiting, counted.retrying, counted.running, counted.failed, counted.cancelled, counted.succeeded]
                == [pass.waiting, pass.retrying, pass.running, pass.failed, pass.cancelled, pass.succeeded]
                && counted.handlers == pass.handlers && counted.tags == pass.tags, "after the migration")
        // Emptied by hand: nothing counted.
        try server.psql("TRUNCATE overtime.requests")
        let emptied = try await migrated.overview(now: now(), countingEveryRow: false)
        let left: [Int] = [emptied.waiting, emptied.running, emptied.cancelled, emptied.succeeded]
        #expect(left == [0, 0, 0, 0], "after a truncation: \(emptied)")
    }

    /// Counts a plausible amount off — rows changed with the counting triggers off, as a
    /// session in the replica role changes them — are shown as kept until an instance opens
    /// the schedule: it finds them and counts the requests again, with a warning, while
    /// another instance goes on submitting, whose requests are counted too. Counts that are
    /// the rows' are left as each instance's writes keep them.
    @Test func countsOffByAPlausibleAmountAreCountedAgainWhenAnInstanceOpensTheSchedule() async throws {
        let server = try PostgresServer()
        defer { server.stop() }
        func instance(_ name: String, logs: CapturedLogs) async throws -> Scheduler {
            var configuration = PostgresSchedulerTests.configuration(server, name: name)
            configuration.logger = Logger(label: name) { _ in logs }
            let scheduler = try Scheduler(runtime: try PostgresSchedulerTests.runtime(), configuration: configuration)
            for prefix in ["job.", "more."] {
                try scheduler.register(prefix: prefix) { $0.setTaskCompleted(success: true) }
            }
            try scheduler.start()
            _ = await scheduler.pendingRequests()  // the schedule opened
            return scheduler
        }
        let a = try await instance("a", logs: CapturedLogs())
        defer { a.runtime.requestTermination() }
        try await Self.submitDueInAnHour((1...6).map { "job.\($0)" }, to: a)
        let inspector = try await PostgresScheduleInspector.open(configuration: Self.database(server))
        defer { inspector.close() }
        func figures(countingEveryRow: Bool) async throws -> [Int] {
            let overview = try await inspector.overview(
                now: SystemClock().wallClockNow, countingEveryRow: countingEveryRow)
            return [overview.waiting, overview.cancelled, overview.succeeded]
        }
        func shards() throws -> String {
            try server.psql("SELECT count(*) FROM overtime.request_counts WHERE shard <> 0")
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }

        let right = CapturedLogs()
        let b = try await instance("b", logs: right)
        b.runtime.requestTermination()
        #expect(!right.lines.contains { $0.contains("counted again") })
        #expect(try shards() != "0", "the counts a's writes keep, left as they were")

        try server.psql(
            """
            SET session_replication_role = replica;
            DELETE FROM overtime.requests WHERE identifier IN ('job.1', 'job.2');
            UPDATE overtime.requests SET cancelled_at = 1 WHERE identifier = 'job.3'
            """)
        #expect(try await figures(countingEveryRow: false) == [6, 0, 0], "a plausible amount off: shown as kept")
        #expect(try await figures(countingEveryRow: true) == [3, 1, 0])

        let submitting = Task {
            for batch in 0..<20 { try await Self.submitDueInAnHour((0..<20).map { "more.\(batch).\($0)" }, to: a) }
        }
        let recounted = CapturedLogs()
        let c = try await instance("c", logs: recounted)
        defer { c.runtime.requestTermination() }
        try await submitting.value
        #expect(recounted.lines.contains { $0.hasPrefix("warning") && $0.contains("counted again") })
        #expect(try await figures(countingEveryRow: true) == [403, 1, 0])
        #expect(try await figures(countingEveryRow: false) == [403, 1, 0])
    }

    /// How late runs started, as each instance counted its starts (schema version 19):
    /// runs due while the one run an instance allows was held start at least as late as it
    /// was held, the other instance's starts add to the same hour, and a run an operator
    /// started at once is not counted (it was not due).
    @Test func howLateTheHoursRunsStartedIsCountedByEveryInstanceAsItStartsThem() async throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let release = NIOLockedValueBox(false)
        defer { release.withLockedValue { $0 = true } }
        func instance(_ name: String, prefix: String) throws -> Scheduler {
            var configuration = PostgresSchedulerTests.configuration(server, name: name)
            configuration.maximumConcurrentRuns = 1
            let scheduler = try Scheduler(runtime: try PostgresSchedulerTests.runtime(), configuration: configuration)
            try scheduler.register(prefix: prefix) { $0.setTaskCompleted(success: true) }
            try scheduler.register(prefix: "hold.") { task in
                Thread.detachNewThread {
                    while !release.withLockedValue({ $0 }) { usleep(10_000) }
                    task.setTaskCompleted(success: true)
                }
            }
            try scheduler.start()
            return scheduler
        }
        let a = try instance("a", prefix: "a.")
        let b = try instance("b", prefix: "b.")
        let inspector = try await PostgresScheduleInspector.open(configuration: Self.database(server))
        defer { inspector.close() }
        let now = { SystemClock().wallClockNow }
        try await a.submit(ScheduledTaskRequest(identifier: "hold.1"))
        #expect(
            try await PostgresSchedulerTests.eventually(30) { try await inspector.overview(now: now()).running == 1 })
        let holder = try #require(try await inspector.request("hold.1", now: now())?.running?.holder)
        let heldByA = holder.hasPrefix("a (")
        let (held, free) = heldByA ? (a, b) : (b, a)
        let (heldPrefix, freePrefix) = heldByA ? ("a.", "b.") : ("b.", "a.")
        // Due now; the instance that serves them holds its one run for 1.5 s more.
        try await held.submit(contentsOf: (1...3).map { ScheduledTaskRequest(identifier: "\(heldPrefix)\($0)") })
        try await free.submit(ScheduledTaskRequest(identifier: "\(freePrefix)1"))
        try await Task.sleep(for: .milliseconds(1500))
        release.withLockedValue { $0 = true }
        #expect(
            try await PostgresSchedulerTests.eventually(30) { try await inspector.overview(now: now()).succeeded == 5 })
        var manual = ScheduledTaskRequest(identifier: "\(freePrefix)manual")
        manual.earliestBegin = now() + .seconds(3600)
        try await free.submit(manual)
        _ = try await free.runNow(manual.identifier)
        #expect(
            try await PostgresSchedulerTests.eventually(30) { try await inspector.overview(now: now()).succeeded == 6 })
        let lateness = try #require(try await inspector.overview(now: now()).lateness)
        // hold.1 and the free instance's run on time; the three that waited, at least 1.5 s late.
        #expect(lateness.started == 5, "\(lateness)")
        #expect(lateness.median >= .milliseconds(1500) && lateness.percentile99 >= lateness.median, "\(lateness)")
        let shards = try server.psql("SELECT count(DISTINCT shard) FROM overtime.lateness")
        #expect(shards.trimmingCharacters(in: .whitespacesAndNewlines) == "2", "each instance counts in its own rows")
        // The hour is the database's current minute and the 59 before it, whichever way the
        // clocks differ by a little: read again if the minute turned meanwhile.
        let minute = "floor(extract(epoch FROM clock_timestamp()) / 60)::bigint"
        var read: StartLateness?
        for _ in 0..<3 {
            let current = try server.psql("SELECT \(minute)").trimmingCharacters(in: .whitespacesAndNewlines)
            try server.psql(
                """
                DELETE FROM overtime.lateness;
                INSERT INTO overtime.lateness VALUES (\(current), 0, 10, 1), (\(current) - 59, 0, 20, 1),
                    (\(current) - 60, 0, 30, 1), (\(current) + 1, 0, 40, 1)
                """)
            read = try await inspector.overview(now: now()).lateness
            if try server.psql("SELECT \(minute)").trimmingCharacters(in: .whitespacesAndNewlines) == current { break }
        }
        #expect(read == LatenessBuckets.summary([10: 1, 20: 1]))
    }

    /// The attempts of identifiers with a prefix, a page at a time, are the same read by the
    /// primary key's range and sorted (a prefix with few attempts) as read newest first (one
    /// with many): newest first, from a position, with a result, and none of another prefix.
    @Test func aPrefixsHistoryIsTheSameSortedOrReadNewestFirst() async throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let scheduler = try Scheduler(
            runtime: try PostgresSchedulerTests.runtime(), configuration: PostgresSchedulerTests.configuration(server))
        try scheduler.register(prefix: "a.") { $0.setTaskCompleted(success: true) }
        try scheduler.register(prefix: "ab.") { $0.setTaskCompleted(success: false) }
        try scheduler.start()
        defer { scheduler.runtime.requestTermination() }
        try await scheduler.submit(
            contentsOf: (1...5).flatMap { ["a.\($0)", "ab.\($0)"] }.map {
                var request = ScheduledTaskRequest(identifier: $0)
                request.retry.maximumAttempts = 1
                return request
            })
        let sorted = try await ScheduleDatabase.postgres(Self.database(server)).inspector()
        defer { sorted.close() }
        let newestFirst = try await PostgresScheduleInspector.open(
            configuration: Self.database(server), prefixSortedAtMost: 0)
        defer { newestFirst.close() }
        #expect(
            try await PostgresSchedulerTests.eventually(30) {
                try await sorted.history(HistoryQuery(limit: 100)).count == 10
            })
        let all = try await sorted.history(HistoryQuery(limit: 100))
        func pages(_ inspector: any ScheduleInspector, _ prefix: String, _ result: RunResult? = nil) async throws
            -> [String]
        {
            var found: [RunRecord] = []
            var query = HistoryQuery(identifierPrefix: prefix, result: result, limit: 2)
            while true {
                let page = try await inspector.history(query)
                found += page
                guard let last = page.last, page.count == query.limit else { break }
                query.before = HistoryPosition(last)
            }
            return found.map { "\($0.identifier) \($0.runID).\($0.attempt) \($0.result)" }
        }
        let expected = all.filter { $0.identifier.hasPrefix("a.") }.map {
            "\($0.identifier) \($0.runID).\($0.attempt) \($0.result)"
        }
        #expect(expected.count == 5)
        #expect(try await pages(sorted, "a.") == expected)
        // Both ways, the prefix read by its range and sorted, or newest first.
        let bothWays = HistoryQuery(identifierPrefix: "a.", limit: 2)
        let readBySorting = try await Self.everyPage(sorted, bothWays).records
        #expect(readBySorting.map { "\($0.identifier) \($0.runID).\($0.attempt) \($0.result)" } == expected)
        let readNewestFirst = try await Self.everyPage(newestFirst, bothWays).records
        #expect(readNewestFirst.map { "\($0.identifier) \($0.runID).\($0.attempt) \($0.result)" } == expected)
        #expect(try await pages(newestFirst, "a.") == expected)
        let failed = all.filter { $0.identifier.hasPrefix("ab.") && $0.result == .failed }
        #expect(failed.count == 5)
        #expect(try await pages(sorted, "ab.", .failed) == pages(newestFirst, "ab.", .failed))
        #expect(try await pages(sorted, "ab.", .failed).count == 5)
        #expect(try await pages(sorted, "ab.", .succeeded).isEmpty)
        #expect(try await pages(sorted, "c.").isEmpty)
        // Each filter's attempts counted as many as listed ("a." takes in "ab."); a search not counted.
        try await ScheduleInspectorPaging.historyCountsAreTheListed(sorted)
    }

    /// A search finds its text byte for byte in identifiers and tags (requests), and in
    /// identifiers, stop reasons and outputs (attempts), a bounded stretch of the history per
    /// page when asked for pages: what the SQLite inspector finds, on a fleet's schedule.
    @Test func searchFindsTextInIdentifiersTagsStopReasonsAndOutputsAStretchAtATime() async throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let scheduler = try Scheduler(
            runtime: try PostgresSchedulerTests.runtime(), configuration: PostgresSchedulerTests.configuration(server))
        try scheduler.register(prefix: "s.") { task in
            if task.identifier.hasSuffix(".7") { try? task.setOutput(Array("uploaded needle-42 segments".utf8)) }
            task.setTaskCompleted(success: true)
        }
        try scheduler.start()
        defer { scheduler.runtime.requestTermination() }
        try await scheduler.submit(
            contentsOf: (0..<24).map { index in
                var request = ScheduledTaskRequest(identifier: "s.alpha.\(index)")
                request.tags = index % 2 == 0 ? ["red"] : ["blue-team", "x"]
                return request
            })
        let inspector = try await ScheduleDatabase.postgres(Self.database(server)).inspector()
        defer { inspector.close() }
        let small = try await PostgresScheduleInspector.open(configuration: Self.database(server), rowsReadPerPage: 5)
        defer { small.close() }
        #expect(
            try await PostgresSchedulerTests.eventually(30) {
                try await inspector.history(HistoryQuery(limit: 100)).count == 24
            })
        _ = try server.psql(
            "UPDATE overtime.history SET stop_reason = 'its grant ran out: budget spent' WHERE identifier = 's.alpha.3'"
        )
        let now = SystemClock().wallClockNow
        let all = try await inspector.requests(RequestQuery(selection: .all, limit: 1000), now: now).requests
        for text in ["pha.1", "ue-te", "e-team,x", "ALPHA", "s.", "needle"] {
            var query = RequestQuery(selection: .all, limit: 4)
            query.search = text
            let expected = all.filter { request in
                request.request.identifier.contains(text) || request.request.tags.contains { $0.contains(text) }
            }.map(\.request.identifier)
            for newestFirst in [false, true] {
                query.newestFirst = newestFirst
                for found in [
                    try await ScheduleInspectorPaging.everyPage(inspector, query, now: now),
                    try await ScheduleInspectorPaging.everyPage(small, query, now: now),
                ] {
                    #expect(found == (newestFirst ? expected.reversed() : expected), "\(text)")
                }
            }
        }
        // In each order, a page read a stretch at a time lists what one read whole does; text no
        // request holds, a tag none has, cost a page a stretch (5 here), not every request.
        try await ScheduleInspectorPaging.searchesReadAStretchAtATime(
            whole: inspector, stretched: small, texts: ["pha.1", "ue-te"], now: now)
        let everything = try await inspector.history(HistoryQuery(limit: 1000))
        for text in ["pha.1", "budget", "needle-42", "uploaded", "nowhere"] {
            let expected = everything.filter { record in
                record.identifier.contains(text) || (record.stopReason?.contains(text) ?? false)
                    || record.output.map { String(decoding: $0, as: UTF8.self).contains(text) } ?? false
            }
            #expect(!expected.isEmpty || text == "nowhere")
            var query = HistoryQuery(limit: 3)
            query.search = text
            #expect(try await Self.everyPage(inspector, query).records == expected, "\(text)")
            let (stretched, pages) = try await Self.everyPage(small, query)
            #expect(stretched == expected, "\(text)")
            #expect(pages >= everything.count / 5, "a stretch of 5 attempts per page")
        }
    }

    /// Every request listed by next run, attempt and last run: sorted so (the due times as
    /// the database keeps them, read with psql), page after page both ways.
    private static func expectEachOrderSorted(
        _ inspector: some ScheduleInspector, _ server: PostgresServer, _ now: WallClockInstant
    ) async throws {
        var due: [String: Int64] = [:]
        // The time first: an identifier may hold any character but a control one.
        for line in try server.psql("SELECT coalesce(due_at::text, '') || '|' || identifier FROM overtime.requests")
            .split(separator: "\n")
        {
            let parts = line.split(separator: "|", maxSplits: 1, omittingEmptySubsequences: false)
            if parts.count == 2, let time = Int64(parts[0]) { due[String(parts[1])] = time }
        }
        #expect(due["later.cancelled"] == nil && due["later.<img src=x>"] != nil, "\(due)")
        let pending = try await inspector.requests(RequestQuery(selection: .pending, limit: 1000), now: now).requests
        #expect(pending.count > 2 && pending.count < 7)
        for (selection, order) in [RequestQuery.Selection.all, .pending].flatMap({ selection in
            [RequestQuery.Order.nextRun, .attempts, .lastRun].map { (selection, $0) }
        }) {
            var query = RequestQuery(selection: selection, limit: 1000)
            query.order = order
            let found = try await inspector.requests(query, now: now).requests
            #expect(found.count == (selection == .all ? 7 : pending.count), "\(order)")
            let keys = found.map { request -> [Int64] in
                switch order {
                case .nextRun: [due[request.request.identifier] ?? .max, request.position]
                case .attempts: [-Int64(request.attempt), request.position]
                default: [request.lastRunAt.map { -$0.nanosecondsSinceEpoch } ?? .max, request.position]
                }
            }
            #expect(
                keys == keys.sorted { $0.lexicographicallyPrecedes($1) }, "\(order): \(found.map(\.request.identifier))"
            )
            if selection == .all {
                #expect(found.map(\.position) != found.map(\.position).sorted(), "\(order): not by submission")
            } else {
                // The unfinished are read in the order's index (version 20), whose expression
                // is the page's own: the planner, kept from sorting, reads it.
                let plan = try server.psql(
                    """
                    SET enable_seqscan = off; SET enable_sort = off; EXPLAIN SELECT identifier FROM overtime.requests r
                    WHERE NOT r.finished ORDER BY \(PostgresScheduleStore.sortKey(order)), r.sequence LIMIT 50
                    """)
                #expect(plan.contains("Index Scan using requests_by_"), "\(order): \(plan)")
            }
            query.limit = 2
            let forward = try await ScheduleInspectorPaging.everyPage(inspector, query, now: now)
            #expect(forward == found.map(\.request.identifier), "\(order) in pages")
            query.newestFirst = true
            #expect(
                try await ScheduleInspectorPaging.everyPage(inspector, query, now: now) == forward.reversed(),
                "\(order) turned round")
        }
    }

    /// Submits a one-shot for each of `identifiers`, in their order, due in an hour: none
    /// runs while a test reads them.
    private static func submitDueInAnHour(_ identifiers: [String], to scheduler: Scheduler) async throws {
        let later = WallClockInstant(secondsSinceEpoch: Int64(Date().timeIntervalSince1970) + 3600)
        try await scheduler.submit(
            contentsOf: identifiers.map {
                var request = ScheduledTaskRequest(identifier: $0)
                request.earliestBegin = later
                return request
            })
    }

    /// The attempts of every page of `query`, page after page, and how many pages were read;
    /// read again from the last page up, page before page, they are the same.
    private static func everyPage(
        _ inspector: some ScheduleInspector, _ query: HistoryQuery
    ) async throws -> (records: [RunRecord], pages: Int) {
        var down = query
        var found: [RunRecord] = []
        var reads = 0
        repeat {
            let page = try await inspector.historyPage(down)
            #expect(page.records.count <= down.limit)
            #expect((page.previous == nil) == (reads == 0), "only the first page has none before it")
            found += page.records
            down.before = page.next
            reads += 1
        } while down.before != nil && reads < 100
        var up = query
        up.fromOldest = true
        var foundUp: [RunRecord] = []
        var readsUp = 0
        repeat {
            let page = try await inspector.historyPage(up)
            #expect(page.records.count <= up.limit)
            #expect(page.records == page.records.sorted { ($0.runID, $0.attempt) > ($1.runID, $1.attempt) })
            #expect((page.next == nil) == (readsUp == 0), "only the last page has none after it")
            foundUp = page.records + foundUp
            up.fromOldest = false
            up.after = page.previous
            readsUp += 1
        } while up.after != nil && readsUp < 100
        #expect(foundUp == found, "the pages read up are those read down")
        return (found, reads)
    }

    /// On a database whose collation is not byte order (`C.UTF-8`, which PostgreSQL 15 sorts
    /// as a locale), the identifiers that start with a prefix are still found as a range of
    /// the primary keys, not by reading every request and attempt: the schema compares
    /// identifiers byte by byte.
    @Test func identifiersWithAPrefixAreARangeOfTheKeysWhateverTheDatabasesCollation() async throws {
        let server = try PostgresServer()
        defer { server.stop() }
        try server.psql("CREATE DATABASE fleet TEMPLATE template0 LC_COLLATE 'C.UTF-8' LC_CTYPE 'C.UTF-8'")
        var database = Self.database(server)
        database.database = "fleet"
        var configuration = SchedulerConfiguration(database: .postgres(database))
        configuration.startSpacing = .zero
        let scheduler = try Scheduler(runtime: try PostgresSchedulerTests.runtime(), configuration: configuration)
        try scheduler.register(prefix: "job-") { $0.setTaskCompleted(success: true) }
        try scheduler.start()
        defer { scheduler.runtime.requestTermination() }
        try await Self.submitDueInAnHour(["job-1", "job-10", "job-1é", "job-2", "job-20"], to: scheduler)
        let collations = try server.psql(
            """
            SELECT string_agg(table_name || '.' || column_name || ' ' || coalesce(collation_name, '-'), ', '
                ORDER BY table_name, column_name)
            FROM information_schema.columns WHERE table_schema = 'overtime' AND column_name IN ('identifier', 'prerequisite')
            """, database: "fleet")
        #expect(
            collations.trimmingCharacters(in: .whitespacesAndNewlines)
                == "history.identifier C, prerequisites.identifier C, prerequisites.prerequisite C, requests.identifier C"
        )
        for table in ["requests", "history"] {
            let plan = try server.psql(
                """
                SET enable_seqscan = off;
                EXPLAIN SELECT identifier FROM overtime.\(table) WHERE starts_with(identifier, 'job-1')
                """, database: "fleet")
            #expect(plan.contains("Index Cond: ((identifier >= 'job-1'::text)"), "\(table): \(plan)")
        }
        let inspector = try await ScheduleDatabase.postgres(database).inspector()
        defer { inspector.close() }
        let found = try await inspector.requests(
            RequestQuery(selection: .all, identifierPrefix: "job-1"), now: SystemClock().wallClockNow)
        #expect(Set(found.requests.map(\.request.identifier)) == ["job-1", "job-10", "job-1é"])
    }

    /// A page of the unfinished requests with a prefix whose requests are the oldest passes
    /// over every newer entry of the index by submission. It checks the prefix in each entry
    /// and visits only the rows that match: the table is not vacuumed (as just after many
    /// were submitted), so an entry checked after its row's visit would cost one each.
    @Test func aPrefixOfTheOldestPendingRequestsIsCheckedInTheIndexNotInEachRowPassed() async throws {
        let server = try PostgresServer()
        defer { server.stop() }
        var configuration = SchedulerConfiguration(database: .postgres(Self.database(server)))
        configuration.startSpacing = .zero
        let scheduler = try Scheduler(runtime: try PostgresSchedulerTests.runtime(), configuration: configuration)
        defer { scheduler.runtime.requestTermination() }
        for prefix in ["old.", "new."] { try scheduler.register(prefix: prefix) { $0.setTaskCompleted(success: true) } }
        try server.psql("ALTER TABLE overtime.requests SET (autovacuum_enabled = off)")
        let old = (0..<12).map { "old.\($0)" }
        try await Self.submitDueInAnHour(old + (0..<300).map { "new.\($0)" }, to: scheduler)
        try server.psql("ANALYZE overtime.requests")
        // The page's pick (the inspector's query for a first page of 5), kept from sorting.
        let plan = try server.psql(
            """
            SET enable_seqscan = off; SET enable_sort = off; SET enable_bitmapscan = off;
            EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
            SELECT r.identifier, r.owner, r.sequence FROM overtime.requests r
            WHERE NOT r.finished AND (r.identifier >= 'old.' AND r.identifier < 'old/')
            ORDER BY r.sequence DESC LIMIT 5
            """)
        #expect(plan.contains("Index Only Scan Backward using requests_pending"), "\(plan)")
        #expect(plan.contains("Index Cond: ((identifier >= 'old.'::text)"), "the prefix checked in the index: \(plan)")
        let visits = plan.split(separator: "\n").first { $0.contains("Heap Fetches:") }.flatMap {
            Int($0.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "")
        }
        #expect(visits.map { $0 <= 5 } == true, "rows visited for 5 that match: \(plan)")

        let inspector = try await ScheduleDatabase.postgres(Self.database(server)).inspector()
        defer { inspector.close() }
        let now = SystemClock().wallClockNow
        var query = RequestQuery(selection: .pending, identifierPrefix: "old.", limit: 5)
        query.newestFirst = true
        #expect(try await ScheduleInspectorPaging.everyPage(inspector, query, now: now) == old.reversed())
        query.newestFirst = false
        #expect(try await ScheduleInspectorPaging.everyPage(inspector, query, now: now) == old)
    }

    /// A prefix's many unfinished requests that lie behind other rows in the table (those
    /// submitted before them) are counted in an index by their range, not by reading the
    /// table from its start, as the planner would, taking a fifth of the requests for spread
    /// evenly: the plan the server ran for the inspector's count (auto_explain's, in the
    /// server's log) reads no row in the table's order.
    @Test func aPrefixsManyPendingRequestsAreCountedInTheKeysRangeNotFromTheTablesStart() async throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let scheduler = try Scheduler(
            runtime: try PostgresSchedulerTests.runtime(),
            configuration: SchedulerConfiguration(database: .postgres(Self.database(server))))
        defer { scheduler.runtime.requestTermination() }
        for prefix in ["early.", "job-"] {
            try scheduler.register(prefix: prefix) { $0.setTaskCompleted(success: true) }
        }
        try server.psql("ALTER TABLE overtime.requests SET (autovacuum_enabled = off)")
        for identifiers in [(0..<20_000).map { "early.\($0)" }, (0..<5_000).map { "job-\($0)" }] {
            try await Self.submitDueInAnHour(identifiers, to: scheduler)
        }
        // Not vacuumed, as just after they were submitted: no row is marked all visible.
        try server.psql("ANALYZE overtime.requests")
        // Each connection made from here on loads auto_explain (known then to ALTER SYSTEM).
        for setting in ["session_preload_libraries = 'auto_explain'", "auto_explain.log_min_duration = 0"] {
            try server.psql("ALTER SYSTEM SET \(setting)")
            try server.psql("SELECT pg_reload_conf()")
        }

        let inspector = try await ScheduleDatabase.postgres(Self.database(server)).inspector()
        defer { inspector.close() }
        let counted = try await inspector.count(RequestQuery(selection: .pending, identifierPrefix: "job-"), upTo: 1001)
        #expect(counted == 1001)
        let log = try String(contentsOfFile: server.folder + "/log", encoding: .utf8)
        let plans = log.components(separatedBy: "plan:").filter {
            $0.contains("Query Text: SELECT count(*) FROM (SELECT 1 FROM overtime.requests r")
        }.map { $0.components(separatedBy: "LOG:").first ?? $0 }
        #expect(plans.count == 1, "\(plans)")
        #expect(plans.allSatisfy { $0.contains("Index") && !$0.contains("Seq Scan") }, "\(plans)")
    }
}

/// An inspector that reads only through ``ScheduleInspector``'s requirements another has,
/// leaving the overview to the protocol's default (counted from pages).
private struct PagesOnly: ScheduleInspector {
    let inner: any ScheduleInspector
    init(_ inner: any ScheduleInspector) { self.inner = inner }
    func requests(_ query: RequestQuery, now: WallClockInstant) async throws(ScheduleStoreError) -> RequestPage {
        try await inner.requests(query, now: now)
    }
    func request(_ identifier: String, now: WallClockInstant) async throws(ScheduleStoreError) -> InspectedRequest? {
        try await inner.request(identifier, now: now)
    }
    func history(_ query: HistoryQuery) async throws(ScheduleStoreError) -> [RunRecord] {
        try await inner.history(query)
    }
    func changeMark() async throws(ScheduleStoreError) -> Int64 { try await inner.changeMark() }
    func close() {}
}
