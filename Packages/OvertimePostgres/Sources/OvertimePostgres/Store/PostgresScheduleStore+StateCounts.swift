// The requests counted by state as they are written (schema version 18), which an overview
// sums instead of reading every request: checked against the rows each time an instance
// opens the schedule, and counted again when they differ.
//
// The triggers count every statement's writes in the same transaction, so in any one
// snapshot the counts are the rows'. They stop being so only when rows change with the
// triggers off: an operator's session with `session_replication_role = replica` (as
// logical replication and some restore tools set it), a trigger disabled by hand, counts
// edited. An overview sees only counts that cannot be the rows' (below zero, fewer than
// the handlers' shares); an amount off that could be true it would show as kept, so an
// instance compares them with a pass over the requests as it opens the schedule, as a
// SQLite store does. At 1,008,000 requests the check took 170-190 ms of the server's time,
// and a recount 250 ms: well inside an open's operation deadline (5 s by default).

import PostgresNIO

extension PostgresScheduleStore {
    /// Counts every request again, into shard 0, the other shards dropped: schema version
    /// 18's migration, and the repair of counts that differ from the rows. Writes to the
    /// requests wait until the transaction ends (share mode lets reads through), and so do
    /// the foldings of ended shards (``foldEndedShards``): nothing counted meanwhile is lost
    /// or counted twice.
    static let recountStates = [
        "LOCK TABLE overtime.requests IN SHARE MODE",
        "LOCK TABLE overtime.request_counts IN EXCLUSIVE MODE",
        "DELETE FROM overtime.request_counts",
        """
        INSERT INTO overtime.request_counts (shard, state, count)
            SELECT 0, \(countedState), count(*) FROM overtime.requests GROUP BY 2
        """,
    ]

    /// The number of states whose count, summed over the shards, is not the number of rows
    /// in that state: 0 when the counts are the rows'. One statement, so one snapshot: a
    /// write committed meanwhile is in both or in neither.
    static let statesCountedAmiss = """
        SELECT count(*) FROM
            (SELECT state, sum(count) AS count FROM overtime.request_counts GROUP BY state) AS kept
            FULL JOIN (SELECT \(countedState) AS state, count(*) AS count FROM overtime.requests GROUP BY 1) AS rows
            USING (state)
        WHERE coalesce(kept.count, 0) <> coalesce(rows.count, 0)
        """

    /// Counts the requests again when the counts kept are not the rows' (``statesCountedAmiss``);
    /// returns whether it did. In the migration's transaction, after it: one instance at a
    /// time, and none before the counts exist.
    func recountIfAmiss(_ connection: PostgresConnection) async throws -> Bool {
        let amiss = try await run(connection, PostgresQuery(unsafeSQL: Self.statesCountedAmiss))
        guard try amiss.first.map({ try $0.decode(Int64.self) }) ?? 0 > 0 else { return false }
        for statement in Self.recountStates { _ = try await run(connection, PostgresQuery(unsafeSQL: statement)) }
        return true
    }

    /// Adds the counts of connections that ended into shard 0 (a connection's process ID
    /// may be taken again by another later, which then adds to what is there: the sums stay
    /// right either way).
    static let foldEndedShards = """
        WITH ended AS (DELETE FROM overtime.request_counts WHERE shard <> 0
                AND shard NOT IN (SELECT pid FROM pg_stat_activity WHERE pid IS NOT NULL)
            RETURNING state, count)
        INSERT INTO overtime.request_counts AS c (shard, state, count)
            SELECT 0, state, sum(count) FROM ended GROUP BY state
        ON CONFLICT (shard, state) DO UPDATE SET count = c.count + excluded.count
        """
}

/// The bits of a request's state as ``PostgresScheduleStore/schemaVersion18`` counts it.
enum CountedRequestState {
    /// Cancelled (`cancelled_at` set).
    static let cancelled: Int64 = 1
    /// An attempt in progress.
    static let running: Int64 = 2
    /// Finished: nothing more planned.
    static let finished: Int64 = 4
    /// One attempt or more of the current run failed.
    static let retried: Int64 = 8
    /// It has tags.
    static let tagged: Int64 = 16
}
