// The SQLite store's reads: what is pending, waiting, due or next, and the history.

import CSQLite
import Logging
import Overtime
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

extension SQLiteScheduleStore {
    func request(_ identifier: String) throws(ScheduleStoreError) -> StoredRequest? {
        try using { connection throws(SQLiteError) in
            let statement = try connection.statement(Self.requestQuery)
            statement.bind(1, identifier)
            return try statement.step() ? try Self.request(statement) : nil
        }
    }

    func pendingRequests() throws(ScheduleStoreError) -> [StoredRequest] {
        try using { connection throws(SQLiteError) in
            try connection.rows(
                "SELECT \(Self.requestColumns) FROM requests WHERE finished = 0 ORDER BY sequence", Self.request)
        }
    }

    func pendingRequests(tagged tag: String) throws(ScheduleStoreError) -> [StoredRequest] {
        try using { connection throws(SQLiteError) in
            // The pattern may also turn up in a calendar or an input: read back, the
            // request's own tags say.
            let statement = try connection.statement(
                """
                SELECT \(Self.requestColumns) FROM requests
                WHERE finished = 0 AND instr(details, CAST(? AS BLOB)) > 0 ORDER BY sequence
                """)
            statement.bind(1, RequestColumns.tagPattern(tag))
            var tagged: [StoredRequest] = []
            while try statement.step() {
                let stored = try Self.request(statement)
                if stored.request.tags.contains(tag) { tagged.append(stored) }
            }
            return tagged
        }
    }

    func finishedRequests(after: String?, prefix: String?, tagged tag: String?, limit: Int)
        throws(ScheduleStoreError) -> [StoredRequest]
    {
        try using { connection throws(SQLiteError) in
            // Only those that may have failed for good (their newest attempt failed, or their
            // details may say a prerequisite stopped them), by the index that holds them in
            // the identifiers' order (schema version 22): a page is a range of it, and a tag
            // alone reads these, not every finished request (a month of one-shots by default).
            var conditions = [Self.failedRows]
            var values: [String] = []
            if let after {
                conditions.append("identifier > ?")
                values.append(after)
            }
            if let prefix {
                conditions.append("identifier >= ? AND identifier < ?")
                values += [prefix, SQLiteScheduleInspector.prefixEnd(prefix)]
            }
            if let tag {
                conditions.append("instr(details, CAST(? AS BLOB)) > 0")
                values.append(RequestColumns.tagPattern(tag))
            }
            let statement = try connection.statement(
                """
                SELECT \(Self.requestColumns), cancelled_at FROM requests INDEXED BY requests_failed_by_identifier
                WHERE \(conditions.joined(separator: " AND ")) ORDER BY identifier LIMIT \(max(0, limit))
                """)
            for (index, value) in values.enumerated() { statement.bind(Int32(index + 1), value) }
            var found: [StoredRequest] = []
            while try statement.step() {
                let stored = try Self.request(statement)
                if tag.map(stored.request.tags.contains) ?? true { found.append(stored) }
            }
            return found
        }
    }

    func operatorActions(limit: Int) throws(ScheduleStoreError) -> [OperatorAction] {
        try using { connection throws(SQLiteError) in
            let statement = try connection.statement(
                "SELECT at, by, action, subject, count, outcome FROM operator_actions ORDER BY id DESC LIMIT ?")
            statement.bind(1, max(0, limit))
            var found: [OperatorAction] = []
            while try statement.step() { found.append(Self.operatorAction(statement)) }
            return found
        }
    }

    /// The action a row of `operator_actions` holds, its columns read in the order written.
    static func operatorAction(_ row: SQLiteStatement) -> OperatorAction {
        OperatorAction(
            at: WallClockInstant(nanosecondsSinceEpoch: row.int64(0)), by: row.text(1), action: row.text(2),
            subject: row.text(3), count: row.int(4), outcome: row.text(5))
    }

    func pendingCount() throws(ScheduleStoreError) -> Int {
        try using { connection throws(SQLiteError) in
            Int(try connection.integer("SELECT COUNT(*) FROM requests WHERE finished = 0") ?? 0)
        }
    }

    func waitingCounts(at now: WallClockInstant) throws(ScheduleStoreError) -> (enqueued: Int, blocked: Int) {
        try using { connection throws(SQLiteError) in
            // A link waiting on a prerequisite has no next start (NULL): blocked.
            let statement = try connection.statement(
                """
                SELECT COALESCE(SUM(due_at > ?1), 0), COALESCE(SUM(due_at IS NULL OR due_at <= ?1), 0)
                FROM requests WHERE finished = 0 AND running = 0
                """)
            statement.bind(1, now.nanosecondsSinceEpoch)
            guard try statement.step() else { return (0, 0) }
            return (Int(statement.int64(0)), Int(statement.int64(1)))
        }
    }

    func due(at now: WallClockInstant, unmet: Int64, limit: Int) throws(ScheduleStoreError) -> [StoredRequest] {
        try using { connection throws(SQLiteError) in
            let statement = try connection.statement(Self.dueQuery)
            statement.bind(1, now.nanosecondsSinceEpoch)
            statement.bind(2, unmet)
            statement.bind(3, limit)
            var due: [StoredRequest] = []
            while try statement.step() { due.append(try Self.request(statement)) }
            return due
        }
    }

    func nextDue(after now: WallClockInstant, unmet: Int64) throws(ScheduleStoreError) -> (
        identifier: String, at: WallClockInstant
    )? {
        try using { connection throws(SQLiteError) in
            let statement = try connection.statement(Self.nextDueQuery)
            statement.bind(1, now.nanosecondsSinceEpoch)
            guard try statement.step() else { return nil }
            return (statement.text(0), WallClockInstant(nanosecondsSinceEpoch: statement.int64(1)))
        }
    }

    func dueWaiting(at now: WallClockInstant, on requirements: Int64) throws(ScheduleStoreError) -> Bool {
        try using { connection throws(SQLiteError) in
            let statement = try connection.statement(Self.dueWaitingQuery)
            statement.bind(1, now.nanosecondsSinceEpoch)
            statement.bind(2, requirements)
            return try statement.step() && statement.bool(0)
        }
    }

    func waitsForALength(after threshold: WallClockInstant) throws(ScheduleStoreError) -> [StoredRequest] {
        try using { connection throws(SQLiteError) in
            let statement = try connection.statement(
                """
                SELECT \(Self.requestColumns) FROM requests WHERE running = 0 AND due_at > ?
                    AND (retry_at IS NOT NULL OR (interval_ns IS NULL AND earliest_begin IS NULL))
                ORDER BY due_at, sequence
                """)
            statement.bind(1, threshold.nanosecondsSinceEpoch)
            var waits: [StoredRequest] = []
            while try statement.step() { waits.append(try Self.request(statement)) }
            return waits
        }
    }

    func plannedAheadOfClock(_ now: WallClockInstant) throws(ScheduleStoreError) -> [StoredRequest] {
        try using { connection throws(SQLiteError) in
            let statement = try connection.statement(
                """
                SELECT \(Self.requestColumns) FROM requests WHERE finished = 0 AND ((interval_ns > 0
                    AND anchor - interval_ns - MIN(flex_ns, interval_ns) > ?1)
                    OR substr(details, 1, 1) IN (x'01', x'05'))
                ORDER BY sequence
                """)
            statement.bind(1, now.nanosecondsSinceEpoch)
            var ahead: [StoredRequest] = []
            while try statement.step() { ahead.append(try Self.request(statement)) }
            return ahead
        }
    }

    func dependents(of identifiers: [String]) throws(ScheduleStoreError) -> [StoredRequest] {
        guard !identifiers.isEmpty, database.withLock({ $0.hasLinks }) else { return [] }
        return try using { connection throws(SQLiteError) in
            var found: [StoredRequest] = []
            var seen = Set<String>()
            for identifier in identifiers {
                let statement = try connection.statement(Self.dependentsQuery)
                statement.bind(1, identifier)
                while try statement.step() {
                    let stored = try Self.request(statement)
                    if seen.insert(stored.request.identifier).inserted { found.append(stored) }
                }
            }
            return found
        }
    }

    func nextWakingStart() throws(ScheduleStoreError) -> WallClockInstant? {
        guard database.withLock({ $0.hasWaking }) else { return nil }
        return try using { connection throws(SQLiteError) in
            try connection.integer(
                """
                SELECT MIN(r.due_at) FROM waking w JOIN requests r ON r.identifier = w.identifier
                    WHERE r.running = 0 AND r.due_at IS NOT NULL
                """
            ).map(WallClockInstant.init(nanosecondsSinceEpoch:))
        }
    }

    func waitingOnFinishedPrerequisites() throws(ScheduleStoreError) -> [StoredRequest] {
        guard database.withLock({ $0.hasLinks }) else { return [] }
        return try using { connection throws(SQLiteError) in
            try connection.rows(
                """
                SELECT \(Self.requestColumns) FROM requests WHERE finished = 0 AND identifier IN (
                    SELECT p.identifier FROM prerequisites p LEFT JOIN requests x ON x.identifier = p.prerequisite
                    WHERE x.identifier IS NULL OR x.finished != 0)
                ORDER BY sequence
                """, Self.request)
        }
    }

    func lastRunID() throws(ScheduleStoreError) -> Int64 {
        try using { connection throws(SQLiteError) in
            // Raised in the transaction of every start, so no run ID above it exists.
            try connection.integer("SELECT value FROM counters WHERE name = 'run_id'") ?? 0
        }
    }

    func history(identifier: String, limit: Int) throws(ScheduleStoreError) -> [RunRecord] {
        try using { connection throws(SQLiteError) in
            // The attempt in progress lives in its request's row until it ends.
            let statement = try connection.statement(
                """
                SELECT identifier, run_id, attempt, started_at, ended_at, result, stop_reason, output FROM history
                    WHERE identifier = ?1
                UNION ALL SELECT identifier, active_run_id, active_attempt, active_started_at, NULL, 'running', NULL,
                    NULL FROM requests WHERE identifier = ?1 AND active_run_id IS NOT NULL
                ORDER BY 2 DESC, 3 DESC LIMIT ?2
                """)
            statement.bind(1, identifier)
            statement.bind(2, limit)
            var records: [RunRecord] = []
            while try statement.step() { records.append(try Self.record(statement)) }
            return records
        }
    }

    static let requestQuery = SQLiteQuery(
        "SELECT \(requestColumns), cancelled_at FROM requests WHERE identifier = ?")
    static let dependentsQuery = SQLiteQuery(
        """
        SELECT \(requestColumns) FROM requests WHERE finished = 0
            AND identifier IN (SELECT identifier FROM prerequisites WHERE prerequisite = ?)
        """)
    static let dueQuery = SQLiteQuery(
        """
        SELECT \(requestColumns) FROM requests WHERE running = 0 AND due_at <= ? AND (requirement_mask & ?) = 0
        ORDER BY due_at, sequence LIMIT ?
        """)
    static let nextDueQuery = SQLiteQuery(
        """
        SELECT identifier, due_at FROM requests WHERE running = 0 AND due_at > ?
        ORDER BY due_at, sequence LIMIT 1
        """)
    static let dueWaitingQuery = SQLiteQuery(
        """
        SELECT EXISTS (SELECT 1 FROM requests
            WHERE running = 0 AND due_at <= ? AND (requirement_mask & ?) != 0)
        """)
}
