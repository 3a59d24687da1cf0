// A record of runs whose answer did not come: the server may have written it all the same,
// so what it wrote is read back rather than guessed.

import Logging
import NIOCore
import Overtime
@_spi(ScheduleStore) import OvertimeScheduler
import PostgresNIO

extension PostgresScheduleStore {
    /// What the statement of ``recordRuns(_:_:_:notifying:_:)`` wrote, when its answer did
    /// not come (the operation's deadline closed the connection, or the connection broke,
    /// after it was sent): `nil` when it wrote nothing, or when that cannot be told now.
    ///
    /// A server does not notice a client gone until it answers: it finishes the statement
    /// and commits it. Taken as not written, a start written that way is never run here and
    /// never renewed; its claim lapses and another instance records the attempt as
    /// interrupted (twice: the request fails for good) although no handler ran. The
    /// statement is all or nothing, so one read tells: the rows it touched are locked first,
    /// which waits for the statement if the server still runs it; then its starts are the
    /// rows running here with their run and attempt, its ends the attempts in the history
    /// with their result (or superseded). An end recorded as interrupted is not told apart
    /// from another instance's takeover, so it counts as not written: recorded again later.
    func readBackUnansweredRecord(_ ends: [RunEnd], _ starts: [PlanWrite]) async -> RecordedRuns? {
        let startRecords = starts.compactMap { write in
            write.start.map { (record: $0, owner: owner(of: write.stored.request.scope)) }
        }
        let endOwners = ends.map { owner(of: $0.scope) }
        let touched = startRecords.map(\.record.identifier) + ends.map(\.record.identifier)
        let touchedOwners = startRecords.map(\.owner) + endOwners
        let rows = try? await transaction { [self] connection in
            _ = try await run(
                connection,
                """
                SELECT 1 FROM overtime.requests AS r, unnest(\(touched)::text[], \(touchedOwners)::text[])
                    AS v(identifier, owner)
                WHERE r.identifier = v.identifier AND r.owner = v.owner FOR SHARE OF r
                """)
            return try await run(
                connection,
                """
                SELECT r.identifier, false FROM overtime.requests AS r,
                    unnest(\(startRecords.map(\.record.identifier))::text[], \(startRecords.map(\.owner))::text[],
                        \(startRecords.map(\.record.runID))::bigint[],
                        \(startRecords.map { Int64($0.record.attempt) })::bigint[]) AS v(identifier, owner, run, attempt)
                WHERE r.identifier = v.identifier AND r.owner = v.owner AND r.running AND r.claimed_by = \(instance)
                    AND r.active_run_id = v.run AND r.active_attempt = v.attempt
                UNION ALL
                SELECT h.identifier, h.result = 'superseded' FROM overtime.history AS h,
                    unnest(\(ends.map(\.record.identifier))::text[], \(endOwners)::text[],
                        \(ends.map(\.record.runID))::bigint[], \(ends.map { Int64($0.record.attempt) })::bigint[],
                        \(ends.map(\.record.result.description))::text[]) AS v(identifier, owner, run, attempt, result)
                WHERE h.identifier = v.identifier AND h.owner = v.owner AND h.run_id = v.run AND h.attempt = v.attempt
                    AND (h.result = 'superseded' OR (h.result = v.result AND h.result <> 'interrupted'))
                """
            ).map { try $0.decode((String, Bool).self) }
        }
        guard let rows, !rows.isEmpty else { return nil }
        var recorded = RecordedRuns()
        for (identifier, late) in rows {
            if late {
                recorded.superseded.insert(identifier)
            } else {
                recorded.started.insert(identifier)
            }
        }
        // Which of its ends had dependents the statement's answer would have said: asked for
        // each, a question that finds none costs one read.
        concludedWithDependents.withLockedValue { $0.formUnion(ends.map(\.record.identifier)) }
        logger.warning(
            "a record of runs got no answer but was written: going on with it",
            metadata: [
                "started": "\(recorded.started.sorted().joined(separator: ","))",
                "ended": "\(ends.map(\.record.identifier).joined(separator: ","))",
            ])
        return recorded
    }
}
