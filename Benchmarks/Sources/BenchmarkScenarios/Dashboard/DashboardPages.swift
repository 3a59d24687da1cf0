// The dashboard's rows: how long its pages take over a large schedule (a million attempts
// in the history, a hundred thousand requests pending), and how soon an open page hears of
// a change. The schedule is made by a real scheduler; the dashboard is the shipped
// `overtime-dashboard`, reading the store beside it.

import Foundation
import Overtime
import OvertimeScheduler
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `dashboard_page_p99_ms` and `dashboard_live_update_ms`.
public enum DashboardPages {
    /// The names of the orders of the sorted pages (``Served/sortedPages``) in the figures,
    /// in the same order.
    public static let sortedOrderNames = ["next_run", "attempts", "last_run"]

    /// What one measurement found.
    public struct Figures: Sendable {
        /// Per load of a requests page, in microseconds.
        public var requests: [Int64] = []
        /// Per load of a history page, in microseconds.
        public var history: [Int64] = []
        /// Per load of a page of requests that failed for good, in microseconds.
        public var failed: [Int64] = []
        /// Per load of a history page whose filter matches few of its rows or none (one
        /// result no attempt had, a range of start times no attempt is in), in microseconds.
        public var historyFew: [Int64] = []
        /// Per load of a page searched for text no request or attempt holds (the requests
        /// of every state, the history), in microseconds: a page that reads its bound.
        public var search: [Int64] = []
        /// Per load of a requests page sorted by a column (next run, attempt, last run): the
        /// store reads each in an index of its own (of due, of retrying and of started
        /// requests), in microseconds.
        public var sorted: [Int64] = []
        /// The loads of ``sorted`` by the order of their page (`next_run`, `attempts`,
        /// `last_run`), in microseconds: each order has a way of its own to read its page.
        public var sortedByOrder: [String: [Int64]] = [:]
        /// Per load of the overview (counts by state and handler, the last hour's attempts by
        /// minute), in microseconds.
        public var overview: [Int64] = []
        /// Per load of the overview just after a change to the schedule (the change seen on an
        /// open event stream first): the counts read again, not the count every viewer shares
        /// while nothing changes, in microseconds.
        public var overviewChanged: [Int64] = []
        /// From a commit to the `change` event on an open event stream, in microseconds.
        public var live: [Int64] = []
        /// What was measured, for the notes.
        public var shape = ""
    }

    /// Makes a store of `pending` requests that ran `history / pending` times each (one-shots
    /// submitted again as each round ends, the last round daily requests, so `history`
    /// attempts in all) and wait a day for their next run, each with its last run's start
    /// (what a list by last run reads); starts `dashboard` beside it, loads each page `loads`
    /// times and times `changes` live updates.
    public static func measure(
        dashboard: String, history: Int, pending: Int, loads: Int, changes: Int, scratch: String
    ) throws -> Figures {
        let ran = Atomic<Int>(0)
        let (runtime, scheduler, folder) = try SchedulerScenarios.make(scratch: scratch, maximumConcurrentRuns: 1000) {
            _ in ran.add(1, ordering: .relaxed)
        }
        defer { SchedulerScenarios.finish(runtime, folder) }
        let built = ContinuousClock.now
        func submitAll(daily: Bool) throws {
            var index = 0
            while index < pending {
                try scheduler.submit(
                    contentsOf: (index..<min(index + 10_000, pending)).map {
                        var request = ScheduledTaskRequest(identifier: "job-\($0)")
                        if daily { request.repetition = Repetition(every: .seconds(86_400)) }
                        return request
                    })
                index += 10_000
            }
        }
        try scheduler.start()
        let rounds = max(1, history / max(1, pending))
        for round in 1...rounds {
            try submitAll(daily: round == rounds)
            while ran.load(ordering: .relaxed) < round * pending { usleep(10_000) }
            if round < rounds {
                while try scheduler.pendingRequestCount() > 0 { usleep(1_000) }
            }
        }
        // The last round's ends written: none running, each waiting a day.
        while scheduler.pendingRequests().contains(where: { $0.waitingFor == .running }) { usleep(10_000) }
        let far = runtime.clock.wallClockNow + .seconds(86_400)
        let buildSeconds = seconds(ContinuousClock.now - built)

        let dashboardProcess = try Served(dashboard: dashboard, store: folder + "/schedule.db", folder: folder)
        defer { dashboardProcess.stop() }

        // A request's position is its row, and each round's requests are new rows (the last
        // round's from 1,000,001 at the full size): the deep pages start from the first
        // page's own next position, a half and a third of the requests further on (a
        // schedule of one page, the smoke run's, has none: any position is as good).
        let afterFirstPage = try dashboardProcess.nextPosition(of: "/requests") ?? Int64(pending)
        let requestPages = [
            "/requests", "/requests?state=pending&after=\(afterFirstPage - Int64(pending / 2))",
            "/requests?state=all&after=\(afterFirstPage - Int64(pending / 3))", "/requests?prefix=job-4",
        ]
        let historyPages = [
            "/history", "/history?before=\(max(1, rounds * pending / 2)):1", "/history?prefix=job-12",
            "/history?result=succeeded&before=\(max(1, rounds * pending / 3)):1", "/history?end=1",
            "/history?after=\(max(1, rounds * pending / 2)):1", "/history?prefix=job-12&end=1",
        ]
        let failedPages = ["/failed", "/failed?after=\(pending / 2)"]
        var figures = try dashboardProcess.load(
            requestPages: requestPages, historyPages: historyPages, failedPages: failedPages, loads: loads,
            rowsExpected: pending > 0)
        figures.live = try dashboardProcess.timeLiveUpdates(changes) { change in
            var request = ScheduledTaskRequest(identifier: "due-live-\(change)")
            request.earliestBegin = far
            try scheduler.submit(request)
        }
        figures.overviewChanged = try dashboardProcess.timeOverviewAfterChanges(max(10, loads / 10)) { change in
            var request = ScheduledTaskRequest(identifier: "due-counted-\(change)")
            request.earliestBegin = far
            try scheduler.submit(request)
        }
        figures.shape =
            "dashboard_page_p99_ms: \(pending) requests that ran \(rounds) times each (\(rounds * pending) attempts "
            + "in the history; one-shots, the last round daily) and wait a day for the next run (\(Int(buildSeconds)) s to make by the scheduler); \(loads) loads of each kind over "
            + "\(requestPages.count) requests pages and \(historyPages.count) history pages (first, deep, by prefix, "
            + "filtered, last, newer, a prefix's last) and \(failedPages.count) pages of what failed for good (none did), each a new connection with a bearer token; dashboard_live_update_ms: \(changes) submits, "
            + "from the commit to the event on an open stream (the feed looks every 200 ms, its default); "
            + "overview_changed: \(max(10, loads / 10)) loads of the overview, each after a submit seen on the stream"
        return figures
    }

    /// `overtime-dashboard` serving `store` (a SQLite file or a `postgres://` URL) on a free
    /// loopback port, with a bearer token of its own, until ``stop()``.
    public final class Served {
        let process: MeasuredProcess
        let port: Int
        let token = "bench-" + String(UInt64.random(in: 1 << 60...UInt64.max), radix: 16)

        /// Starts `dashboard` and waits until it answers.
        public init(dashboard: String, store: String, folder: String) throws {
            let credentials = folder + "/credentials"
            _ = FileManager.default.createFile(
                atPath: credentials, contents: Data("bench:\(token)\n".utf8), attributes: [.posixPermissions: 0o600])
            port = try MetricsScrape.freePort()
            process = try MeasuredProcess(
                dashboard, ["--store", store, "--credentials", credentials, "--listen", "127.0.0.1:\(port)"],
                folder: folder)
            let deadline = ContinuousClock.now + .seconds(60)
            while (try? get(port: port, "/requests", token: token)) == nil {
                guard ContinuousClock.now < deadline else {
                    _ = try? process.terminate(timeout: 30)
                    throw ScenarioError("the dashboard did not answer: \(process.standardError.suffix(400))")
                }
                usleep(20_000)
            }
        }

        /// Stops the dashboard.
        public func stop() { _ = try? process.terminate(timeout: 30) }

        /// The position the link to the page after `path` goes on from (its `after`), or
        /// `nil` when it links none.
        func nextPosition(of path: String) throws -> Int64? {
            let body = try get(port: port, path, token: token)
            guard let link = body.firstMatch(of: /href="([^"]*)" rel="next"/) else { return nil }
            guard let position = link.1.firstMatch(of: /after=([0-9]+)/).flatMap({ Int64($0.1) }) else {
                throw ScenarioError("\(path): its next page's link names no position: \(link.1)")
            }
            return position
        }

        /// History pages whose filter matches none of the attempts the scenarios make: a
        /// result none had, and a day long before any started. Without an index for them a
        /// store reads every attempt to find that out.
        static let historyFewPages = ["/history?result=superseded", "/history?from=2001-01-01&until=2001-01-02"]

        /// Pages searched for text no identifier, tag, stop reason or output holds: no index
        /// answers a search. The requests page reads every request (the text is in the
        /// query's condition); the history page a stretch of attempts.
        static let searchPages = ["/requests?state=all&q=no+such+text", "/history?q=no+such+text"]

        /// Requests pages sorted by each column the table sorts by: by next run and attempts
        /// read in indexes, every pending request sorted by last run.
        static let sortedPages = [
            "/requests?state=pending&order=next-run", "/requests?state=pending&order=attempts",
            "/requests?state=pending&order=last-run",
        ]

        /// The clients that load the slowest filter (a range of start times no attempt is
        /// in) over and over while the pages are timed: a slow read must not hold the others.
        static let busyClients = 2

        /// Loads the pages in turn, `loads` times each kind, each over a new connection,
        /// while ``busyClients`` clients loop on the slowest filter.
        public func load(
            requestPages: [String], historyPages: [String], failedPages: [String], loads: Int, rowsExpected: Bool
        ) throws -> Figures {
            let stop = Atomic<Bool>(false)
            let looped = Atomic<Int>(0)
            let busy = (0..<Self.busyClients).map { _ in
                Thread { [port, token] in
                    while !stop.load(ordering: .relaxed) {
                        _ = try? get(port: port, Self.historyFewPages[1], token: token)
                        looped.add(1, ordering: .relaxed)
                    }
                }
            }
            busy.forEach { $0.start() }
            defer {
                stop.store(true, ordering: .relaxed)
                while busy.contains(where: { !$0.isFinished }) { usleep(1_000) }
            }
            var figures = Figures()
            for load in 0..<loads {
                for (pages, keep, rows) in [
                    (requestPages, \Figures.requests, rowsExpected), (historyPages, \Figures.history, rowsExpected),
                    (failedPages, \Figures.failed, rowsExpected), (Self.historyFewPages, \Figures.historyFew, false),
                    (["/overview"], \Figures.overview, true), (Self.searchPages, \Figures.search, false),
                    (Self.sortedPages, \Figures.sorted, true),
                ] {
                    let page = pages[load % pages.count]
                    let started = monotonicNanoseconds()
                    let body = try get(port: port, page, token: token)
                    let microseconds = (monotonicNanoseconds() - started) / 1000
                    figures[keyPath: keep].append(microseconds)
                    if keep == \Figures.sorted {
                        figures.sortedByOrder[DashboardPages.sortedOrderNames[load % pages.count], default: []].append(
                            microseconds)
                    }
                    guard body.contains("<tbody>"), body.contains("<td") || !rows else {
                        throw ScenarioError("\(page) shows no rows")
                    }
                }
            }
            return figures
        }

        /// With an event stream open, `changes` times: a random pause (the commit falls
        /// anywhere between two looks of the feed), `change(index)` committed, the change
        /// event awaited; each in microseconds.
        public func timeLiveUpdates(_ changes: Int, _ change: (Int) throws -> Void) throws -> [Int64] {
            let stream = try EventStream(port: port, token: token)
            var live: [Int64] = []
            for index in 0..<changes {
                usleep(UInt32.random(in: 250_000...650_000))
                let started = monotonicNanoseconds()
                try change(index)
                try stream.waitForChange(timeout: 10)
                live.append((monotonicNanoseconds() - started) / 1000)
            }
            return live
        }

        /// With an event stream open, `changes` times: `change(index)` committed, the change
        /// event awaited (the dashboard has seen it), the overview loaded; each load in
        /// microseconds.
        public func timeOverviewAfterChanges(_ changes: Int, _ change: (Int) throws -> Void) throws -> [Int64] {
            let stream = try EventStream(port: port, token: token)
            var loads: [Int64] = []
            for index in 0..<changes {
                try change(index)
                try stream.waitForChange(timeout: 10)
                let started = monotonicNanoseconds()
                let body = try get(port: port, "/overview", token: token)
                loads.append((monotonicNanoseconds() - started) / 1000)
                guard body.contains("<td") else { throw ScenarioError("/overview shows no rows") }
            }
            return loads
        }
    }

    /// GET `path` with `token`: the body, or an error unless 200.
    static func get(port: Int, _ path: String, token: String) throws -> String {
        let answer = try LoopbackHTTP.exchange(
            port: port,
            "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\nConnection: close\r\n\r\n")
        guard answer.starts(with: Array("HTTP/1.1 200".utf8)) else {
            throw ScenarioError("GET \(path): \(String(decoding: answer.prefix(200), as: UTF8.self))")
        }
        return String(decoding: answer, as: UTF8.self)
    }

    /// An open `/events` stream, read as it comes.
    final class EventStream {
        let fd: Int32
        private var pending: [UInt8] = []

        init(port: Int, token: String) throws {
            fd = try LoopbackHTTP.connect(port: port)
            let request = "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n\r\n"
            _ = request.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
            try read(until: "retry:", timeout: 10)
        }

        deinit { close(fd) }

        func waitForChange(timeout: Double) throws { try read(until: "event: change", timeout: timeout) }

        private func read(until marker: String, timeout: Double) throws {
            let deadline = monotonicNanoseconds() + Int64(timeout * 1e9)
            var buffer = [UInt8](repeating: 0, count: 4096)
            while monotonicNanoseconds() < deadline {
                if let found = pending.firstRange(of: Array(marker.utf8)) {
                    pending.removeSubrange(..<found.upperBound)
                    return
                }
                var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&descriptor, 1, 50) > 0 else { continue }
                let count = recv(fd, &buffer, buffer.count, 0)
                guard count > 0 else { throw ScenarioError("the event stream closed") }
                pending += buffer[..<count]
            }
            throw ScenarioError("no '\(marker)' on the event stream within \(timeout) s")
        }
    }
}
