import Foundation
@_spi(ScheduleStore) import OvertimeSchedulerTesting
import OvertimeSupport
import OvertimeTestSupport
import OvertimeTesting
import Testing

@testable import Overtime
@_spi(ScheduleStore) @testable import OvertimeScheduler

/// An inspector reads a schedule beside the scheduler that owns it — every state and what
/// each request waits for, history newest first with filters and pages — and changes
/// nothing; on virtual time against a real SQLite file.
@Suite("Schedule inspector", .serialized, .timeLimit(.minutes(2)))
struct ScheduleInspectorTests {
    /// A schedule with a request in every state, the scheduler still holding it.
    private func schedule(prefixes: [String] = ["x."]) throws -> SchedulerHarness {
        let network = ManualConditionSource(SystemConditions(networkAvailable: false))
        let h = try SchedulerHarness(
            prefixes: prefixes, store: .sqlite,
            configure: {
                $0.conditions = network
                $0.maximumConcurrentRuns = 1
            })
        h.script.withLock {
            $0 = { (attempt: SchedulerHarness.Attempt) -> SchedulerHarness.Answer in
                switch attempt.identifier {
                case "x.hang": .hang
                case "x.broken", "x.retrying": .fail
                default: .succeed
                }
            }
        }
        try h.current.start()
        func request(_ identifier: String, _ change: (inout ScheduledTaskRequest) -> Void = { _ in })
            -> ScheduledTaskRequest
        {
            var request = ScheduledTaskRequest(identifier: identifier)
            change(&request)
            return request
        }
        try h.current.submit(request("x.done") { $0.tags = ["nightly"] })
        try h.current.submit(request("x.broken") { $0.retry.maximumAttempts = 1 })
        try h.current.submit(request("x.retrying") { $0.retry.initialDelay = .seconds(60) })
        h.advance(by: .seconds(1))
        try h.current.submit(request("x.hang") { $0.maximumDuration = .seconds(300) })
        h.advance(by: .seconds(1))
        try h.current.submit(request("x.later") { $0.earliestBegin = h.now + .seconds(3600) })
        try h.current.submit(
            request("x.link") {
                $0.prerequisites = ["x.later"]
                $0.tags = ["nightly", "eu"]
            })
        try h.current.submit(request("x.online") { $0.requirements = [.network] })
        try h.current.submit(request("x.queued"))  // due; the one run allowed is x.hang's
        try h.current.submit(request("x.gone") { $0.earliestBegin = h.now + .seconds(60) })
        try h.current.cancel("x.gone")
        h.advance(by: .seconds(1))
        return h
    }

    @Test func everyStateAndWhatEachWaitsForAsTheStoreTellsIt() async throws {
        try await onOwnThread {
            let h = try schedule()
            defer { h.finish() }
            let inspector = try await ScheduleDatabase.sqlite(path: h.path).inspector()
            defer { inspector.close() }
            let now = h.now
            let all = try await inspector.requests(RequestQuery(selection: .all), now: now).requests
            let byName = Dictionary(uniqueKeysWithValues: all.map { ($0.request.identifier, $0) })
            #expect(
                all.map(\.request.identifier) == [
                    "x.done", "x.broken", "x.retrying", "x.hang", "x.later", "x.link", "x.online", "x.queued", "x.gone",
                ], "submission order")
            #expect(byName["x.done"]?.state == .succeeded && byName["x.done"]?.waitingFor == nil)
            #expect(byName["x.broken"]?.state == .failed)
            #expect(byName["x.gone"]?.state == .cancelled && byName["x.gone"]?.cancelledAt != nil)
            let retrying = try #require(byName["x.retrying"])
            #expect(retrying.state == .enqueued && retrying.attempt == 2)
            guard case .retry(let retryAt) = retrying.waitingFor else {
                Issue.record("x.retrying waits for \(String(describing: retrying.waitingFor))")
                return
            }
            #expect(retryAt > now)
            let hang = try #require(byName["x.hang"]?.running)
            #expect(byName["x.hang"]?.state == .running && hang.attempt == 1)
            #expect(hang.deadline == hang.startedAt + .seconds(300))
            #expect(byName["x.later"]?.waitingFor == .plannedTime(now + .seconds(3600) - .seconds(1)))
            #expect(byName["x.link"]?.waitingFor == .prerequisite("x.later") && byName["x.link"]?.state == .blocked)
            guard case .requirements([.network], _) = byName["x.online"]?.waitingFor else {
                Issue.record("x.online waits for \(String(describing: byName["x.online"]?.waitingFor))")
                return
            }
            guard case .turn(let since) = byName["x.queued"]?.waitingFor else {
                Issue.record("x.queued waits for \(String(describing: byName["x.queued"]?.waitingFor))")
                return
            }
            #expect(since <= now && byName["x.queued"]?.state == .blocked)

            // Each selection, a prefix, a tag, pages.
            let names = { (query: RequestQuery) in
                try await inspector.requests(query, now: now).requests.map(\.request.identifier)
            }
            #expect(
                try await names(RequestQuery(selection: .pending))
                    == ["x.retrying", "x.hang", "x.later", "x.link", "x.online", "x.queued"])
            #expect(try await names(RequestQuery(selection: .running)) == ["x.hang"])
            #expect(try await names(RequestQuery(selection: .failed)) == ["x.broken"])
            #expect(try await names(RequestQuery(selection: .cancelled)) == ["x.gone"])
            #expect(try await names(RequestQuery(selection: .all, identifierPrefix: "x.l")) == ["x.later", "x.link"])
            #expect(try await names(RequestQuery(selection: .all, tag: "nightly")) == ["x.done", "x.link"])
            #expect(
                try await names(RequestQuery(selection: .all, tag: "night")).isEmpty, "a tag inside another is another")
            // Totals, counted up to a bound; none where only reading each row could tell.
            #expect(try await inspector.count(RequestQuery(selection: .pending), upTo: 100) == 6)
            #expect(try await inspector.count(RequestQuery(selection: .all), upTo: 100) == 9)
            #expect(try await inspector.count(RequestQuery(selection: .all), upTo: 4) == 4, "at least 4")
            #expect(try await inspector.count(RequestQuery(selection: .all, identifierPrefix: "x.l"), upTo: 100) == 2)
            #expect(try await inspector.count(RequestQuery(selection: .cancelled), upTo: 100) == 1)
            #expect(try await inspector.count(RequestQuery(selection: .running), upTo: 100) == 1)
            #expect(try await inspector.count(RequestQuery(selection: .failed), upTo: 100) == nil)
            #expect(try await inspector.count(RequestQuery(selection: .all, tag: "nightly"), upTo: 100) == nil)
            var pages: [[String]] = []
            var after: Int64?
            repeat {
                let page = try await inspector.requests(RequestQuery(selection: .all, after: after, limit: 4), now: now)
                pages.append(page.requests.map(\.request.identifier))
                after = page.next
            } while after != nil && pages.count < 10
            #expect(pages.flatMap { $0 } == all.map(\.request.identifier) && pages.count == 3)
            // Newest first: the same requests the other way round, in pages that go on before
            // the last one shown; also where a failed page reads on past rows it passes over.
            for selection in [RequestQuery.Selection.all, .failed] {
                var newest: [String] = []
                var before: Int64?
                var reads = 0
                repeat {
                    var query = RequestQuery(selection: selection, after: before, limit: 4)
                    query.newestFirst = true
                    let page = try await inspector.requests(query, now: now)
                    newest += page.requests.map(\.request.identifier)
                    before = page.next
                    reads += 1
                } while before != nil && reads < 10
                let expected = try await names(RequestQuery(selection: selection, limit: 1000))
                #expect(newest == expected.reversed(), "\(selection): \(newest)")
            }
            let failedPage = try await inspector.requests(RequestQuery(selection: .failed, limit: 1), now: now)
            #expect(failedPage.requests.map(\.request.identifier) == ["x.broken"])
            // A page of failed requests reads a bounded number of rows, and says where to go on.
            let bounded = try await SQLiteScheduleInspector.open(path: h.path, rowsReadPerPage: 1)
            defer { bounded.close() }
            var seen: [String] = []
            var reads = 0
            var next: Int64? = nil
            repeat {
                let page = try await bounded.requests(RequestQuery(selection: .failed, after: next, limit: 5), now: now)
                #expect(page.requests.count <= 1)
                seen += page.requests.map(\.request.identifier)
                next = page.next
                reads += 1
            } while next != nil && reads < 50
            #expect(seen == ["x.broken"] && reads > 2, "\(seen) in \(reads) pages")
            #expect(try await inspector.request("x.link", now: now)?.stoppedBy == nil)
            #expect(try await inspector.request("absent", now: now) == nil)
        }
    }

    /// Why a request has not run, when no program can run it: the daemon records its
    /// handlers as it starts, and a pending request none of them serves waits for a
    /// handler, whatever else it waits for (the daemon only logs that it has none).
    @Test func aRequestNoRecordedHandlerServesWaitsForAHandler() async throws {
        try await onOwnThread {
            let h = try schedule()
            defer { h.finish() }
            let inspector = try await ScheduleDatabase.sqlite(path: h.path).inspector()
            defer { inspector.close() }
            let recorded = try sqliteShell(h.path, "SELECT program, identifiers, prefixes, recorded_at FROM handlers")
            #expect(recorded.count == 1 && recorded.first?[0...2] == ["", "job", "x."], "\(recorded)")
            let queued = try #require(try await inspector.request("x.queued", now: h.now))
            guard case .turn = queued.waitingFor else {
                Issue.record("x.queued, served by x.: \(String(describing: queued.waitingFor))")
                return
            }
            // A build of the program without the prefix starts (its record says so).
            _ = try sqliteShell(h.path, "UPDATE handlers SET prefixes = 'y.' || char(10) || 'x.other'")
            let startedAt = WallClockInstant(nanosecondsSinceEpoch: Int64(recorded.first?[3] ?? "") ?? 0)
            for identifier in ["x.queued", "x.later", "x.link", "x.online", "x.retrying"] {
                let orphan = try #require(try await inspector.request(identifier, now: h.now))
                #expect(orphan.waitingFor == .handler(instances: [], recordedAt: startedAt), "\(identifier)")
                #expect(orphan.state == .blocked, "\(identifier)")
            }
            let pending = try await inspector.requests(RequestQuery(selection: .pending), now: h.now).requests
            #expect(
                pending.filter { $0.state != .running }.allSatisfy {
                    $0.waitingFor == .handler(instances: [], recordedAt: startedAt)
                })
            #expect(
                try await inspector.request("x.done", now: h.now)?.waitingFor == nil, "finished: nothing to wait for")
            // An identifier registered on its own serves it.
            _ = try sqliteShell(h.path, "UPDATE handlers SET identifiers = 'x.queued'")
            guard case .turn = try await inspector.request("x.queued", now: h.now)?.waitingFor else {
                Issue.record("x.queued, registered on its own")
                return
            }
        }
    }

    @Test func historyNewestFirstWithFiltersAndPagesAndAMarkThatMovesWithTheSchedule() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(prefixes: ["h."], store: .sqlite)
            defer { h.finish() }
            h.script.withLock { $0 = { $0.runID % 3 == 0 ? .fail : .succeed } }
            try h.current.start()
            let start = h.now
            for index in 0..<30 {
                var request = ScheduledTaskRequest(identifier: "h.\(index % 2 == 0 ? "even" : "odd").\(index)")
                request.retry.maximumAttempts = 1
                try await h.current.submit(request)
                h.advance(by: .seconds(10))
            }
            let inspector = try await ScheduleDatabase.sqlite(path: h.path).inspector()
            defer { inspector.close() }
            let mark = try await inspector.changeMark()
            #expect(try await inspector.changeMark() == mark, "nothing changed")

            let everything = try await inspector.history(HistoryQuery(limit: 1000))
            #expect(everything.count == 30)
            #expect(everything.map(\.runID) == everything.map(\.runID).sorted(by: >), "newest first")
            var paged: [RunRecord] = []
            var before: HistoryPosition?
            repeat {
                let page = try await inspector.history(HistoryQuery(before: before, limit: 7))
                paged += page
                before = page.last.map(HistoryPosition.init)
            } while before != nil && paged.count < 100
            #expect(paged == everything)
            // Page by page both ways (down by the next page, up from the last by the previous),
            // filtered or not.
            #expect(try await Self.everyPage(inspector, HistoryQuery(limit: 7)).records == everything)
            #expect(
                try await Self.everyPage(inspector, HistoryQuery(identifierPrefix: "h.odd.", result: .failed, limit: 2))
                    .records == everything.filter { $0.identifier.hasPrefix("h.odd.") && $0.result == .failed })
            // Past either end, a page is empty and leads back.
            var beyond = HistoryQuery(limit: 7)
            beyond.after = HistoryPosition(everything[0])
            let aboveAll = try await inspector.historyPage(beyond)
            #expect(aboveAll.records.isEmpty && aboveAll.previous == nil)
            let first = try await inspector.history(HistoryQuery(before: aboveAll.next, limit: 7))
            #expect(aboveAll.next != nil && first == Array(everything.prefix(7)))
            beyond = HistoryQuery(before: HistoryPosition(everything[everything.count - 1]), limit: 7)
            let oldest = try await inspector.historyPage(beyond)
            #expect(oldest.records.isEmpty && oldest.next == nil && oldest.previous != nil)
            var back = HistoryQuery(limit: 7)
            back.after = oldest.previous
            #expect(try await inspector.historyPage(back).records == Array(everything.suffix(7)))
            // Each filter's attempts counted as many as listed; a search not counted.
            try await ScheduleInspectorPaging.historyCountsAreTheListed(inspector)
            let failed = try await inspector.history(HistoryQuery(result: .failed, limit: 1000))
            #expect(!failed.isEmpty && failed == everything.filter { $0.result == .failed })
            let succeeded = try await inspector.history(HistoryQuery(result: .succeeded, limit: 1000))
            #expect(!succeeded.isEmpty && succeeded == everything.filter { $0.result == .succeeded })
            let odd = try await inspector.history(HistoryQuery(identifierPrefix: "h.odd.", limit: 1000))
            #expect(odd.count == 15 && odd.allSatisfy { $0.identifier.hasPrefix("h.odd.") })
            // One request's own: "h.odd.1" and not the newer "h.odd.11", "h.odd.13", … its prefix takes in.
            var one = HistoryQuery(limit: 3)
            one.identifier = "h.odd.1"
            #expect(try await inspector.history(one).map(\.identifier) == ["h.odd.1"])
            #expect(try await inspector.history(HistoryQuery(identifierPrefix: "h.odd.1", limit: 3)).count == 3)
            let window = try await inspector.history(
                HistoryQuery(startedFrom: start + .seconds(100), startedBefore: start + .seconds(200), limit: 1000))
            #expect(
                window
                    == everything.filter {
                        $0.startedAt >= start + .seconds(100) && $0.startedAt < start + .seconds(200)
                    })
            #expect(window.count == 10)
            // A range read through the index of start times and sorted, or read newest first
            // by run when it holds more than the bound: the same attempts either way, a
            // prefix beside it too.
            let bounded = try await SQLiteScheduleInspector.open(path: h.path, rangeSortedAtMost: 5)
            defer { bounded.close() }
            for query in [
                HistoryQuery(startedFrom: start + .seconds(100), startedBefore: start + .seconds(200), limit: 1000),
                HistoryQuery(startedFrom: start + .seconds(100), limit: 4),
                HistoryQuery(startedBefore: start + .seconds(30), limit: 1000),
                HistoryQuery(identifierPrefix: "h.odd.", startedFrom: start + .seconds(100), limit: 1000),
                HistoryQuery(startedFrom: start - .seconds(86_400), startedBefore: start - .seconds(3600)),
            ] {
                let expected = everything.filter { record in
                    (query.startedFrom.map { record.startedAt >= $0 } ?? true)
                        && (query.startedBefore.map { record.startedAt < $0 } ?? true)
                        && record.identifier.hasPrefix(query.identifierPrefix ?? "")
                }
                #expect(try await bounded.history(query) == Array(expected.prefix(query.limit)))
                #expect(try await inspector.history(query) == Array(expected.prefix(query.limit)))
            }

            // The newest attempt of each of several requests at once, as each one's history
            // says: a second run of one, one asked twice, one that never ran.
            try await h.current.submit(ScheduledTaskRequest(identifier: "h.odd.1"))
            h.advance(by: .seconds(10))
            let asked = ["h.odd.1", "h.even.0", "h.odd.1", "h.never"]
            let newest = try await inspector.newestAttempts(of: asked)
            #expect(Set(newest.keys) == ["h.odd.1", "h.even.0"])
            for identifier in ["h.odd.1", "h.even.0"] {
                var own = HistoryQuery(limit: 1)
                own.identifier = identifier
                #expect(newest[identifier] == (try await inspector.history(own).first))
            }
            #expect(newest["h.odd.1"]?.runID == (try await inspector.history(HistoryQuery(limit: 1)).first?.runID))
            // An inspector of another kind, without a read of its own for it, answers alike.
            #expect(try await HistoryOnly(inspector).newestAttempts(of: asked) == newest)
            #expect(try await inspector.newestAttempts(of: []).isEmpty)

            try await h.current.submit(ScheduledTaskRequest(identifier: "h.more"))
            h.settle()
            #expect(try await inspector.changeMark() != mark, "the owner committed")
        }
    }

    @Test func searchFindsTextInIdentifiersTagsStopReasonsAndOutputsAStretchAtATime() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(prefixes: ["s."], store: .sqlite)
            defer { h.finish() }
            h.script.withLock {
                $0 = { $0.identifier.hasPrefix("s.slow") || $0.identifier == "s.report" ? .hang : .succeed }
            }
            try h.current.start()
            for index in 0..<24 {
                var request = ScheduledTaskRequest(identifier: "s.alpha.\(index)")
                request.tags = index % 2 == 0 ? ["red"] : ["blue-team", "x"]
                try await h.current.submit(request)
                h.advance(by: .seconds(10))
            }
            var slow = ScheduledTaskRequest(identifier: "s.slow")
            slow.maximumDuration = .seconds(60)
            slow.retry.maximumAttempts = 1
            try await h.current.submit(slow)
            try await h.current.submit(ScheduledTaskRequest(identifier: "s.report"))
            h.settle()
            let report = try #require(h.hanging.all.first { $0.identifier == "s.report" })
            try report.setOutput(Array("uploaded needle-42 segments".utf8))
            report.setTaskCompleted(success: true)
            h.advance(by: .seconds(120))  // s.slow's grant runs out: an attempt with a stop reason
            let inspector = try await ScheduleDatabase.sqlite(path: h.path).inspector()
            defer { inspector.close() }
            let everything = try await inspector.history(HistoryQuery(limit: 1000))
            let stopped = try #require(everything.first { $0.identifier == "s.slow" }?.stopReason)
            let reasonWord = String(stopped.split(separator: " ").max { $0.count < $1.count } ?? "")
            #expect(reasonWord.count > 3, "\(stopped)")

            // Requests: in an identifier, in a tag (not in a tag's commas), byte for byte.
            let now = h.now
            let all = try await inspector.requests(RequestQuery(selection: .all, limit: 1000), now: now).requests
            let small = try await SQLiteScheduleInspector.open(path: h.path, rowsReadPerPage: 5)
            defer { small.close() }
            for text in ["pha.1", "ue-te", "e-team,x", "ALPHA", "s.", "needle"] {
                var query = RequestQuery(selection: .all, limit: 4)
                query.search = text
                let expected = all.filter { request in
                    request.request.identifier.contains(text) || request.request.tags.contains { $0.contains(text) }
                }
                for newestFirst in [false, true] {
                    query.newestFirst = newestFirst
                    let order = expected.map(\.request.identifier)
                    for found in [
                        try await ScheduleInspectorPaging.everyPage(inspector, query, now: now),
                        try await ScheduleInspectorPaging.everyPage(small, query, now: now),
                    ] {
                        #expect(found == (newestFirst ? order.reversed() : order), "\(text)")
                    }
                }
            }
            // In each order, a page read a stretch at a time lists what one read whole does; text no
            // request holds, a tag none has, cost a page a stretch (5 here), not every request.
            try await ScheduleInspectorPaging.searchesReadAStretchAtATime(
                whole: inspector, stretched: small, texts: ["pha.1", "ue-te"], now: now)
            var team = RequestQuery(selection: .all)
            team.search = "ue-te"
            #expect(try await inspector.requests(team, now: now).requests.count == 12)

            // History: in an identifier, a stop reason, an output; a page at a time, a page
            // that reads a bounded stretch saying where the next starts.
            for text in ["pha.1", reasonWord, "needle-42", "uploaded", "nowhere"] {
                let expected = everything.filter { record in
                    record.identifier.contains(text) || (record.stopReason?.contains(text) ?? false)
                        || record.output.map { String(decoding: $0, as: UTF8.self).contains(text) } ?? false
                }
                #expect(!expected.isEmpty || text == "nowhere")
                var whole = HistoryQuery(limit: 1000)
                whole.search = text
                #expect(try await inspector.history(whole) == expected, "\(text)")
                var query = HistoryQuery(limit: 3)
                query.search = text
                let (found, _) = try await Self.everyPage(inspector, query)
                #expect(found == expected, "\(text)")
                let (stretched, reads) = try await Self.everyPage(small, query)
                #expect(stretched == expected, "\(text)")
                #expect(reads >= everything.count / 5, "a stretch of 5 attempts per page")
            }
            // One request's own history is searched whole, whatever the stretch.
            var own = HistoryQuery(limit: 10)
            own.identifier = "s.report"
            own.search = "needle"
            #expect(try await small.historyPage(own).records.map(\.identifier) == ["s.report"])
        }
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
            #expect(
                page.records == page.records.sorted { ($0.runID, $0.attempt) > ($1.runID, $1.attempt) }, "newest first")
            #expect((page.next == nil) == (readsUp == 0), "only the last page has none after it")
            foundUp = page.records + foundUp
            up.fromOldest = false
            up.after = page.previous
            readsUp += 1
        } while up.after != nil && readsUp < 100
        #expect(foundUp == found, "the pages read up are those read down")
        return (found, reads)
    }

    /// ``schedule()`` with a request no handler serves (its handler's record changed as a
    /// daemon started without it would write it), and one its failed prerequisite stopped.
    private func scheduleWithAnOrphanAndAStoppedLink() throws -> SchedulerHarness {
        let h = try schedule(prefixes: ["x.", "y."])
        try h.current.submit(ScheduledTaskRequest(identifier: "y.orphan"))
        var stopped = ScheduledTaskRequest(identifier: "x.stopped")
        stopped.prerequisites = ["x.broken"]
        try h.current.submit(stopped)
        h.advance(by: .seconds(1))
        // Last: the scheduler's connection holds its snapshot between writes.
        let store = try SQLiteConnection(path: h.path)
        try store.execute("UPDATE handlers SET prefixes = 'x.'")
        store.close()
        return h
    }

    @Test func theOverviewCountsWhatThePagesShow() async throws {
        try await onOwnThread {
            let h = try scheduleWithAnOrphanAndAStoppedLink()
            defer { h.finish() }
            let inspector = try await ScheduleDatabase.sqlite(path: h.path).inspector()
            defer { inspector.close() }
            let now = h.now
            let overview = try await inspector.overview(now: now)
            let counts = [overview.waiting, overview.retrying, overview.running, overview.failed, overview.cancelled]
            #expect(counts == [6, 1, 1, 2, 1])
            #expect(overview.succeeded == 1)
            #expect(
                overview.handlers == [
                    HandlerLoad(handler: "x.", isPrefix: true, waiting: 5, running: 1),
                    HandlerLoad(handler: nil, isPrefix: false, waiting: 1, running: 0),
                ])
            // x.link's two tags; x.done's is a finished request's.
            #expect(
                overview.tags == [
                    TagLoad(tag: "eu", waiting: 1, running: 0), TagLoad(tag: "nightly", waiting: 1, running: 0),
                ])
            #expect(overview.minutes.count == ScheduleOverview.minutesCounted)
            #expect(overview.minutes.map(\.ended).reduce(0, +) == 3, "x.done, x.broken, x.retrying's first")
            #expect(overview.minutes.map(\.failed).reduce(0, +) == 2)
            #expect(overview.minutes.last.map { $0.start <= now && now < $0.start + .seconds(60) } == true)
            // The same counted from every page and every attempt of the hour.
            let fromPages = try await HistoryOnly(inspector).overview(now: now)
            #expect(
                fromPages
                    == ScheduleOverview(
                        waiting: overview.waiting, retrying: overview.retrying, running: overview.running,
                        failed: overview.failed, cancelled: overview.cancelled, succeeded: overview.succeeded,
                        handlers: [], tags: overview.tags, minutes: overview.minutes))
            // A request goes to its identifier's handler, else to the first prefix registered.
            // So with more prefixes than one pass counts (each counted by its range).
            let shares = [
                HandlerLoad(handler: "x.", isPrefix: true, waiting: 2, running: 1),
                HandlerLoad(handler: "x.l", isPrefix: true, waiting: 2, running: 0),
                HandlerLoad(handler: "x.queued", isPrefix: false, waiting: 1, running: 0),
                HandlerLoad(handler: nil, isPrefix: false, waiting: 1, running: 0),
            ]
            let many = (0..<SQLiteScheduleInspector.prefixesCountedInOnePass).map { "z\($0)." }
            for prefixes in [["x.l", "x."], ["x.l", "x."] + many] {
                let store = try SQLiteConnection(path: h.path)
                try store.execute(
                    "UPDATE handlers SET identifiers = 'x.queued', prefixes = '\(prefixes.joined(separator: "\n"))'")
                store.close()
                #expect(try await inspector.overview(now: now).handlers == shares, "\(prefixes.count) prefixes")
            }
            // An hour later the attempts have left the chart; the requests stay.
            let later = try await inspector.overview(now: now + .seconds(3700))
            #expect(later.minutes.allSatisfy { $0.ended == 0 } && later.waiting == 6)
        }
    }

    /// A page of requests that failed for good reads those that may have (schema version
    /// 20: an index of the finished requests whose newest attempt failed or that have
    /// details), not every finished request: among forty that succeeded, the failed ones
    /// are found within a bound of five rows read. A store of version 19 is still read
    /// right, through every finished request, in bounded pages.
    @Test func aPageOfFailedRequestsReadsOnlyThoseThatMayHaveFailed() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(prefixes: ["x."], store: .sqlite)
            defer { h.finish() }
            h.script.withLock { $0 = { $0.identifier == "x.broken" ? .fail : .succeed } }
            try h.current.start()
            var broken = ScheduledTaskRequest(identifier: "x.broken")
            broken.retry.maximumAttempts = 1
            var stopped = ScheduledTaskRequest(identifier: "x.stopped")
            stopped.prerequisites = ["x.broken"]
            try await h.current.submit(broken)
            try await h.current.submit(stopped)
            for index in 0..<40 { try await h.current.submit(ScheduledTaskRequest(identifier: "x.ok-\(index)")) }
            h.advance(by: .seconds(120))
            var query = RequestQuery(selection: .failed, limit: 10)
            query.newestFirst = true
            let expected = ["x.stopped", "x.broken"]
            let opened = try await SQLiteScheduleInspector.open(path: h.path, rowsReadPerPage: 5)
            let page = try await opened.requests(query, now: h.now)
            let overview = try await opened.overview(now: h.now)
            // Filtered, they are counted as read: each candidate told as a page tells it.
            func failed(_ prefix: String?, tag: String? = nil) -> RequestQuery {
                RequestQuery(selection: .failed, identifierPrefix: prefix, tag: tag)
            }
            #expect(try await opened.count(failed("x."), upTo: 100) == 2)
            #expect(try await opened.count(failed("x.b"), upTo: 100) == 1)
            #expect(try await opened.count(failed("x."), upTo: 1) == 1, "at least 1")
            #expect(try await opened.count(failed(nil, tag: "nightly"), upTo: 100) == 0)
            #expect(try await opened.count(failed(nil), upTo: 100) == nil, "the overview counts them all")
            opened.close()
            #expect(overview.succeeded == 40, "\(overview)")
            let found: [String] = page.requests.map(\.request.identifier)
            #expect(found == expected && page.next == nil, "\(found), next \(String(describing: page.next))")
            #expect(overview.failed == 2, "\(overview)")
            // As a build before the index left the store.
            let older = try SQLiteConnection(path: h.path)
            try older.execute(
                "DROP INDEX requests_last_run; DROP INDEX requests_retrying; DROP INDEX requests_failed_by_identifier;"
                    + " DROP TABLE lateness; DROP INDEX requests_failed;"
                    + " PRAGMA user_version = 19")
            older.close()
            let unindexed = try await SQLiteScheduleInspector.open(path: h.path, rowsReadPerPage: 5)
            defer { unindexed.close() }
            #expect(!unindexed.failedIndexed)
            var read: [String] = []
            var pages = 0
            var next: Int64?
            repeat {
                var more = query
                more.after = next
                let page = try await unindexed.requests(more, now: h.now)
                read += page.requests.map(\.request.identifier)
                next = page.next
                pages += 1
            } while next != nil && pages < 50
            #expect(read == expected && pages > 2, "\(read) in \(pages) pages")
            // Each page reads 5 of the 42 finished: past the first, how many more is not known.
            #expect(try await unindexed.count(failed("x."), upTo: 100) == nil)
            #expect(try await unindexed.overview(now: h.now).failed == 2)
        }
    }

    /// What undoes schema versions 21 to 19 (the lateness counted; the index of those that
    /// may have failed; the counts by state, the row's last result, the index of those
    /// waiting and running): a store as an older build left it.
    static let undoingVersionsFrom19 = """
        DROP INDEX requests_last_run; DROP INDEX requests_retrying; DROP INDEX requests_failed_by_identifier;
        DROP TABLE lateness; DROP INDEX requests_failed; DROP TABLE request_counts; DROP INDEX requests_unfinished;
        ALTER TABLE requests DROP COLUMN last_failed;
        """

    /// The counts by state the store keeps as it writes (schema version 19) are those a pass
    /// over every request counts, after each kind of write: runs that succeed, fail, fail for
    /// good and are retried, a cancel, runs interrupted by a restart, finished requests
    /// pruned, and the migration that counts an older store.
    @Test func theStatesCountedAsTheyAreWrittenAreThoseAPassCounts() async throws {
        try await onOwnThread {
            // Written by its scheduler alone (one that another connection wrote beside cannot
            // write again: it holds its snapshot).
            let h = try schedule(prefixes: ["x.", "y."])
            defer { h.finish() }
            var stopped = ScheduledTaskRequest(identifier: "x.stopped")
            stopped.prerequisites = ["x.broken"]
            try await h.current.submit(stopped)
            h.advance(by: .seconds(1))
            func compared(_ step: String) async throws -> ScheduleOverview {
                let opened = try await ScheduleDatabase.sqlite(path: h.path).inspector()
                defer { opened.close() }
                let inspector = try #require(opened as? SQLiteScheduleInspector)
                #expect(inspector.statesCounted, "\(step)")
                let kept = try await inspector.overview(now: h.now, countingEveryRow: false)
                let passed = try await inspector.overview(now: h.now, countingEveryRow: true)
                #expect(kept == passed, "\(step)")
                let store = try SQLiteConnection(path: h.path, readOnly: true)
                defer { store.close() }
                // State by state, as the rows stand.
                let counted = try store.rows("SELECT state, count FROM request_counts WHERE count != 0 ORDER BY 1") {
                    "\($0.int(0)): \($0.int(1))"
                }
                let rows = try store.rows(
                    "SELECT \(SQLiteScheduleStore.stateKey), COUNT(*) FROM requests GROUP BY 1 ORDER BY 1"
                ) { "\($0.int(0)): \($0.int(1))" }
                #expect(counted == rows, "\(step)")
                return kept
            }
            let first = try await compared("as submitted and run")
            let counts: [Int] = [first.waiting, first.retrying, first.running, first.failed, first.cancelled]
            #expect(counts == [5, 1, 1, 2, 1])
            let answer = SchedulerTestControl.answer(h, "retry-failed", ["by=test"]) ?? "no answer"
            #expect(answer.hasPrefix("submitted again 1 request"), "\(answer): x.broken (x.stopped did not run)")
            h.advance(by: .seconds(120))
            let retried = try await compared("the failed retried, the retries run")
            #expect(retried.failed >= 1 && retried.succeeded >= 1, "\(retried)")
            try await h.current.cancel("x.later")
            h.settle()
            let cancelled = try await compared("a cancel")
            #expect(cancelled.cancelled > retried.cancelled, "\(cancelled)")
            // A restart finds x.hang's run in progress: interrupted, run again.
            try h.open(prefixes: ["x.", "y."])
            try h.current.start()
            h.advance(by: .seconds(1))
            _ = try await compared("a restart")
            // The finished requests pruned with their history, by a store opened as the
            // scheduler's next start would.
            h.current.abandon()
            let store = try SQLiteScheduleStore(path: h.path, now: h.now, logger: h.env.logs.logger)
            _ = try store.pruneHistory(endedBefore: h.now + .seconds(60), keepingPerIdentifier: nil)
            store.close()
            let pruned = try await compared("finished requests pruned")
            #expect(pruned.succeeded == 0 && pruned.failed == 0 && pruned.cancelled == 0 && pruned.waiting > 0)
            // A store as an older build left it, counted by the migration at the next start.
            let older = try SQLiteConnection(path: h.path)
            try older.execute(Self.undoingVersionsFrom19 + " PRAGMA user_version = 18")
            older.close()
            try h.open(prefixes: ["x.", "y."])
            try h.current.start()
            h.settle()
            _ = try await compared("migrated")
        }
    }

    /// Counts another program damaged (an edited count, the table emptied) are not what an
    /// overview shows: it counts every request instead (a count near the largest integer
    /// failed it, "integer overflow"; others were shown). And the store counts again at its
    /// next open what no reader can tell without reading every request: a request deleted
    /// behind its back.
    @Test func countsAnotherProgramDamagedAreNotShownAndAreCountedAgainAtTheNextOpen() async throws {
        try await onOwnThread {
            let h = try schedule(prefixes: ["x.", "y."])
            defer { h.finish() }
            h.current.abandon()  // the daemon stopped; another program writes to its file
            func overviews() async throws -> (shown: ScheduleOverview, passed: ScheduleOverview) {
                let opened = try await ScheduleDatabase.sqlite(path: h.path).inspector()
                defer { opened.close() }
                let inspector = try #require(opened as? SQLiteScheduleInspector)
                return (
                    try await inspector.overview(now: h.now),
                    try await inspector.overview(now: h.now, countingEveryRow: true)
                )
            }
            let truth = try await overviews().passed
            #expect(truth.waiting > 0 && truth.running > 0 && truth.failed > 0, "\(truth)")
            let file = try SQLiteConnection(path: h.path)
            defer { file.close() }
            for damage in [
                "UPDATE request_counts SET count = 9223372036854775807 WHERE state = 0",
                "UPDATE request_counts SET count = 9223372036854775807 WHERE state = \(CountedState.running)",
                "UPDATE request_counts SET count = -2 WHERE state = \(CountedState.finished)",
                "UPDATE request_counts SET count = count + 1000 WHERE state = 0",
                "DELETE FROM request_counts WHERE state = 0",
                "DELETE FROM request_counts",
            ] {
                try file.execute(damage)
                let (shown, passed) = try await overviews()
                #expect(shown == truth && passed == truth, "\(damage): \(shown)")
                try file.execute(SQLiteScheduleStore.recountStates)
            }
            // Deleted behind the store's back: the counts still look like counts.
            try file.execute("DELETE FROM requests WHERE identifier = 'x.queued'")
            #expect(try file.integer(SQLiteScheduleStore.countsHoldEveryRequest) == 0)
            try h.open(prefixes: ["x.", "y."])
            try h.current.start()
            h.settle()
            #expect(try file.integer(SQLiteScheduleStore.countsHoldEveryRequest) == 1)
            let (shown, passed) = try await overviews()
            #expect(shown == passed, "\(shown) against \(passed)")
            #expect(h.env.logs.messages(at: .warning).contains { $0.message.contains("counted again") })
        }
    }

    /// The minutes an overview shows are counted as attempts end (schema version 16), and
    /// counted from the history by the migration to it: the same as the history tells.
    @Test func theLastHoursAttemptsAreCountedAsTheyEndAndByTheMigration() async throws {
        try await onOwnThread {
            let h = try schedule()
            defer { h.finish() }
            let counted = { (inspector: any ScheduleInspector) in
                let minutes = try await inspector.overview(now: h.now).minutes
                return (minutes.map(\.ended).reduce(0, +), minutes.map(\.failed).reduce(0, +))
            }
            let before = try await ScheduleDatabase.sqlite(path: h.path).inspector()
            #expect(try await counted(before) == (3, 2))
            before.close()
            // The store as version 15 left it; the next start migrates it (and finds x.hang's run
            // interrupted: one more attempt ended).
            let store = try SQLiteConnection(path: h.path)
            try store.execute(
                """
                \(ScheduleInspectorTests.undoingVersionsFrom19)
                DROP TABLE activity; DROP TABLE operator_actions; ALTER TABLE requests DROP COLUMN last_started_at;
                PRAGMA user_version = 15
                """)
            store.close()
            try h.open(prefixes: ["x."])
            try h.current.start()
            h.settle()
            let after = try await ScheduleDatabase.sqlite(path: h.path).inspector()
            defer { after.close() }
            let interrupted = try await after.history(HistoryQuery(result: .interrupted))
            #expect(interrupted.map(\.identifier) == ["x.hang"])
            let afterCounts = try await counted(after)
            let ended = try await after.history(HistoryQuery()).map { "\($0.identifier) \($0.result)" }
            // x.hang's interrupted attempt, and the runs the restarted scheduler went on with.
            #expect(afterCounts.0 == ended.count && ended.count >= 4 && afterCounts.1 == 2, "\(afterCounts): \(ended)")
            #expect(try await after.overview(now: h.now).minutes == HistoryOnly(after).overview(now: h.now).minutes)
            // Each request's last run, filled in from the history by the migration.
            for request in try await after.requests(RequestQuery(selection: .all), now: h.now).requests {
                var own = HistoryQuery(limit: 1)
                own.identifier = request.request.identifier
                let newest = try await after.history(own).first?.startedAt
                #expect(
                    request.lastRunAt == request.running?.startedAt ?? newest,
                    "\(request.request.identifier): \(String(describing: request.lastRunAt))")
            }
        }
    }

    /// How late runs started, as the store counted each start: runs due while another held
    /// the one run allowed start late by as long as it ran, one due later starts on time, one
    /// an operator started at once is not counted (it was not due), and an hour on none is.
    @Test func howLateTheHoursRunsStartedIsCountedAsEachStarts() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(
                prefixes: ["x."], store: .sqlite, configure: { $0.maximumConcurrentRuns = 1 })
            defer { h.finish() }
            h.script.withLock { $0 = { $0.identifier == "x.first" ? .hang : .succeed } }
            try h.current.start()
            for identifier in ["x.first", "x.second", "x.third"] {
                try await h.current.submit(ScheduledTaskRequest(identifier: identifier))
            }
            h.advance(by: .seconds(4))
            let first = try #require(h.hanging.all.first)
            first.setTaskCompleted(success: true)
            h.settle()
            var later = ScheduledTaskRequest(identifier: "x.later")
            later.earliestBegin = h.now + .seconds(10)
            var manual = ScheduledTaskRequest(identifier: "x.manual")
            manual.earliestBegin = h.now + .seconds(3600)
            try await h.current.submit(later)
            try await h.current.submit(manual)
            h.advance(by: .seconds(10))
            _ = try await h.current.runNow("x.manual")
            h.settle()
            let inspector = try await ScheduleDatabase.sqlite(path: h.path).inspector()
            defer { inspector.close() }
            let ended = try await inspector.history(HistoryQuery()).map(\.identifier).sorted()
            #expect(ended == ["x.first", "x.later", "x.manual", "x.second", "x.third"])
            let fourLate = LatenessBuckets.bucket(of: .seconds(4))
            #expect(try await inspector.overview(now: h.now).lateness == LatenessBuckets.summary([0: 2, fourLate: 2]))
            h.advance(by: .seconds(3660))
            #expect(try await inspector.overview(now: h.now).lateness == nil)
        }
    }

    /// A list by next run, attempt or last run: sorted so, on every store row the way the
    /// store keeps it, page after page both ways; where the sort keys tie, in the order
    /// submitted: those of every state, and the waiting and running ones.
    @Test(arguments: [RequestQuery.Selection.all, .pending])
    func eachOrderSortsByItsColumnPageAfterPageBothWays(_ selection: RequestQuery.Selection) async throws {
        try await onOwnThread {
            let h = try schedule()
            defer { h.finish() }
            let inspector = try await ScheduleDatabase.sqlite(path: h.path).inspector()
            defer { inspector.close() }
            let now = h.now
            let submitted = try await inspector.requests(RequestQuery(selection: selection), now: now).requests
            #expect(submitted.count > 4)
            let position = Dictionary(uniqueKeysWithValues: submitted.map { ($0.request.identifier, $0.position) })
            // The due times as the store keeps them, read with sqlite3.
            let due = Dictionary(
                uniqueKeysWithValues: try sqliteShell(h.path, "SELECT identifier, IFNULL(due_at, '') FROM requests").map
                {
                    ($0[0], Int64($0[1]))
                })
            #expect((due["x.queued"] ?? nil) != nil && due["x.gone"] == .some(nil))
            #expect(selection != .all || due.count == submitted.count)
            var ordersUnlikeSubmission = 0
            for order in [RequestQuery.Order.nextRun, .attempts, .lastRun] {
                var query = RequestQuery(selection: selection, limit: 1000)
                query.order = order
                let found = try await inspector.requests(query, now: now).requests
                #expect(Set(found.map(\.request.identifier)) == Set(position.keys), "\(order): every request")
                // Each row's key as the order means it: ascending, then by position.
                let keys = found.map { request -> [Int64] in
                    let id = request.request.identifier
                    switch order {
                    case .nextRun: return [(due[id] ?? nil) ?? .max, request.position]  // rows in the order submitted
                    case .attempts: return [-Int64(request.attempt), request.position]
                    default: return [request.lastRunAt.map { -$0.nanosecondsSinceEpoch } ?? .max, request.position]
                    }
                }
                #expect(
                    keys == keys.sorted { $0.lexicographicallyPrecedes($1) },
                    "\(order): \(found.map(\.request.identifier))")
                // Not by submission: the order is not the one it would be anyway (for every
                // state; for the waiting and running, in one order at least).
                let unlikeSubmission = found.map(\.position) != found.map(\.position).sorted()
                #expect(unlikeSubmission || selection == .pending, "\(order)")
                ordersUnlikeSubmission += unlikeSubmission ? 1 : 0
                var paged = query
                paged.limit = 2
                let forward = try await ScheduleInspectorPaging.everyPage(inspector, paged, now: now)
                #expect(forward == found.map(\.request.identifier), "\(order) in pages")
                paged.newestFirst = true
                let backward = try await ScheduleInspectorPaging.everyPage(inspector, paged, now: now)
                #expect(backward == forward.reversed(), "\(order) in pages, turned round")
                // A position without its key starts at the first page.
                var keyless = paged
                keyless.after = found[1].position
                #expect(
                    try await inspector.requests(keyless, now: now).requests.first?.request.identifier == forward.last)
            }
            #expect(ordersUnlikeSubmission >= 2)
            var attempts = RequestQuery(selection: .pending, limit: 1)
            attempts.order = .attempts
            #expect(
                try await inspector.requests(attempts, now: now).requests.map(\.request.identifier) == ["x.retrying"])
            var lastRun = RequestQuery(selection: .all, limit: 1)
            lastRun.order = .lastRun
            let latest = try #require(try await inspector.requests(lastRun, now: now).requests.first)
            #expect(latest.request.identifier == "x.hang" && latest.lastRunAt == latest.running?.startedAt)
            // By next run, where many are due at once (as when submitted together): in the
            // order submitted, page after page both ways, also when the row a page ended at
            // is gone before the next is read; the sequences apart from the rows' numbers, as
            // after one-shots that finished are pruned (a sequence is never given twice).
            _ = try sqliteShell(
                h.path,
                "UPDATE requests SET due_at = 1000 WHERE due_at IS NOT NULL; UPDATE requests SET sequence = sequence * 7 + 1000"
            )
            let dueTogether = position.keys.sorted {
                [(due[$0] ?? nil) == nil ? .max : 1000, position[$0] ?? 0].lexicographicallyPrecedes(
                    [(due[$1] ?? nil) == nil ? .max : 1000, position[$1] ?? 0])
            }
            var byNextRun = RequestQuery(selection: selection, limit: 1000)
            byNextRun.order = .nextRun
            let whole = try await inspector.requests(byNextRun, now: now).requests.map(\.request.identifier)
            #expect(whole == dueTogether)
            byNextRun.limit = 2
            #expect(try await ScheduleInspectorPaging.everyPage(inspector, byNextRun, now: now) == dueTogether)
            var turned = byNextRun
            turned.newestFirst = true
            #expect(try await ScheduleInspectorPaging.everyPage(inspector, turned, now: now) == dueTogether.reversed())
            let first = try await inspector.requests(byNextRun, now: now)
            _ = try sqliteShell(h.path, "DELETE FROM requests WHERE identifier = '\(dueTogether[1])'")
            byNextRun.after = first.next
            byNextRun.afterKey = first.nextKey
            #expect(
                try await inspector.requests(byNextRun, now: now).requests.map(\.request.identifier)
                    == Array(dueTogether[2..<4]))
            // By attempts, where several share a count (as after an outage), and by last run,
            // where several started at once (as a batch starts) beside others never started: as
            // the store sorts them whole without its indexes of those retrying and of those
            // started (a store of schema version 22), page after page both ways.
            _ = try sqliteShell(
                h.path,
                """
                UPDATE requests SET last_started_at = NULL WHERE finished = 0 AND running = 0;
                UPDATE requests SET failed_attempts = 2, last_started_at = 5000
                    WHERE identifier IN ('x.later', 'x.link', 'x.online')
                """)
            func everyWay(_ inspector: any ScheduleInspector, _ order: RequestQuery.Order) async throws -> [[String]] {
                var query = RequestQuery(selection: selection, limit: 1000)
                query.order = order
                let whole = try await inspector.requests(query, now: now).requests.map(\.request.identifier)
                query.limit = 2
                let forward = try await ScheduleInspectorPaging.everyPage(inspector, query, now: now)
                query.newestFirst = true
                let backward = try await ScheduleInspectorPaging.everyPage(inspector, query, now: now)
                return [whole, forward, backward.reversed()]
            }
            var indexed: [[[String]]] = []
            for order in [RequestQuery.Order.attempts, .lastRun] {
                let lists = try await everyWay(inspector, order)
                #expect(lists[0].count >= 5 && lists[0] == lists[1] && lists[0] == lists[2], "\(order): \(lists)")
                indexed.append(lists)
            }
            let started = try sqliteShell(
                h.path, "SELECT count(*) FROM requests WHERE \(SQLiteScheduleStore.lastRunRows)")
            let neverStarted = try sqliteShell(
                h.path, "SELECT count(*) FROM requests WHERE finished = 0 AND last_started_at IS NULL")
            #expect(
                (Int(started.first?.first ?? "") ?? 0) >= 3 && (Int(neverStarted.first?.first ?? "") ?? 0) >= 2,
                "both kinds among the waiting: \(started), \(neverStarted)")
            _ = try sqliteShell(
                h.path, "DROP INDEX requests_last_run; DROP INDEX requests_retrying; PRAGMA user_version = 22")
            let sorting = try await SQLiteScheduleInspector.open(path: h.path)
            defer { sorting.close() }
            #expect(!sorting.retryingIndexed && !sorting.lastRunIndexed)
            #expect(try await everyWay(sorting, .attempts) == indexed[0])
            #expect(try await everyWay(sorting, .lastRun) == indexed[1])
        }
    }

    @Test func nothingIsMadeOrChangedAndWhatIsNotAScheduleIsRefused() async throws {
        let folder = TemporaryDirectory("inspector")
        defer { folder.remove() }
        let missing = folder.path + "/absent.db"
        await #expect(throws: ScheduleStoreError.self) { try await ScheduleDatabase.sqlite(path: missing).inspector() }
        #expect(access(missing, F_OK) != 0, "nothing created")
        // Another program's database is left byte for byte.
        let foreign = folder.path + "/other.db"
        let made = try SQLiteConnection(path: foreign)
        try made.execute("CREATE TABLE notes (text TEXT); INSERT INTO notes VALUES ('keep')")
        made.close()
        let before = try Data(contentsOf: URL(fileURLWithPath: foreign))
        do {
            _ = try await ScheduleDatabase.sqlite(path: foreign).inspector()
            Issue.record("a foreign database was opened")
        } catch {
            #expect(error.message.contains("not an Overtime schedule store"), "\(error)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: foreign)) == before)
        // A link to a store is not followed.
        symlink(foreign, folder.path + "/link.db")
        await #expect(throws: ScheduleStoreError.self) {
            try await ScheduleDatabase.sqlite(path: folder.path + "/link.db").inspector()
        }
    }
}

/// Which of its connections an inspector reads through, as a transcript: a read never
/// waits behind another while fewer than the most connections are open.
@Suite("Schedule inspector's connections")
struct InspectorReaderChoiceTests {
    @Test func aReadGoesToAnIdleConnectionOrANewOneUpToTheMost() {
        typealias Inspector = InspectorReaders
        #expect(Inspector.choose(busy: [0], opening: 0, closed: false, most: 4) == .use(0), "idle: the first")
        #expect(Inspector.choose(busy: [1], opening: 0, closed: false, most: 4) == .open, "busy: another")
        #expect(Inspector.choose(busy: [1, 0], opening: 0, closed: false, most: 4) == .use(1))
        #expect(Inspector.choose(busy: [2, 1], opening: 1, closed: false, most: 4) == .open, "3 of 4")
        #expect(
            Inspector.choose(busy: [2, 1, 3], opening: 1, closed: false, most: 4) == .use(1), "all: the least busy")
        #expect(
            Inspector.choose(busy: [1, 1, 1, 1], opening: 0, closed: false, most: 4) == .use(0), "equals: the first")
        #expect(Inspector.choose(busy: [1], opening: 0, closed: true, most: 4) == .use(0), "closed: none opened")
    }
}

/// An inspector that reads only through ``ScheduleInspector``'s requirements another has,
/// leaving the rest to the protocol's defaults.
private struct HistoryOnly: ScheduleInspector {
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
