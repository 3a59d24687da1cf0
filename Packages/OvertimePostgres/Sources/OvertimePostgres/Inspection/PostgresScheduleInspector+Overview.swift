// A fleet's overview, counted by the server: the requests by state, handler and tag with the
// ones that failed for good in one statement (one snapshot, so the counts add up), the last
// hour's attempts by minute in another.

import Overtime
@_spi(ScheduleStore) import OvertimeScheduler
import PostgresNIO

extension PostgresScheduleInspector {
    func overview(now: WallClockInstant) async throws(ScheduleStoreError) -> ScheduleOverview {
        try await using { [self] connection, offset in
            let match = HandlerMatch(try await registeredHandlers(connection, offset: offset))
            var bindings = PostgresBindings()
            func bind(_ value: some PostgresNonThrowingEncodable & Sendable) -> String {
                bindings.append(value)
                return "$\(bindings.count)"
            }
            var cases: [String] = []
            if !match.identifiers.isEmpty {
                cases.append("WHEN r.identifier = ANY(\(bind(match.identifiers))::text[]) THEN 'i' || r.identifier")
            }
            for prefix in match.prefixes {
                // Identifiers compare byte by byte from schema version 13; starts_with does
                // under any collation.
                cases.append(
                    "WHEN starts_with(r.identifier, \(bind(prefix))) THEN \(bind(HandlerMatch.key(.init(name: prefix, isPrefix: true))))::text"
                )
            }
            let handler = cases.isEmpty ? "'-'::text" : "CASE \(cases.joined(separator: " ")) ELSE '-' END"
            let failures = bind(ScheduleOverview.failureResults)
            // A request that failed for good finished without a success: from version 14 the
            // few such are marked and indexed; before, every finished request is looked at.
            let candidates = failureCandidatesMarked.withLockedValue { $0 } ? "AND r.failure_candidate" : ""
            let sql = """
                WITH finished AS (
                    SELECT r.chain, (SELECT h.result FROM overtime.history h
                        WHERE h.identifier = r.identifier AND h.owner = r.owner
                        ORDER BY h.run_id DESC, h.attempt DESC LIMIT 1) AS last_result
                    FROM overtime.requests r
                    WHERE r.finished AND NOT r.running AND r.cancelled_at IS NULL \(candidates))
                SELECT 'h' AS kind, handler, tags, waiting, retrying, running, cancelled, finished,
                    NULL::bytea AS chain
                FROM (SELECT \(handler) AS handler, r.tags AS tags,
                    count(*) FILTER (WHERE r.cancelled_at IS NULL AND NOT r.running AND NOT r.finished) AS waiting,
                    count(*) FILTER (WHERE r.cancelled_at IS NULL AND NOT r.running AND NOT r.finished
                        AND r.failed_attempts > 0) AS retrying,
                    count(*) FILTER (WHERE r.cancelled_at IS NULL AND r.running) AS running,
                    count(*) FILTER (WHERE r.cancelled_at IS NOT NULL) AS cancelled,
                    count(*) FILTER (WHERE r.cancelled_at IS NULL AND NOT r.running AND r.finished) AS finished
                    FROM overtime.requests r GROUP BY 1, 2) counts
                UNION ALL
                SELECT 'f', NULL, NULL, count(*), 0, 0, 0, 0, NULL FROM finished
                WHERE last_result = ANY(\(failures)::text[])
                UNION ALL
                SELECT 'c', NULL, NULL, 0, 0, 0, 0, 0, chain FROM finished
                WHERE chain IS NOT NULL AND (last_result IS NULL OR NOT last_result = ANY(\(failures)::text[]))
                """
            var byHandler: [HandlerMatch.Found: (waiting: Int, running: Int)] = [:]
            // Grouped by handler and by the tags column (`,a,b,`) in the same pass: each
            // group's unfinished requests count for each of its tags.
            var byTag: [String: (waiting: Int, running: Int)] = [:]
            var totals = (waiting: 0, retrying: 0, running: 0, cancelled: 0, finished: 0)
            var failed = 0
            for row in try await run(connection, PostgresQuery(unsafeSQL: sql, binds: bindings)) {
                let cell = NamedCells(row)
                switch try cell("kind", as: String.self) {
                case "h":
                    let found = HandlerMatch.found(key: try cell("handler", as: String.self))
                    let waiting = Int(try cell("waiting", as: Int64.self))
                    let running = Int(try cell("running", as: Int64.self))
                    byHandler[found, default: (0, 0)].waiting += waiting
                    byHandler[found, default: (0, 0)].running += running
                    if waiting + running > 0 {
                        for tag in try cell("tags", as: String.self).split(separator: ",").map(String.init) {
                            byTag[tag, default: (0, 0)].waiting += waiting
                            byTag[tag, default: (0, 0)].running += running
                        }
                    }
                    totals.waiting += waiting
                    totals.running += running
                    totals.retrying += Int(try cell("retrying", as: Int64.self))
                    totals.cancelled += Int(try cell("cancelled", as: Int64.self))
                    totals.finished += Int(try cell("finished", as: Int64.self))
                case "f": failed += Int(try cell("waiting", as: Int64.self))
                default:
                    // Stopped by its chain, told by the state the chain keeps.
                    let chain = try cell("chain", as: ByteBuffer?.self).map { Array($0.readableBytesView) }
                    if chain.flatMap({ ChainState(packed: $0) })?.stoppedBy != nil { failed += 1 }
                }
            }
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
                tags: ScheduleOverview.tagRows(byTag), minutes: ScheduleOverview.minutes(from: first, counted: counted))
        }
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
