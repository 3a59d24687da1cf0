// A SQLite schedule read beside the daemon that owns it: a read-only connection, no lock
// taken, nothing written (WAL lets it read while the owner commits).

import Overtime
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

final class SQLiteScheduleInspector: ScheduleInspector {
    let path: String
    /// The most connections it reads through: a slow read (a filter no index answers)
    /// holds one, and the others answer meanwhile. Each is opened when every one open is
    /// busy, on a thread of its own that sleeps while it has nothing to read.
    static let mostReaders = InspectorReaders.most

    /// One read-only connection and the thread its reads run on, one at a time.
    private final class Reader: Sendable {
        let queue: SerialWorkQueue
        /// The connection, the queue's; `nil` once closed.
        let database: QueueConfined<SQLiteConnection?>

        init(_ connection: SQLiteConnection, on queue: SerialWorkQueue) {
            self.queue = queue
            database = QueueConfined(connection, on: queue)
        }

        /// A connection opened for reading on a queue of its own (the first one checked the file).
        static func open(path: String, number: Int) async throws(ScheduleStoreError) -> Reader {
            let queue = SerialWorkQueue(name: "sched-inspect\(number)")
            return try await queue.perform { () throws(ScheduleStoreError) in
                do {
                    let connection = try SQLiteConnection(path: path, readOnly: true)
                    try connection.execute("PRAGMA query_only = 1")
                    return Reader(connection, on: queue)
                } catch {
                    throw ScheduleStoreError("\(path) cannot be read as a schedule store: \(error)")
                }
            }
        }
    }

    private struct Readers {
        var open: [Reader]
        /// The reads queued or running on each of ``open``.
        var busy: [Int]
        /// Connections being opened, counted against ``mostReaders``.
        var opening = 0
        /// Closed: no connection is opened any more.
        var closed = false
    }

    /// The first reader, which the change mark is always read on: SQLite's data_version is
    /// a connection's own count.
    private let first: Reader
    private let readers: Locked<Readers>
    /// The request columns of the progress runs reported (schema version 14), or NULLs in
    /// their place for a store its owner has not upgraded yet.
    private let progressColumns: String
    /// The request column of when its newest attempt started (schema version 18), or NULL
    /// in its place.
    private let lastStartedColumn: String
    /// Whether the store has the index of the attempts' start times (schema version 15).
    let startsIndexed: Bool
    /// Whether the store has the index of the attempts that did not succeed (schema version 12).
    let resultsIndexed: Bool
    /// Whether the store counts the ended attempts by minute (schema version 16).
    let activityCounted: Bool
    /// Whether the store counts its requests by state as it writes them, and indexes the
    /// waiting and running ones by identifier (schema version 19).
    let statesCounted: Bool
    /// Whether the store indexes the requests that may have failed for good (schema
    /// version 20).
    let failedIndexed: Bool
    /// Whether the store counts how late runs started as they start (schema version 21).
    let latenessCounted: Bool
    /// Whether the store indexes the waiting requests an attempt of which failed (schema
    /// version 23).
    let retryingIndexed: Bool
    /// Whether the store indexes the waiting and running requests that have started, by
    /// their newest attempt's start (schema version 24).
    let lastRunIndexed: Bool

    /// Opens `path` for reading, on a queue of its own. It must exist and be an Overtime
    /// schedule store this build reads; nothing is created, migrated or repaired (the owner
    /// does that).
    static func open(
        path: String, rowsReadPerPage: Int = 20_000, rangeSortedAtMost: Int = 2_000
    ) async throws(ScheduleStoreError) -> SQLiteScheduleInspector {
        let queue = SerialWorkQueue(name: "sched-inspect")
        return try await queue.perform { () throws(ScheduleStoreError) in
            try SQLiteScheduleInspector(
                path: path, rowsReadPerPage: rowsReadPerPage, rangeSortedAtMost: rangeSortedAtMost, queue: queue)
        }
    }

    /// Opens `path` on `queue`'s thread.
    private init(
        path: String, rowsReadPerPage: Int, rangeSortedAtMost: Int, queue: SerialWorkQueue
    ) throws(ScheduleStoreError) {
        self.path = path
        self.rowsReadPerPage = rowsReadPerPage
        self.rangeSortedAtMost = rangeSortedAtMost
        guard access(path, F_OK) == 0 else {
            throw ScheduleStoreError("no schedule store at \(path): \(errnoDescription())")
        }
        try SQLiteScheduleStore.refuseLinks(path)
        let connection: SQLiteConnection
        do {
            connection = try SQLiteConnection(path: path, readOnly: true)
            try SQLiteScheduleStore.refuseForeign(connection, path)
            let version = Int(try connection.integer("PRAGMA user_version") ?? 0)
            try SQLiteScheduleStore.refuseNewer(version, path)
            guard version >= 9 else {
                throw ScheduleStoreError(
                    "\(path) has schema version \(version): start the daemon that owns it once with this build to upgrade it"
                )
            }
            progressColumns =
                version >= 14
                ? "progress_run_id, progress_fraction, progress_message"
                : "NULL AS progress_run_id, NULL AS progress_fraction, NULL AS progress_message"
            lastStartedColumn = version >= 18 ? "last_started_at" : "NULL AS last_started_at"
            startsIndexed = version >= 15
            resultsIndexed = version >= 12
            activityCounted = version >= 16
            statesCounted = version >= 19
            failedIndexed = version >= 20
            latenessCounted = version >= 21
            retryingIndexed = version >= 23
            lastRunIndexed = version >= 24
            // Reads wait for the owner's commits rather than fail (a checkpoint may hold them).
            try connection.execute("PRAGMA query_only = 1")
        } catch let error as ScheduleStoreError {
            throw error
        } catch {
            throw ScheduleStoreError("\(path) cannot be read as a schedule store: \(error)")
        }
        first = Reader(connection, on: queue)
        readers = Locked(Readers(open: [first], busy: [0]))
    }

    /// The most rows one page reads for a selection the indexes do not answer (failed
    /// requests, a tag, a search; a search of the history, in attempts): a page stays quick
    /// at a million finished requests.
    let rowsReadPerPage: Int
    /// The most attempts a range of start times may hold to be read through the index of
    /// start times and sorted; a range that holds more is read newest first by run, where
    /// a page's worth of its attempts is met soon unless the range lies far back.
    let rangeSortedAtMost: Int

    func count(_ query: RequestQuery, upTo limit: Int) async throws(ScheduleStoreError) -> Int? {
        // What failed for good with a prefix or a tag: each row of the index of those that may
        // have read and told, as a page does (the overview counts them all as it writes).
        if query.selection == .failed, query.search == nil, query.identifierPrefix != nil || query.tag != nil {
            return try await RequestPage.counted(query, upTo: limit) { page throws(ScheduleStoreError) in
                try await requests(page, now: SystemClock().wallClockNow)
            }
        }
        // Otherwise only what the columns tell: a failed request is told by its newest
        // attempt, a tag or a search by the row read back.
        guard query.selection != .failed, query.tag == nil, query.search == nil else { return nil }
        let (conditions, values) = Self.conditions(query, failedIndexed: failedIndexed)
        return try await count(in: "requests", conditions, values, upTo: limit)
    }

    /// How many rows of `table` meet `conditions` (binding `values`), counted up to `limit`:
    /// at most `limit` entries of the index the conditions choose are read.
    private func count(in table: String, _ conditions: [String], _ values: [Value], upTo limit: Int)
        async throws(ScheduleStoreError) -> Int
    {
        try await using { connection throws(SQLiteError) in
            let statement = try connection.statement(
                """
                SELECT COUNT(*) FROM (SELECT 1 FROM \(table)
                    \(conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")) LIMIT \(max(0, limit)))
                """)
            defer { statement.reset() }
            Self.bind(statement, values)
            return try statement.step() ? statement.int(0) : 0
        }
    }

    /// The conditions of `query`'s filters on the requests table and the values they bind;
    /// a tag's and a search's select a superset, checked as read, and so do those of the
    /// failed ones, in the index of those that may have failed with `failedIndexed`.
    private static func conditions(_ query: RequestQuery, failedIndexed: Bool) -> ([String], [Value]) {
        var conditions: [String] = []
        var values: [Value] = []
        // Read in the store's order (no index of states: keeping one cost the scheduler a
        // tenth of its runs per second): a store that keeps many finished one-shots (30
        // days by default) reads past them to its pending ones.
        switch query.selection.kind {
        case .pending: conditions.append("finished = 0")
        case .running: conditions.append("running = 1")
        case .failed:
            conditions.append(failedIndexed ? SQLiteScheduleStore.failedRows : "finished = 1 AND cancelled_at IS NULL")
        case .cancelled: conditions.append("cancelled_at IS NOT NULL")
        case .all: break
        }
        if let prefix = query.identifierPrefix {
            conditions.append("identifier >= ? AND identifier < ?")
            values += [.text(prefix), .text(Self.prefixEnd(prefix))]
        }
        if let tag = query.tag {
            conditions.append("instr(details, CAST(? AS BLOB)) > 0")
            values.append(.text(RequestColumns.tagPattern(tag)))
        }
        if let search = query.search {
            // The tags are in `details`, with the input: a superset, checked as read.
            let text = "?\(values.count + 1)"
            conditions.append("(instr(identifier, \(text)) > 0 OR instr(details, CAST(\(text) AS BLOB)) > 0)")
            values.append(.text(search))
        }
        return (conditions, values)
    }

    func requests(_ query: RequestQuery, now: WallClockInstant) async throws(ScheduleStoreError) -> RequestPage {
        try await using {
            [
                rowsReadPerPage, progressColumns, lastStartedColumn, failedIndexed, statesCounted, retryingIndexed,
                lastRunIndexed,
            ]
            connection
                throws(SQLiteError) in
            let (conditions, values) = Self.conditions(query, failedIndexed: failedIndexed)
            // Told to read the index of those that may have failed: SQLite's estimate, without
            // statistics, may prefer the table in the order asked for.
            let index = query.selection == .failed && failedIndexed ? "INDEXED BY requests_failed" : ""
            let key = Self.sortKey(query.order, lastStarted: lastStartedColumn)
            let direction = query.newestFirst ? "DESC" : "ASC"
            let order = query.order == .submitted ? "rowid \(direction)" : "\(key) \(direction), rowid \(direction)"
            let comparison = query.newestFirst ? "<" : ">"
            var reading = RequestPage.Reading(query, rowsReadPerPage: rowsReadPerPage)
            /// The conditions of rows after `after` (and `afterKey`) in the page's order.
            func past(_ after: Int64?, _ afterKey: Int64?, _ comparison: String) -> (String, [Value])? {
                guard let after else { return nil }
                guard query.order != .submitted, let afterKey else {
                    return ("rowid \(comparison) ?", [.integer(after)])
                }
                return ("(\(key), rowid) \(comparison) (?, ?)", [.integer(afterKey), .integer(after)])
            }
            var stretchBound: (String, [Value])?
            if let stretch = reading.stretch {
                // The stretch's last row, by the filters but the tag and the search: the
                // rows read check those in the query, and none past it is read.
                var others = query
                others.tag = nil
                others.search = nil
                var (bounds, boundValues) = Self.conditions(others, failedIndexed: failedIndexed)
                if let after = past(reading.after, reading.afterKey, comparison) {
                    bounds.append(after.0)
                    boundValues += after.1
                }
                let statement = try connection.statement(
                    """
                    SELECT rowid, \(key) FROM requests \(index)
                    \(bounds.isEmpty ? "" : "WHERE " + bounds.joined(separator: " AND "))
                    ORDER BY \(order) LIMIT 1 OFFSET \(stretch - 1)
                    """)
                defer { statement.reset() }
                Self.bind(statement, boundValues)
                if try statement.step() {
                    reading.stretchEnds(at: statement.int64(0), sortKey: statement.int64(1))
                    stretchBound = past(statement.int64(0), statement.int64(1), query.newestFirst ? ">=" : "<=")
                }
            }
            let handlers = try Self.handlers(connection)
            // The waiting and running by next run or by attempts, with no other filter: read in
            // the indexes that keep those orders, not sorted whole.
            let unfiltered =
                query.selection == .pending && statesCounted && query.identifierPrefix == nil && query.tag == nil
                && query.search == nil
            let soonest = unfiltered && query.order == .nextRun
            let mostAttempts = unfiltered && retryingIndexed && query.order == .attempts
            let latestRun = unfiltered && lastRunIndexed && query.order == .lastRun
            while true {
                var page = conditions
                var pageValues = values
                for bound in [past(reading.after, reading.afterKey, comparison), stretchBound] {
                    guard let bound else { continue }
                    page.append(bound.0)
                    pageValues += bound.1
                }
                // The page's rows are picked first, by the filters alone; only they are read whole,
                // with their newest attempt. Picked in the same query, every row an index finds
                // would be looked up in the history before the sort: for a prefix, 11,000 lookups
                // for 50 rows at 100,000 requests.
                let after = reading.after.flatMap { after in reading.afterKey.map { (key: $0, position: after) } }
                let picked =
                    if soonest {
                        try Self.soonestPending(
                            connection, after: after, backwards: query.newestFirst, limit: reading.batch
                        ).map(String.init).joined(separator: ", ")
                    } else if mostAttempts {
                        try Self.mostAttemptsPending(
                            connection, after: after, backwards: query.newestFirst, limit: reading.batch
                        ).map(String.init).joined(separator: ", ")
                    } else if latestRun {
                        try Self.latestRunPending(
                            connection, after: after, backwards: query.newestFirst, limit: reading.batch
                        ).map(String.init).joined(separator: ", ")
                    } else {
                        """
                        SELECT rowid FROM requests \(index) \(page.isEmpty ? "" : "WHERE " + page.joined(separator: " AND "))
                        ORDER BY \(order) LIMIT \(reading.batch)
                        """
                    }
                let statement = try connection.statement(
                    """
                    SELECT \(SQLiteScheduleStore.requestColumns), cancelled_at, active_run_id, active_attempt,
                        active_started_at, \(progressColumns), (SELECT result FROM history h
                        WHERE h.identifier = requests.identifier ORDER BY run_id DESC, attempt DESC LIMIT 1)
                        AS last_result, \(lastStartedColumn), \(key) AS sort_key
                    FROM requests WHERE rowid IN (\(picked))
                    ORDER BY \(order)
                    """)
                defer { statement.reset() }
                if !soonest && !mostAttempts && !latestRun { Self.bind(statement, pageValues) }
                let sortKey = try statement.column("sort_key")
                var rows = 0
                while try statement.step() {
                    rows += 1
                    let inspected = try Self.inspected(statement, now: now, handlers: handlers)
                    if !reading.visit(inspected, sortKey: statement.int64(sortKey)) { break }
                }
                if let found = reading.batchEnded(rows: rows) { return found }
            }
        }
    }

    func request(_ identifier: String, now: WallClockInstant) async throws(ScheduleStoreError) -> InspectedRequest? {
        try await using { [progressColumns, lastStartedColumn] connection throws(SQLiteError) in
            let statement = try connection.statement(
                """
                SELECT \(SQLiteScheduleStore.requestColumns), cancelled_at, active_run_id, active_attempt,
                    active_started_at, \(progressColumns), (SELECT result FROM history h WHERE h.identifier = ?1
                    ORDER BY run_id DESC, attempt DESC LIMIT 1) AS last_result, \(lastStartedColumn)
                FROM requests WHERE identifier = ?1
                """)
            statement.bind(1, identifier)
            defer { while (try? statement.step()) == true {} }
            guard try statement.step() else { return nil }
            return try Self.inspected(statement, now: now, handlers: try Self.handlers(connection))
        }
    }

    func history(_ query: HistoryQuery) async throws(ScheduleStoreError) -> [RunRecord] {
        try await historyPage(query, stretch: nil).records
    }

    func historyPage(_ query: HistoryQuery) async throws(ScheduleStoreError) -> HistoryPage {
        // A search of one request's history reads only its attempts; any other reads at most
        // a page's worth of rows back from where the page starts.
        try await historyPage(query, stretch: query.search != nil && query.identifier == nil ? rowsReadPerPage : nil)
    }

    /// The page of `query`, reading at most `stretch` attempts back from where it starts
    /// when given.
    private func historyPage(_ query: HistoryQuery, stretch: Int?) async throws(ScheduleStoreError) -> HistoryPage {
        try await using { [startsIndexed, rangeSortedAtMost] connection throws(SQLiteError) in
            var conditions: [String] = []
            var values: [Value] = []
            if let before = query.before {
                conditions.append("(run_id, attempt) < (?, ?)")
                values += [.integer(before.runID), .integer(Int64(before.attempt))]
            }
            if let after = query.after {
                conditions.append("(run_id, attempt) > (?, ?)")
                values += [.integer(after.runID), .integer(Int64(after.attempt))]
            }
            // Read up (from `after` or the oldest), the page is read oldest first and turned round.
            let direction = query.readsUp ? "ASC" : "DESC"
            // The stretch's far end: the page beyond starts past it, unless this one fills.
            var stretchEnd: HistoryPosition?
            if let stretch {
                let last = try connection.statement(
                    """
                    SELECT run_id, attempt FROM history INDEXED BY history_by_run
                    \(conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND "))
                    ORDER BY run_id \(direction), attempt \(direction) LIMIT 1 OFFSET \(stretch - 1)
                    """)
                defer { last.reset() }
                Self.bind(last, values)
                if try last.step() {
                    let end = HistoryPosition(runID: last.int64(0), attempt: Int(last.int64(1)))
                    stretchEnd = end
                    conditions.append("(run_id, attempt) \(query.readsUp ? "<=" : ">=") (?, ?)")
                    values += [.integer(end.runID), .integer(Int64(end.attempt))]
                }
            }
            if let search = query.search {
                let text = "?\(values.count + 1)"
                conditions.append(
                    "(instr(identifier, \(text)) > 0 OR instr(stop_reason, \(text)) > 0"
                        + " OR instr(output, CAST(\(text) AS BLOB)) > 0)")
                values.append(.text(search))
            }
            let (filtering, filterValues) = Self.historyFilters(query)
            conditions += filtering
            values += filterValues
            let filters = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
            // Which index finds a range of start times' attempts, when nothing narrower (one
            // identifier, a result other than success) does: SQLite, without statistics,
            // guesses a range holds few and sorts what it holds, which for a range of every
            // attempt is the whole history. Counted first, at most one more than the bound.
            var index = stretch != nil ? "INDEXED BY history_by_run" : ""
            if stretch == nil, startsIndexed, query.startedFrom != nil || query.startedBefore != nil,
                query.identifier == nil,
                query.result == nil || query.result == .succeeded
            {
                let counting = try connection.statement(
                    """
                    SELECT COUNT(*) FROM (SELECT 1 FROM history INDEXED BY history_started \(filters)
                        LIMIT \(rangeSortedAtMost + 1))
                    """)
                defer { counting.reset() }
                Self.bind(counting, values)
                let held = try counting.step() ? counting.int64(0) : 0
                if held <= rangeSortedAtMost {
                    index = "INDEXED BY history_started"
                } else if query.identifierPrefix == nil {
                    index = "INDEXED BY history_by_run"
                }
            }
            let statement = try connection.statement(
                """
                SELECT identifier, run_id, attempt, started_at, ended_at, result, stop_reason, output FROM history
                \(index) \(filters) ORDER BY run_id \(direction), attempt \(direction) LIMIT \(query.limit)
                """)
            Self.bind(statement, values)
            var records: [RunRecord] = []
            while try statement.step() { records.append(try SQLiteScheduleStore.record(statement)) }
            if query.readsUp { records.reverse() }
            return HistoryPage(records: records, of: query, stretchEnd: stretchEnd)
        }
    }

    func count(_ query: HistoryQuery, upTo limit: Int) async throws(ScheduleStoreError) -> Int? {
        // A search is told by the attempt read back: counting it would read the history.
        guard query.search == nil else { return nil }
        let (conditions, values) = Self.historyFilters(query)
        // Each filter has its index (one request's attempts and a prefix's the primary key,
        // a result other than success its partial index, a range of start times
        // history_started).
        return try await count(in: "history", conditions, values, upTo: limit)
    }

    /// The conditions of `query`'s filters on the history (its positions and search aside)
    /// and the values they bind.
    private static func historyFilters(_ query: HistoryQuery) -> ([String], [Value]) {
        var conditions: [String] = []
        var values: [Value] = []
        if let identifier = query.identifier {
            conditions.append("identifier = ?")
            values.append(.text(identifier))
        }
        if let prefix = query.identifierPrefix {
            conditions.append("identifier >= ? AND identifier < ?")
            values += [.text(prefix), .text(Self.prefixEnd(prefix))]
        }
        if let result = query.result {
            conditions.append("result = ?")
            values.append(.text(result.description))
            // The partial index of the results other than success (schema version 12):
            // SQLite takes it only when the query says its condition too.
            if result != .succeeded { conditions.append("result <> 'succeeded'") }
        }
        if let from = query.startedFrom {
            conditions.append("started_at >= ?")
            values.append(.integer(from.nanosecondsSinceEpoch))
        }
        if let before = query.startedBefore {
            conditions.append("started_at < ?")
            values.append(.integer(before.nanosecondsSinceEpoch))
        }
        return (conditions, values)
    }

    func newestAttempts(of identifiers: [String]) async throws(ScheduleStoreError) -> [String: RunRecord] {
        let wanted = Set(identifiers.prefix(Self.newestAttemptsLimit))
        guard !wanted.isEmpty else { return [:] }
        return try await using { connection throws(SQLiteError) in
            // One statement stepped for each, in one read transaction (one snapshot): in the
            // process, a lookup costs a descent of the primary key, not a round trip.
            try connection.execute("BEGIN")
            defer { try? connection.execute("COMMIT") }
            var newest: [String: RunRecord] = [:]
            for identifier in wanted {
                let statement = try connection.statement(
                    """
                    SELECT identifier, run_id, attempt, started_at, ended_at, result, stop_reason, output FROM history
                    WHERE identifier = ? ORDER BY run_id DESC, attempt DESC LIMIT 1
                    """)
                statement.bind(1, identifier)
                if try statement.step() { newest[identifier] = try SQLiteScheduleStore.record(statement) }
                statement.reset()
            }
            return newest
        }
    }

    func operatorActions(limit: Int) async throws(ScheduleStoreError) -> [OperatorAction] {
        try await using { connection throws(SQLiteError) in
            // A store its owner has not upgraded yet (schema version 17) has none.
            guard
                try connection.integer(
                    "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'operator_actions'") == 1
            else { return [] }
            let statement = try connection.statement(
                "SELECT at, by, action, subject, count, outcome FROM operator_actions ORDER BY id DESC LIMIT ?")
            defer { statement.reset() }
            statement.bind(1, max(0, limit))
            var found: [OperatorAction] = []
            while try statement.step() { found.append(SQLiteScheduleStore.operatorAction(statement)) }
            return found
        }
    }

    func changeMark() async throws(ScheduleStoreError) -> Int64 {
        // data_version changes on this connection whenever another commits.
        try await perform(on: first) { connection throws(SQLiteError) in
            try connection.integer("PRAGMA data_version") ?? 0
        }
    }

    /// Closes the connections after the reads queued before (no caller waits for it); a
    /// read asked for later finds them closed.
    func close() {
        for reader in readers.withLock({ readers in
            readers.closed = true
            return readers.open
        }) {
            reader.queue.async { [database = reader.database] in
                database.value?.close()
                database.value = nil
            }
        }
    }

    // MARK: Rows

    enum Value {
        case text(String)
        case integer(Int64)
    }

    static func bind(_ statement: SQLiteStatement, _ values: [Value]) {
        for (index, value) in values.enumerated() {
            switch value {
            case .text(let text): statement.bind(Int32(index + 1), text)
            case .integer(let number): statement.bind(Int32(index + 1), number)
            }
        }
    }

    /// The SQL of the number a page in `order` is sorted by (``RequestQuery/Order-swift.struct``),
    /// from the row's columns (`lastStarted`: the column, or NULL in a store that has none).
    static func sortKey(_ order: RequestQuery.Order, lastStarted: String) -> String {
        switch order.kind {
        case .submitted: "0"
        case .nextRun: "IFNULL(due_at, \(Int64.max))"
        case .attempts:
            "-(CASE WHEN running = 1 THEN IFNULL(active_attempt, failed_attempts + 1) WHEN finished = 1 THEN 0"
                + " ELSE failed_attempts + 1 END)"
        case .lastRun: lastStarted.hasPrefix("NULL") ? "\(Int64.max)" : "IFNULL(-last_started_at, \(Int64.max))"
        }
    }

    /// The row numbers of the first `limit` waiting and running requests by next run after
    /// `after` (a due time and a position), or before it `backwards`, without sorting every
    /// one: those with a due time in the scheduler's index of them (by due time, then
    /// sequence), the running ones in the index of the unfinished ones, and those with none
    /// (waiting for a prerequisite: the largest key) only when the page reaches them, as
    /// they are no index's.
    private static func soonestPending(
        _ connection: SQLiteConnection, after position: (key: Int64, position: Int64)?, backwards: Bool, limit: Int
    ) throws(SQLiteError) -> [Int64] {
        let none = Int64.max
        // A row's number and its sequence grow together (both are given as a request is first
        // submitted, and a vacuum renumbers rows in their order), so the rows after a position
        // are those after the sequence of the last row at it or before it (before a position:
        // before the first at it or after it), whether or not that row is still there.
        var after: (key: Int64, tie: Int64)?
        if let position {
            let nearest = try connection.statement(
                backwards
                    ? "SELECT sequence FROM requests WHERE rowid >= ? ORDER BY rowid LIMIT 1"
                    : "SELECT sequence FROM requests WHERE rowid <= ? ORDER BY rowid DESC LIMIT 1")
            defer { nearest.reset() }
            nearest.bind(1, position.position)
            after = (position.key, try nearest.step() ? nearest.int64(0) : backwards ? Int64.max : Int64.min)
        }
        func read(_ key: String, _ rows: String) throws(SQLiteError) -> [SortedRow] {
            let past = after.map { _ in "AND (\(key), sequence) \(backwards ? "<" : ">") (?1, ?2)" } ?? ""
            let direction = backwards ? "DESC" : "ASC"
            return try sortedRows(
                connection,
                """
                SELECT \(key), sequence, rowid FROM requests \(rows) \(past)
                ORDER BY \(key) \(direction), sequence \(direction) LIMIT \(limit)
                """, after.map { [$0.key, $0.tie] } ?? [])
        }
        let due = try read(
            "due_at", "INDEXED BY requests_due WHERE running = 0 AND due_at IS NOT NULL AND finished = 0")
        let running = try read(
            "IFNULL(due_at, \(none))",
            "INDEXED BY requests_unfinished WHERE running = 1 AND finished = 0 AND cancelled_at IS NULL")
        // Those with no due time come after every due time: read when the page gets there.
        let reachesNone = backwards ? (after?.key ?? none) == none : due.count < limit || due.last?.key == none
        let unplanned = reachesNone ? try read("\(none)", "WHERE running = 0 AND due_at IS NULL AND finished = 0") : []
        return merged([due, running, unplanned], backwards: backwards, limit: limit)
    }

    /// The row numbers of the first `limit` waiting and running requests by attempts (each
    /// key the attempt negated) after `after` (a key and a position), or before it
    /// `backwards`, without sorting every one: those an attempt of which failed in their
    /// index, the running ones in the index of the unfinished ones, and the rest — all on
    /// their first attempt, so one key — in the order submitted, as the table holds them.
    private static func mostAttemptsPending(
        _ connection: SQLiteConnection, after: (key: Int64, position: Int64)?, backwards: Bool, limit: Int
    ) throws(SQLiteError) -> [Int64] {
        let direction = backwards ? "DESC" : "ASC"
        func past(_ key: String) -> String {
            after.map { _ in "AND (\(key), rowid) \(backwards ? "<" : ">") (?1, ?2)" } ?? ""
        }
        let retryingKey = "-(failed_attempts + 1)"
        let runningKey = "-IFNULL(active_attempt, failed_attempts + 1)"
        let bound = after.map { [$0.key, $0.position] } ?? []
        let retrying = try sortedRows(
            connection,
            """
            SELECT \(retryingKey) AS key, rowid, rowid FROM requests INDEXED BY requests_retrying
            WHERE \(SQLiteScheduleStore.retryingRows) AND running = 0 \(past(retryingKey))
            ORDER BY key \(direction), rowid \(direction) LIMIT \(limit)
            """, bound)
        let running = try sortedRows(
            connection,
            """
            SELECT \(runningKey) AS key, rowid, rowid FROM requests
            INDEXED BY requests_unfinished WHERE running = 1 AND finished = 0 AND cancelled_at IS NULL \(past(runningKey))
            ORDER BY key \(direction), rowid \(direction) LIMIT \(limit)
            """, bound)
        // On their first attempt (key -1): a range of the table's own order, from the page's
        // start when it lies among them.
        let first: Int64 = -1
        let reachesFirst = after.map { backwards ? $0.key >= first : $0.key <= first } ?? true
        let firstAttempts =
            reachesFirst
            ? try rowsAtOneKey(
                connection, first, "finished = 0 AND failed_attempts = 0 AND running = 0", after: after,
                backwards: backwards, limit: limit) : []
        return merged([retrying, running, firstAttempts], backwards: backwards, limit: limit)
    }

    /// The row numbers of the first `limit` waiting and running requests by last run (each key
    /// the newest attempt's start negated) after `after` (a key and a position), or before it
    /// `backwards`, without sorting every one: those that have started in their index, whose
    /// order (the key, then the row number) is the list's, and those never started — all
    /// one key, the largest, so last — in the order submitted, only when the page reaches them.
    private static func latestRunPending(
        _ connection: SQLiteConnection, after: (key: Int64, position: Int64)?, backwards: Bool, limit: Int
    ) throws(SQLiteError) -> [Int64] {
        let direction = backwards ? "DESC" : "ASC"
        let key = SQLiteScheduleStore.lastRunKey
        // The key's own bound beside the pair's: SQLite seeks an index of an expression by a
        // range of the expression, not by a row value (a page would read from the start).
        let started = try sortedRows(
            connection,
            """
            SELECT \(key), rowid, rowid FROM requests INDEXED BY requests_last_run
            WHERE \(SQLiteScheduleStore.lastRunRows)
            \(after == nil ? "" : "AND \(key) \(backwards ? "<=" : ">=") ?1 AND (\(key), rowid) \(backwards ? "<" : ">") (?1, ?2)")
            ORDER BY \(key) \(direction), rowid \(direction) LIMIT \(limit)
            """, after.map { [$0.key, $0.position] } ?? [])
        let never = Int64.max
        let reachesNever =
            backwards ? (after?.key ?? never) == never : started.count < limit || after?.key == never
        let neverStarted =
            reachesNever
            ? try rowsAtOneKey(
                connection, never, "finished = 0 AND last_started_at IS NULL", after: after, backwards: backwards,
                limit: limit) : []
        return merged([started, neverStarted], backwards: backwards, limit: limit)
    }

    /// The first `limit` rows `condition` selects, all sorted by one `key`, in the table's
    /// order: after `after`'s position when the page starts at that key (before it
    /// `backwards`), else from the first (the last). The part of a list no index keeps, read
    /// only when a page reaches it.
    private static func rowsAtOneKey(
        _ connection: SQLiteConnection, _ key: Int64, _ condition: String, after: (key: Int64, position: Int64)?,
        backwards: Bool, limit: Int
    ) throws(SQLiteError) -> [SortedRow] {
        let from = after.flatMap { $0.key == key ? $0.position : nil }
        return try sortedRows(
            connection,
            """
            SELECT \(key), rowid, rowid FROM requests NOT INDEXED WHERE \(condition)
            \(from == nil ? "" : "AND rowid \(backwards ? "<" : ">") ?1") ORDER BY rowid \(backwards ? "DESC" : "ASC")
            LIMIT \(limit)
            """, from.map { [$0] } ?? [])
    }

    /// A row read in a page's order from one index: the value it is sorted by, the one that
    /// breaks ties, and its row number.
    private typealias SortedRow = (key: Int64, tie: Int64, row: Int64)

    /// The rows `sql` selects (a key, a tie and a row number each), `values` bound in turn.
    private static func sortedRows(
        _ connection: SQLiteConnection, _ sql: String, _ values: [Int64]
    ) throws(SQLiteError) -> [SortedRow] {
        let statement = try connection.statement(sql)
        defer { statement.reset() }
        for (index, value) in values.enumerated() { statement.bind(Int32(index + 1), value) }
        var found: [SortedRow] = []
        while try statement.step() { found.append((statement.int64(0), statement.int64(1), statement.int64(2))) }
        return found
    }

    /// The row numbers of the first `limit` of `runs` (each in the page's order) merged by
    /// key and then tie, descending `backwards`.
    private static func merged(_ runs: [[SortedRow]], backwards: Bool, limit: Int) -> [Int64] {
        let rows = runs.joined().sorted {
            backwards ? ($0.key, $0.tie) > ($1.key, $1.tie) : ($0.key, $0.tie) < ($1.key, $1.tie)
        }
        return rows.prefix(limit).map(\.row)
    }

    /// The smallest text after every text that starts with `prefix` (SQLite compares text
    /// byte by byte): ``HandlerMatch/rangeEnd(of:)``.
    static func prefixEnd(_ prefix: String) -> String { HandlerMatch.rangeEnd(of: prefix) }

    /// The handlers the daemon recorded as it started; none in a store no daemon of this
    /// build has started since it was written (no table yet, or no row).
    static func handlers(_ connection: SQLiteConnection) throws(SQLiteError) -> [RegisteredHandlers] {
        guard
            try connection.integer("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'handlers'")
                == 1
        else { return [] }
        return try connection.rows("SELECT program, identifiers, prefixes, recorded_at FROM handlers") { row in
            RegisteredHandlers(
                instance: row.text(0), identifiers: RegisteredHandlers.split(row.text(1)),
                prefixes: RegisteredHandlers.split(row.text(2)),
                recordedAt: WallClockInstant(nanosecondsSinceEpoch: row.int64(3)))
        }
    }

    /// A request row with the columns the queries above add after the store's.
    private static func inspected(
        _ row: SQLiteStatement, now: WallClockInstant, handlers: [RegisteredHandlers]
    ) throws(SQLiteError) -> InspectedRequest {
        let stored = try SQLiteScheduleStore.request(row)
        let at = try RunningLayout.of(row)
        let running = row.optionalInt64(at.runID).map { runID in
            let started = WallClockInstant(nanosecondsSinceEpoch: row.int64(at.startedAt))
            // Reported by this attempt, not by an earlier run of the request.
            let progress =
                row.optionalInt64(at.progressRunID) == runID
                ? RunProgress(fraction: row.double(at.progressFraction), message: row.optionalText(at.progressMessage))
                : nil
            return RunningAttempt(
                runID: runID, attempt: row.int(at.attempt), startedAt: started,
                deadline: started + stored.request.maximumDuration, holder: nil, progress: progress)
        }
        let lastResult = row.optionalText(at.lastResult).flatMap(RunResult.init(stored:))
        return InspectedRequest(
            stored, running: running, lastResult: lastResult, position: stored.rowID ?? 0,
            lastRunAt: row.optionalInt64(at.lastStarted).map(WallClockInstant.init(nanosecondsSinceEpoch:)), at: now,
            handlers: handlers)
    }

    /// Runs `body` with the least busy connection, or a new one when every open one is busy
    /// and fewer than ``mostReaders`` are open.
    func using<T: Sendable>(
        _ body: @escaping @Sendable (SQLiteConnection) throws(SQLiteError) -> T
    ) async throws(ScheduleStoreError) -> T {
        let choice: InspectorReaders.Choice = readers.withLock { readers in
            let choice = InspectorReaders.choose(
                busy: readers.busy, opening: readers.opening, closed: readers.closed, most: Self.mostReaders)
            switch choice {
            case .use(let index): readers.busy[index] += 1
            case .open: readers.opening += 1
            }
            return choice
        }
        let index: Int
        switch choice {
        case .use(let chosen): index = chosen
        case .open:
            let number = readers.withLock { $0.open.count + $0.opening }
            let reader: Reader
            do {
                reader = try await Reader.open(path: path, number: number)
            } catch {
                readers.withLock { $0.opening -= 1 }
                throw error
            }
            index = readers.withLock { readers in
                readers.opening -= 1
                if readers.closed {
                    reader.queue.async { [database = reader.database] in
                        database.value?.close()
                        database.value = nil
                    }
                }
                readers.open.append(reader)
                readers.busy.append(1)
                return readers.open.count - 1
            }
        }
        defer { readers.withLock { $0.busy[index] -= 1 } }
        return try await perform(on: readers.withLock { $0.open[index] }, body)
    }

    /// Runs `body` with `reader`'s connection on its queue.
    private func perform<T: Sendable>(
        on reader: Reader, _ body: @escaping @Sendable (SQLiteConnection) throws(SQLiteError) -> T
    ) async throws(ScheduleStoreError) -> T {
        try await reader.queue.perform { [database = reader.database, path] () throws(ScheduleStoreError) in
            guard let connection = database.value else { throw ScheduleStoreError("schedule store \(path): closed") }
            // A read left open would hold the owner's checkpoints back for as long as the
            // inspector lives.
            defer { connection.endReads() }
            do {
                return try body(connection)
            } catch {
                throw ScheduleStoreError("schedule store \(path): \(error)")
            }
        }
    }
}

/// Where the inspector's rows hold the attempt in progress, its progress and the newest
/// ended attempt's result, found by name once per prepared statement.
private final class RunningLayout {
    let runID, attempt, startedAt, lastResult, lastStarted: Int32
    let progressRunID, progressFraction, progressMessage: Int32

    static func of(_ statement: SQLiteStatement) throws(SQLiteError) -> RunningLayout {
        try statement.layout(RunningLayout.init)
    }

    private init(_ row: SQLiteStatement) throws(SQLiteError) {
        (runID, attempt) = (try row.column("active_run_id"), try row.column("active_attempt"))
        (startedAt, lastResult) = (try row.column("active_started_at"), try row.column("last_result"))
        lastStarted = try row.column("last_started_at")
        progressRunID = try row.column("progress_run_id")
        (progressFraction, progressMessage) = (try row.column("progress_fraction"), try row.column("progress_message"))
    }
}
