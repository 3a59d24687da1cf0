// A fleet's overview, counted by the server: the requests by state as the writes counted
// them (schema version 18; before, in a pass over every request), by handler and tag, with
// the ones that failed for good, in one statement (one snapshot, so the counts add up); the
// last hour's attempts by minute in another, and how late that hour's runs started in a
// third.

import Overtime
@_spi(ScheduleStore) import OvertimeScheduler
import PostgresNIO

extension PostgresScheduleInspector {
    func overview(now: WallClockInstant) async throws(ScheduleStoreError) -> ScheduleOverview {
        try await overview(now: now, countingEveryRow: !statesCounted.withLockedValue { $0 })
    }

    /// The overview, its states counted in a pass over every request with
    /// `countingEveryRow` (a schedule before schema version 18; and a test's check of the
    /// counts kept).
    func overview(now: WallClockInstant, countingEveryRow: Bool) async throws(ScheduleStoreError)
        -> ScheduleOverview
    {
        try await using { [self] connection, offset in
            let match = HandlerMatch(try await registeredHandlers(connection, offset: offset))
            // Counts that cannot be the rows' (written by another program, or a backend's
            // with its triggers off) are not shown: the requests are counted in a pass.
            var states = try await states(connection, match, countingEveryRow: countingEveryRow)
            if !states.plausible { states = try await self.states(connection, match, countingEveryRow: true) }
            let (byHandler, byTag, totals, failed) = (states.byHandler, states.byTag, states.totals, states.failed)
            // The hour's minutes on the database's clock, which the stored times are on.
            let first = ScheduleOverview.firstMinute(before: now)
            let counted =
                activityCounted.withLockedValue { $0 }
                ? try await countedMinutes(connection, from: first, offset: offset)
                : try await minutesFromTheHistory(connection, from: first, offset: offset)
            return ScheduleOverview(
                waiting: totals.waiting, retrying: totals.retrying, running: totals.running, failed: failed,
                cancelled: totals.cancelled, succeeded: totals.finished - failed,
                handlers: ScheduleOverview.handlerRows(byHandler, recorded: match.recorded),
                tags: ScheduleOverview.tagRows(byTag), minutes: ScheduleOverview.minutes(from: first, counted: counted),
                lateness: latenessCounted.withLockedValue { $0 }
                    ? try await countedLateness(connection, from: first, offset: offset) : nil)
        }
    }

    /// The requests counted by state, handler and tag, and those that failed for good.
    private struct States {
        var byHandler: [HandlerMatch.Found: (waiting: Int, running: Int)] = [:]
        var byTag: [String: (waiting: Int, running: Int)] = [:]
        var totals = (waiting: 0, retrying: 0, running: 0, cancelled: 0, finished: 0)
        var failed = 0

        /// More requests than any schedule holds.
        static let most = 1 << 40

        /// Whether each count is a number of rows a schedule could hold: none below zero,
        /// none past ``most`` (so that no sum of them overflows).
        var countsInRange: Bool {
            [totals.waiting, totals.retrying, totals.running, totals.cancelled, totals.finished].allSatisfy {
                (0...Self.most).contains($0)
            }
        }

        /// Whether the counts could be the rows': in range, no more failed than finished,
        /// and no handler's share (read in the rows) above the waiting or running counted.
        var plausible = true
    }

    /// The states as the writes counted them, or in a pass over every request with
    /// `countingEveryRow`.
    private func states(
        _ connection: PostgresConnection, _ match: HandlerMatch, countingEveryRow: Bool
    ) async throws -> States {
        var counted = States()
        var bindings = PostgresBindings()
        let states =
            countingEveryRow
            ? Self.statesInAPass(match, &bindings) : Self.countedStates(match, &bindings)
        let failures = Self.bind(ScheduleOverview.failureResults, &bindings)
        // A request that failed for good finished without a success: from version 14 the
        // few such are marked and indexed; before, every finished request is looked at.
        let candidates = failureCandidatesMarked.withLockedValue { $0 } ? "AND r.failure_candidate" : ""
        let sql = """
            WITH finished AS (
                SELECT r.chain, (SELECT h.result FROM overtime.history h
                    WHERE h.identifier = r.identifier AND h.owner = r.owner
                    ORDER BY h.run_id DESC, h.attempt DESC LIMIT 1) AS last_result
                FROM overtime.requests r
                WHERE r.finished AND NOT r.running AND r.cancelled_at IS NULL \(candidates))\(states.with)
            \(states.rows)
            UNION ALL
            SELECT 'f', NULL, NULL, count(*), 0, 0, 0, 0, NULL FROM finished
            WHERE last_result = ANY(\(failures)::text[])
            UNION ALL
            SELECT 'c', NULL, NULL, 0, 0, 0, 0, 0, chain FROM finished
            WHERE chain IS NOT NULL AND (last_result IS NULL OR NOT last_result = ANY(\(failures)::text[]))
            """
        // A row's waiting and running requests count for its handler, and for each of
        // the tags in its tags column (`,a,b,`).
        func share(_ load: (waiting: Int, running: Int), handler key: String) {
            let found = HandlerMatch.found(key: key)
            counted.byHandler[found, default: (0, 0)].waiting += load.waiting
            counted.byHandler[found, default: (0, 0)].running += load.running
        }
        func share(_ load: (waiting: Int, running: Int), tags: String) {
            guard load.waiting + load.running > 0 else { return }
            for tag in tags.split(separator: ",").map(String.init) {
                counted.byTag[tag, default: (0, 0)].waiting += load.waiting
                counted.byTag[tag, default: (0, 0)].running += load.running
            }
        }
        for row in try await run(connection, PostgresQuery(unsafeSQL: sql, binds: bindings)) {
            let cell = NamedCells(row)
            let load = (
                waiting: Int(try cell("waiting", as: Int64.self)), running: Int(try cell("running", as: Int64.self))
            )
            switch try cell("kind", as: String.self) {
            case "h":
                // A group of the pass, a handler's and a tags column's.
                share(load, handler: try cell("handler", as: String.self))
                share(load, tags: try cell("tags", as: String.self))
                fallthrough
            case "s":
                // The states as the writes counted them (or a group of the pass).
                counted.totals.waiting += load.waiting
                counted.totals.running += load.running
                counted.totals.retrying += Int(try cell("retrying", as: Int64.self))
                counted.totals.cancelled += Int(try cell("cancelled", as: Int64.self))
                counted.totals.finished += Int(try cell("finished", as: Int64.self))
            case "p": share(load, handler: try cell("handler", as: String.self))
            case "t": share(load, tags: try cell("tags", as: String.self))
            case "f": counted.failed += load.waiting
            default:
                // Stopped by its chain, told by the state the chain keeps.
                let chain = try cell("chain", as: ByteBuffer?.self).map { Array($0.readableBytesView) }
                if chain.flatMap({ ChainState(packed: $0) })?.stoppedBy != nil { counted.failed += 1 }
            }
        }
        if !countingEveryRow {
            guard counted.countsInRange else {
                counted.plausible = false
                return counted
            }
            // Counted by handler: what no handler serves is the rest.
            var unserved = (waiting: counted.totals.waiting, running: counted.totals.running)
            for (waiting, running) in counted.byHandler.values {
                unserved.waiting -= waiting
                unserved.running -= running
            }
            counted.byHandler[.none] = unserved
            counted.plausible =
                counted.failed <= counted.totals.finished && unserved.waiting >= 0 && unserved.running >= 0
        }
        return counted
    }

    /// `value` bound as the next of `bindings`, and how the SQL names it.
    static func bind(
        _ value: some PostgresNonThrowingEncodable & Sendable, _ bindings: inout PostgresBindings
    ) -> String {
        bindings.append(value)
        return "$\(bindings.count)"
    }

    /// The rows (`kind` h) of a pass over every request, grouped by handler (as `match`
    /// finds it) and by the tags column: each group's counts by state.
    private static func statesInAPass(
        _ match: HandlerMatch, _ bindings: inout PostgresBindings
    ) -> (with: String, rows: String) {
        var cases: [String] = []
        if !match.identifiers.isEmpty {
            cases.append(
                "WHEN r.identifier = ANY(\(bind(match.identifiers, &bindings))::text[]) THEN 'i' || r.identifier")
        }
        for prefix in match.prefixes {
            // Identifiers compare byte by byte from schema version 13; starts_with does
            // under any collation.
            let key = HandlerMatch.key(.init(name: prefix, isPrefix: true))
            cases.append(
                "WHEN starts_with(r.identifier, \(bind(prefix, &bindings))) THEN \(bind(key, &bindings))::text")
        }
        let handler = cases.isEmpty ? "'-'::text" : "CASE \(cases.joined(separator: " ")) ELSE '-' END"
        let rows = """
            SELECT 'h' AS kind, handler, tags, waiting, retrying, running, cancelled, finished, NULL::bytea AS chain
            FROM (SELECT \(handler) AS handler, r.tags AS tags,
                count(*) FILTER (WHERE r.cancelled_at IS NULL AND NOT r.running AND NOT r.finished) AS waiting,
                count(*) FILTER (WHERE r.cancelled_at IS NULL AND NOT r.running AND NOT r.finished
                    AND r.failed_attempts > 0) AS retrying,
                count(*) FILTER (WHERE r.cancelled_at IS NULL AND r.running) AS running,
                count(*) FILTER (WHERE r.cancelled_at IS NOT NULL) AS cancelled,
                count(*) FILTER (WHERE r.cancelled_at IS NULL AND NOT r.running AND r.finished) AS finished
                FROM overtime.requests r GROUP BY 1, 2) counts
            """
        return ("", rows)
    }

    /// The states as the writes counted them (schema version 18: kind s, one row); each
    /// handler's waiting and running requests (kind p), read in the index of those alone; the
    /// waiting and running requests by their tags column (kind t), read only when the counts
    /// say some such have tags.
    private static func countedStates(
        _ match: HandlerMatch, _ bindings: inout PostgresBindings
    ) -> (with: String, rows: String) {
        typealias Bit = CountedRequestState
        // Each count sums the states whose `bits` are `value`: a sum past any schedule's size
        // (damaged counts) is read as one past it, which the overview does not show.
        func sum(_ name: String, _ bits: Int64, _ value: Int64, and more: String = "") -> String {
            "least(coalesce(sum(count) FILTER (WHERE state & \(bits) = \(value)\(more)), 0), \(States.most + 1))::bigint"
                + " AS \(name)"
        }
        let phase = Bit.cancelled | Bit.running | Bit.finished  // where the request stands
        let with = """
            ,
            counts AS (SELECT \([
                sum("waiting", phase, 0), sum("retrying", phase | Bit.retried, Bit.retried),
                sum("running", Bit.cancelled | Bit.running, Bit.running), sum("cancelled", Bit.cancelled, Bit.cancelled),
                sum("finished", phase, Bit.finished),
                // Not cancelled, not finished (or finished while its run goes on), tagged.
                sum(
                    "unfinished_tagged", Bit.cancelled | Bit.tagged, Bit.tagged,
                    and: " AND state & \(Bit.running | Bit.finished) <> \(Bit.finished)"),
            ].joined(separator: ", ")) FROM overtime.request_counts)
            """
        // The predicate of `requests_unfinished`, which holds these (and their running flag).
        let unfinished = "r.cancelled_at IS NULL AND (NOT r.finished OR r.running)"
        let loads = "count(*) FILTER (WHERE NOT r.running), 0, count(*) FILTER (WHERE r.running), 0, 0, NULL"
        var rows = [
            """
            SELECT 's' AS kind, NULL::text AS handler, NULL::text AS tags, waiting, retrying, running, cancelled,
                finished, NULL::bytea AS chain
            FROM counts
            """,
            """
            SELECT 't', NULL, r.tags, \(loads) FROM overtime.requests r
            WHERE (SELECT unfinished_tagged FROM counts) > 0 AND \(unfinished) AND r.tags <> '' GROUP BY r.tags
            """,
        ]
        if !match.identifiers.isEmpty {
            rows.append(
                """
                SELECT 'p', 'i' || r.identifier, NULL, \(loads) FROM overtime.requests r
                WHERE \(unfinished) AND r.identifier = ANY(\(bind(match.identifiers, &bindings))::text[])
                GROUP BY r.identifier
                """)
        }
        for (index, prefix) in match.prefixes.enumerated() {
            // Its range (identifiers compare byte by byte, collation C from version 13), but
            // for its share's exceptions (HandlerMatch.share(ofPrefixAt:)).
            let (registered, overlapping) = match.share(ofPrefixAt: index)
            var conditions = [range(prefix, &bindings)]
            if !registered.isEmpty {
                conditions.append("NOT r.identifier = ANY(\(bind(registered, &bindings))::text[])")
            }
            for earlier in overlapping { conditions.append("NOT (\(range(earlier, &bindings)))") }
            let key = HandlerMatch.key(.init(name: prefix, isPrefix: true))
            rows.append(
                """
                SELECT 'p', \(bind(key, &bindings))::text, NULL, \(loads) FROM overtime.requests r
                WHERE \(unfinished) AND \(conditions.joined(separator: " AND "))
                """)
        }
        return (with, rows.joined(separator: "\nUNION ALL\n"))
    }

    /// The condition that an identifier starts with `prefix`, as a range of the keys
    /// (``HandlerMatch/rangeEnd(of:)``; identifiers compare byte by byte, collation `C`).
    static func range(_ prefix: String, _ bindings: inout PostgresBindings, column: String = "r.identifier") -> String {
        let end = HandlerMatch.rangeEnd(of: prefix)
        return "(\(column) >= \(bind(prefix, &bindings)) AND \(column) < \(bind(end, &bindings)))"
    }

    /// The hour's minutes as the instances counted them while they recorded each attempt
    /// (schema version 15): a few rows a minute, however many attempts it held. The rows'
    /// minutes are the database's; each is put in this process's minute it mostly covers.
    private func countedMinutes(
        _ connection: PostgresConnection, from first: Int64, offset: Int64
    ) async throws -> [Int64: (ended: Int, failed: Int)] {
        let minute = PostgresScheduleStore.activityMinute
        let start = Self.floorDivision(first &+ offset, minute)
        let rows = try await run(
            connection,
            """
            SELECT minute, sum(ended)::bigint, sum(failed)::bigint FROM overtime.activity
            WHERE minute >= \(start - 1) AND minute <= \(start + Int64(ScheduleOverview.minutesCounted)) GROUP BY 1
            """)
        var counted: [Int64: (ended: Int, failed: Int)] = [:]
        for row in rows {
            let (databaseMinute, ended, failed) = try row.decode((Int64, Int64, Int64).self)
            let index = Self.floorDivision(databaseMinute * minute - offset - first + minute / 2, minute)
            counted[index, default: (0, 0)].ended += Int(ended)
            counted[index, default: (0, 0)].failed += Int(failed)
        }
        return counted
    }

    /// How late the runs that started in the hour from `first` started, as the instances
    /// counted them while they wrote each start (schema version 19): a row per bucket used.
    /// The rows' minutes are the database's: the hour is the 60 of them that mostly cover
    /// this process's (a clock a little ahead of the database's would otherwise leave out
    /// the current minute).
    private func countedLateness(
        _ connection: PostgresConnection, from first: Int64, offset: Int64
    ) async throws -> StartLateness? {
        let minute = PostgresScheduleStore.activityMinute
        let start = Self.floorDivision(first &+ offset &+ minute / 2, minute)
        let rows = try await run(
            connection,
            """
            SELECT bucket, sum(started)::bigint FROM overtime.lateness
            WHERE minute >= \(start) AND minute < \(start + Int64(ScheduleOverview.minutesCounted)) GROUP BY 1
            """)
        var counted: [Int: Int] = [:]
        for row in rows {
            let (bucket, started) = try row.decode((Int32, Int64).self)
            counted[Int(bucket)] = Int(started)
        }
        return LatenessBuckets.summary(counted)
    }

    /// Before schema version 15: the hour's attempts read from the history, by minute.
    private func minutesFromTheHistory(
        _ connection: PostgresConnection, from first: Int64, offset: Int64
    ) async throws -> [Int64: (ended: Int, failed: Int)] {
        var counted: [Int64: (ended: Int, failed: Int)] = [:]
        let minutes = try await run(
            connection,
            """
            SELECT (started_at - \(first &+ offset)) / 60000000000 AS minute, count(*) AS ended,
                count(*) FILTER (WHERE result = ANY(\(ScheduleOverview.failureResults)::text[])) AS failed
            FROM overtime.history
            WHERE started_at >= \(first &+ offset) AND started_at < \(ScheduleOverview.minutesEnd(from: first) &+ offset)
            GROUP BY 1
            """)
        for row in minutes {
            let (minute, ended, failed) = try row.decode((Int64, Int64, Int64).self)
            counted[minute] = (Int(ended), Int(failed))
        }
        return counted
    }

    /// `value` divided by `divisor` (above 0), rounded down.
    private static func floorDivision(_ value: Int64, _ divisor: Int64) -> Int64 {
        let quotient = value / divisor
        return value % divisor < 0 ? quotient - 1 : quotient
    }
}
