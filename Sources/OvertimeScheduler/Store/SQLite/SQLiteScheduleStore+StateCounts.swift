// The requests counted by state as the store writes them (schema version 19), so that an
// overview reads 64 rows rather than every request. A write to one request's row reads the
// state the row has (its page is the one the write reads next) and counts it out, and counts
// in the state the write gives it, which follows from the values it writes; a write to many
// rows counts them out before and in by its RETURNING. A transaction adds what its writes
// changed to `request_counts`, one update per state changed. Counted by the store's writes
// rather than by triggers, or a RETURNING on each run's writes: on 100,000 runs, 1,000 a
// transaction, a trigger halved the updates a second SQLite made, and a RETURNING (rows
// kept in a table of their own) cost more than the read. A migration after version 19 that
// writes requests' rows counts them too.

extension SQLiteScheduleStore {
    /// A request row's state as `request_counts` keys it, a bit each: cancelled (1),
    /// running (2), finished (4), retrying (8: an attempt failed and another is due), its
    /// newest attempt failed (16), it has details (32: tags, a chain). Whether a column is
    /// NULL is told by its type: in a RETURNING clause, SQLite 3.40 answered `IS NULL` and
    /// `IS NOT NULL` of a column that was NULL as though it were not.
    static let stateKey = """
        ((typeof(cancelled_at) != 'null') + 2 * (running != 0) + 4 * (finished != 0) + 8 * (failed_attempts > 0)
            + 16 * (last_failed != 0) + 32 * (typeof(details) != 'null'))
        """

    /// Counts every request again, state by state, into a row for each of the 64 states:
    /// schema version 19's migration, and the repair of counts found damaged at an open.
    static let recountStates = """
        DELETE FROM request_counts;
        INSERT INTO request_counts
            WITH RECURSIVE states(state) AS (SELECT 0 UNION ALL SELECT state + 1 FROM states WHERE state < 63)
            SELECT state, 0 FROM states;
        UPDATE request_counts SET count = counted.count
            FROM (SELECT \(stateKey) AS state, COUNT(*) AS count FROM requests GROUP BY 1) AS counted
            WHERE request_counts.state = counted.state;
        """

    /// Of `request_counts`, that it holds a row for each state and none other, and no count
    /// below zero: what both checks of the counts ask first.
    private static let everyStateCounted = "COUNT(*) = 64 AND MIN(state) = 0 AND MAX(state) = 63 AND MIN(count) >= 0"

    /// 1 when `request_counts` holds a row for each state and none other, no count below
    /// zero, and as many requests in all as there are rows: what the store's writes keep.
    /// Another program's writes to the file (an operator's `DELETE FROM requests`, an edited
    /// count, a table emptied) break it; a count of the rows reads every request's key.
    static let countsHoldEveryRequest = """
        SELECT \(everyStateCounted) AND TOTAL(count) = (SELECT COUNT(*) FROM requests) FROM request_counts
        """

    /// 1 when the counts could be those of the rows, told without reading every request: a
    /// row for each state, no count below zero, no more requests in all than the range of
    /// their row numbers holds, and some when there are any. A reader (the overview) that
    /// cannot write the counts again counts in a pass over the requests when they are not,
    /// so that a damaged file shows true figures and no sum of them overflows. The smallest
    /// and largest row numbers are each a subquery of its own: SQLite looks either up in the
    /// table's tree only alone (both in one read every request's key: 10 ms at 100,000).
    static let countsArePlausible = """
        SELECT \(everyStateCounted)
            AND TOTAL(count) <= IFNULL((SELECT MAX(rowid) FROM requests) - (SELECT MIN(rowid) FROM requests) + 1, 0)
            AND (TOTAL(count) > 0 OR NOT EXISTS (SELECT 1 FROM requests))
        FROM request_counts
        """

    /// Counts every request again when the counts are not those of the rows
    /// (``countsHoldEveryRequest``); returns whether it did. In the opening's transaction.
    static func recountIfDamaged(_ connection: SQLiteConnection) throws(SQLiteError) -> Bool {
        guard try connection.integer(countsHoldEveryRequest) != 1 else { return false }
        try connection.execute(recountStates)
        return true
    }

    static let stateQuery = SQLiteQuery("SELECT \(stateKey) FROM requests WHERE identifier = ?")
    static let stateByRowQuery = SQLiteQuery("SELECT \(stateKey) FROM requests WHERE rowid = ?1 AND identifier = ?2")
    static let addCountQuery = SQLiteQuery("UPDATE request_counts SET count = count + ?1 WHERE state = ?2")
}

/// The bits of a state ``SQLiteScheduleStore/stateKey`` computes.
enum CountedState {
    static let cancelled: Int64 = 1
    static let running: Int64 = 2
    static let finished: Int64 = 4
    static let retrying: Int64 = 8
    static let lastFailed: Int64 = 16
    static let detailed: Int64 = 32

    /// The state of a row written with these values.
    static func of(
        cancelled: Bool, running: Bool, finished: Bool, failedAttempts: Int, lastFailed: Bool, detailed: Bool
    ) -> Int64 {
        (cancelled ? Self.cancelled : 0) | (running ? Self.running : 0) | (finished ? Self.finished : 0)
            | (failedAttempts > 0 ? retrying : 0) | (lastFailed ? Self.lastFailed : 0) | (detailed ? Self.detailed : 0)
    }
}

/// What the writes of one transaction change in the requests' counts by state.
struct StateTally {
    private var changes: [Int64: Int] = [:]

    /// The state of the row of `identifier` (found by `rowID` when given) as it stands,
    /// before a write to it; `nil` when there is no such row.
    static func state(of identifier: String, rowID: Int64? = nil, _ connection: SQLiteConnection)
        throws(SQLiteError) -> Int64?
    {
        let statement = try connection.statement(
            rowID == nil ? SQLiteScheduleStore.stateQuery : SQLiteScheduleStore.stateByRowQuery)
        defer { statement.reset() }
        if let rowID {
            statement.bind(1, rowID)
            statement.bind(2, identifier)
        } else {
            statement.bind(1, identifier)
        }
        return try statement.step() ? statement.int64(0) : nil
    }

    /// A row left `old` for `new` (`nil`: it was not there, or is no longer).
    mutating func moved(from old: Int64?, to new: Int64?) {
        guard old != new else { return }
        if let old { changes[old, default: 0] -= 1 }
        if let new { changes[new, default: 0] += 1 }
    }

    /// Counts out the rows `condition` selects, before a write to each of them.
    mutating func countOut(where condition: String, _ connection: SQLiteConnection) throws(SQLiteError) {
        let statement = try connection.statement(
            "SELECT \(SQLiteScheduleStore.stateKey), COUNT(*) FROM requests WHERE \(condition) GROUP BY 1")
        defer { statement.reset() }
        while try statement.step() { changes[statement.int64(0), default: 0] -= statement.int(1) }
    }

    /// Runs `statement`, bound, a write to many rows that returns the state of each
    /// (`RETURNING` ``SQLiteScheduleStore/stateKey``), and counts each in; with `removing`,
    /// a delete's rows, counted out.
    mutating func countIn(_ statement: SQLiteStatement, removing: Bool = false) throws(SQLiteError) {
        while try statement.step() { changes[statement.int64(0), default: 0] += removing ? -1 : 1 }
    }

    /// Adds the changes counted to the counts: in the transaction of the writes.
    func write(_ connection: SQLiteConnection) throws(SQLiteError) {
        for (state, change) in changes where change != 0 {
            let statement = try connection.statement(SQLiteScheduleStore.addCountQuery)
            statement.bind(1, change)
            statement.bind(2, state)
            try statement.run()
        }
    }
}
