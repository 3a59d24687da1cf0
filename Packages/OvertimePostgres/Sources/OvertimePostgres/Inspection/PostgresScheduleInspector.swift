// A fleet's schedule read beside the instances that share it: a connection of its own that
// listens for their notifications, reads, and writes nothing.

import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Overtime
@_spi(ScheduleStore) import OvertimeScheduler
import PostgresNIO

/// Reads the `overtime` schema of a fleet's database for a dashboard or a report. Its
/// connection is named `overtime-inspector` (not an instance: ``PostgresScheduleConfiguration/fleetInstances()``
/// does not list it), connects again after a loss, and never writes; nothing is made or
/// migrated (the instances do that).
final class PostgresScheduleInspector: ScheduleInspector {
    let configuration: PostgresScheduleConfiguration
    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    /// The connections it reads through (``InspectorReaders/most``), each connected when
    /// first needed: a slow read holds one while the others answer. The first also listens
    /// for the instances' notifications.
    private let lanes: [Lane]
    /// The reads queued or running on each lane in use, and how many are in use.
    private let busy = NIOLockedValueBox<[Int]>([0])
    /// Notifications heard on ``PostgresScheduleStore/channel`` since the inspector opened.
    private let notifications = NIOLockedValueBox<Int64>(0)
    private let closed = NIOLockedValueBox(false)
    /// The table of recorded handlers was seen: it stays (migrations add, never drop), so
    /// a page asks for its rows without asking first whether it is there.
    private let handlersTableSeen = NIOLockedValueBox(false)
    /// The schedule has the columns of the progress runs reported (schema version 11): a
    /// fleet not upgraded yet is read with NULLs in their place.
    private let progressColumnsSeen = NIOLockedValueBox(false)
    /// The schedule keeps when each request's newest attempt started (schema version 17).
    private let lastStartedSeen = NIOLockedValueBox(false)
    /// The schedule marks the requests that finished without a success (schema version 14):
    /// a page of what failed for good reads those by an index, not every finished request.
    let failureCandidatesMarked = NIOLockedValueBox(false)
    /// The schedule counts the ended attempts by minute (schema version 15): an overview
    /// reads those counts, not the hour's attempts.
    let activityCounted = NIOLockedValueBox(false)
    /// The schedule counts its requests by state as they are written (schema version 18):
    /// an overview reads those counts, not every request.
    let statesCounted = NIOLockedValueBox(false)
    /// The schedule counts how late runs started as they start (schema version 19).
    let latenessCounted = NIOLockedValueBox(false)
    /// The most rows one page reads for a selection no index answers (failed, a tag, a
    /// search; a search of the history, in attempts).
    let rowsReadPerPage: Int
    /// The most attempts the identifiers with a prefix may have for a history page of them
    /// to read them all by the primary key and sort them; a prefix that has more is read
    /// newest first (see ``history(_:)``).
    let prefixSortedAtMost: Int
    /// Identifiers compare byte by byte (schema version 13): a prefix is a range of the
    /// primary keys, so its attempts are counted and read by it.
    private let prefixIsARange = NIOLockedValueBox(false)
    private static let logger = Logger(label: "overtime.fleet.inspector") { _ in SwiftLogNoOpLogHandler() }

    /// Whether a lane may connect now, or fails at once after an attempt the server never
    /// answered (one server behind every lane).
    private let connectAttempts: ConnectAttempts

    /// One connection and its operations, one at a time, each within its deadline.
    private final class Lane: Sendable {
        let operations: ConnectionOperations
        /// The connection; `nil` before the first call and after a failure (the next call
        /// connects again). Read and set under its lock, never held across I/O.
        let connection = NIOLockedValueBox<Connected?>(nil)
        /// Whether it listens for the instances' notifications (the first lane).
        let listens: Bool

        init(on loop: any EventLoop, timeout: Duration, listens: Bool) {
            operations = ConnectionOperations(on: loop, timeout: timeout)
            self.listens = listens
        }
    }

    private struct Connected: Sendable {
        let connection: PostgresConnection
        /// The database's clock minus this process's, in nanoseconds: the stored times are
        /// on the database's clock.
        let clockOffset: Int64
    }

    private init(configuration: PostgresScheduleConfiguration, rowsReadPerPage: Int, prefixSortedAtMost: Int) {
        self.configuration = configuration
        self.rowsReadPerPage = rowsReadPerPage
        self.prefixSortedAtMost = prefixSortedAtMost
        connectAttempts = ConnectAttempts(
            interval: configuration.reconnectInterval, timeout: configuration.operationTimeout)
        lanes = (0..<InspectorReaders.most).map { [group] index in
            Lane(on: group.next(), timeout: configuration.operationTimeout, listens: index == 0)
        }
    }

    /// An inspector of `configuration`'s database, connected and its schema checked: a bad
    /// setup is said at once.
    static func open(
        configuration: PostgresScheduleConfiguration, rowsReadPerPage: Int = 20_000, prefixSortedAtMost: Int = 5_000
    ) async throws(ScheduleStoreError) -> PostgresScheduleInspector {
        let inspector = PostgresScheduleInspector(
            configuration: configuration, rowsReadPerPage: rowsReadPerPage, prefixSortedAtMost: prefixSortedAtMost)
        do {
            try await inspector.using { _, _ in () }
        } catch {
            inspector.close()
            throw error
        }
        return inspector
    }

    var isShared: Bool { true }

    // MARK: Requests

    func count(_ query: RequestQuery, upTo limit: Int) async throws(ScheduleStoreError) -> Int? {
        // What failed for good with a prefix or a tag: each marked row read and told, as a
        // page does (the overview counts them all).
        if query.selection == .failed, query.search == nil, query.identifierPrefix != nil || query.tag != nil {
            return try await RequestPage.counted(query, upTo: limit) { page throws(ScheduleStoreError) in
                try await requests(page, now: SystemClock().wallClockNow)
            }
        }
        // Otherwise only what the columns tell: a failed request is told by its newest
        // attempt, a tag or a search by the row read back.
        guard query.selection != .failed, query.tag == nil, query.search == nil else { return nil }
        let (conditions, bindings) = conditions(query)
        // The unfinished (or all) requests with a prefix are counted in the range of the
        // primary key. The planner takes a prefix's many requests for spread evenly through
        // the table and reads it from its start; but those submitted together lie together,
        // behind every row written before them (after a fleet's throughput run, 46,000 rows
        // and 20 ms to count 1,000 of a prefix, against 1 ms in the range). A running or
        // cancelled selection keeps to the index of its own few rows.
        let byKey = query.identifierPrefix != nil && (query.selection == .pending || query.selection == .all)
        return try await count(
            in: "overtime.requests r", conditions, bindings, upTo: limit, inOrderOf: byKey ? "r.identifier" : nil)
    }

    /// How many rows of `table` meet `conditions` (with `bindings`), counted up to `limit`:
    /// at most `limit` entries of the index the conditions choose are read, or, `inOrderOf`
    /// a key, of the index in that order.
    private func count(
        in table: String, _ conditions: [String], _ bindings: PostgresBindings, upTo limit: Int,
        inOrderOf key: String? = nil
    ) async throws(ScheduleStoreError) -> Int {
        let sql = """
            SELECT count(*) FROM (SELECT 1 FROM \(table)
                \(conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND "))
                \(key.map { "ORDER BY \($0) " } ?? "")LIMIT \(max(0, limit))) c
            """
        return try await using { [self] connection, _ in
            let rows = try await run(connection, PostgresQuery(unsafeSQL: sql, binds: bindings))
            return Int(try rows.first?.decode(Int64.self) ?? 0)
        }
    }

    /// The conditions of `query`'s filters on the requests (`r`) and their bindings; a tag's
    /// and a search's select a superset, checked as read.
    private func conditions(_ query: RequestQuery) -> ([String], PostgresBindings) {
        var conditions: [String] = []
        var bindings = PostgresBindings()
        switch query.selection {
        case .pending: conditions.append("NOT r.finished")
        case .running: conditions.append("r.running")
        case .failed:
            conditions.append("r.finished AND r.cancelled_at IS NULL")
            if failureCandidatesMarked.withLockedValue({ $0 }) {
                // A request that failed for good finished without a success: the few such,
                // by `requests_failed_for_good` (the state of each still told by its newest
                // attempt, its chain's stop, as for any page).
                conditions.append("r.failure_candidate")
            }
        case .cancelled: conditions.append("r.cancelled_at IS NOT NULL")
        default: break
        }
        if let prefix = query.identifierPrefix {
            // A range, which the indexes holding identifiers read: requests_pending's, a key
            // of it from schema version 22, checked in each entry it passes over before the
            // entry's row is visited.
            conditions.append(Self.range(prefix, &bindings))
        }
        if let tag = query.tag {
            bindings.append(RequestColumns.tagPattern(tag))
            conditions.append("strpos(r.tags, $\(bindings.count)) > 0")
        }
        if let search = query.search {
            // The tags column between its commas: a superset, checked as read.
            bindings.append(search)
            conditions.append(
                "(strpos(r.identifier, $\(bindings.count)) > 0 OR strpos(r.tags, $\(bindings.count)) > 0)")
        }
        return (conditions, bindings)
    }

    func requests(_ query: RequestQuery, now: WallClockInstant) async throws(ScheduleStoreError) -> RequestPage {
        let (conditions, bindings) = conditions(query)
        var reading = RequestPage.Reading(query, rowsReadPerPage: rowsReadPerPage)
        // Read with the first batch, in its operation.
        var handlers: [RegisteredHandlers]?
        let key = sortKey(query.order)
        let columns = requestColumns
        let comparison = query.newestFirst ? "<" : ">"
        let direction = query.newestFirst ? "DESC" : "ASC"
        let sorted = query.order != .submitted
        let order = sorted ? "sort_key \(direction), sequence \(direction)" : "sequence \(direction)"
        /// The condition of rows past a position (and the value it was sorted by) in the page's order.
        func past(_ position: Int64?, _ positionKey: Int64?, _ comparison: String, in bindings: inout PostgresBindings)
            -> String?
        {
            guard let position else { return nil }
            guard let positionKey else {
                bindings.append(position)
                return "r.sequence \(comparison) $\(bindings.count)"
            }
            bindings.append(positionKey)
            bindings.append(position)
            return "(\(key), r.sequence) \(comparison) ($\(bindings.count - 1), $\(bindings.count))"
        }
        // The page's rows are picked first, by their keys alone; only they are read whole,
        // with their newest attempt. Picked in the same query, every row the filters select
        // was looked up in the history before the sort: 100,000 lookups for a page of the
        // pending requests sorted by a column.
        func pick(_ part: [String], _ limit: Int) -> String {
            """
            SELECT r.identifier, r.owner, r.sequence, \(key) AS sort_key FROM overtime.requests r
            \(part.isEmpty ? "" : "WHERE " + part.joined(separator: " AND "))
            ORDER BY \(sorted ? "\(key) \(direction), " : "")r.sequence \(direction) LIMIT \(limit)
            """
        }
        // Every state: no index holds every request in order (one would cost each update of a
        // plan an entry more), but the three that hold the unfinished, the finished and the
        // cancelled ones do, between them; a page of each, merged.
        func picked(_ part: [String], _ limit: Int) -> String {
            query.selection == .all
                ? """
                SELECT * FROM ((\(pick(["NOT r.finished"] + part, limit)))
                    UNION ALL (\(pick(["r.finished AND r.cancelled_at IS NULL"] + part, limit)))
                    UNION ALL (\(pick(["r.finished AND r.cancelled_at IS NOT NULL"] + part, limit)))) every
                ORDER BY \(order) LIMIT \(limit)
                """ : pick(part, limit)
        }
        var stretchBound: (position: Int64, key: Int64?)?
        if let stretch = reading.stretch {
            // The stretch's last row, by the filters but the tag and the search: the rows read
            // check those in the query, and none past it is read.
            var others = query
            others.tag = nil
            others.search = nil
            var (bounds, boundBindings) = self.conditions(others)
            if let after = past(reading.after, reading.afterKey, comparison, in: &boundBindings) {
                bounds.append(after)
            }
            let sql = """
                SELECT sequence, sort_key FROM (\(picked(bounds, stretch))) s
                ORDER BY \(order) OFFSET \(stretch - 1) LIMIT 1
                """
            let end = try await using { [self, boundBindings] connection, _ in
                try await run(connection, PostgresQuery(unsafeSQL: sql, binds: boundBindings)).first?.decode(
                    (Int64, Int64).self)
            }
            if let end {
                reading.stretchEnds(at: end.0, sortKey: end.1)
                stretchBound = (end.0, sorted ? end.1 : nil)
            }
        }
        while true {
            var page = conditions
            var pageBindings = bindings
            if let after = past(reading.after, reading.afterKey, comparison, in: &pageBindings) { page.append(after) }
            if let bound = stretchBound,
                let end = past(bound.position, bound.key, query.newestFirst ? ">=" : "<=", in: &pageBindings)
            {
                page.append(end)
            }
            let sql = """
                SELECT \(columns), picked.sort_key FROM (\(picked(page, reading.batch))) picked
                JOIN overtime.requests r ON r.identifier = picked.identifier AND r.owner = picked.owner
                ORDER BY \(sorted ? "picked.sort_key \(direction), " : "")picked.sequence \(direction)
                """
            // Each batch is an operation of its own, within its own deadline.
            let (batch, read) = try await using { [self, pageBindings, handlers] connection, offset in
                var read = handlers
                if read == nil { read = try await registeredHandlers(connection, offset: offset) }
                let batch = try await run(connection, PostgresQuery(unsafeSQL: sql, binds: pageBindings)).map {
                    (
                        try Self.inspected($0, now: now, offset: offset, handlers: read ?? []),
                        try NamedCells($0)("sort_key", as: Int64.self)
                    )
                }
                return (batch, read)
            }
            handlers = read
            var rows = 0
            for (inspected, sortKey) in batch {
                rows += 1
                if !reading.visit(inspected, sortKey: sortKey) { break }
            }
            if let found = reading.batchEnded(rows: rows) { return found }
        }
    }

    func request(_ identifier: String, now: WallClockInstant) async throws(ScheduleStoreError) -> InspectedRequest? {
        try await using { [self] connection, offset in
            let handlers = try await registeredHandlers(connection, offset: offset)
            // The fleet's shared request first; else an instance's own of that identifier.
            return try await run(
                connection,
                """
                SELECT \(unescaped: requestColumns) FROM overtime.requests r WHERE r.identifier = \(identifier)
                ORDER BY r.owner = '' DESC, r.owner LIMIT 1
                """
            ).first.map { try Self.inspected($0, now: now, offset: offset, handlers: handlers) }
        }
    }

    /// The store's columns, then the attempt in progress, its progress, its holder (without
    /// the opening's token), the newest ended attempt's result and when the newest attempt
    /// started.
    private var requestColumns: String {
        switch (progressColumnsSeen.withLockedValue { $0 }, lastStartedSeen.withLockedValue { $0 }) {
        case (true, true): Self.requestColumns
        case (true, false): Self.requestColumnsWithoutLastStart
        default: Self.requestColumnsWithoutProgress
        }
    }

    private static let progress = "r.progress_run_id, r.progress_fraction, r.progress_message"
    private static let noLastStart = "NULL::bigint AS last_started_at"
    private static let requestColumns = requestColumns(progress: progress, lastStarted: "r.last_started_at")
    private static let requestColumnsWithoutLastStart = requestColumns(progress: progress, lastStarted: noLastStart)
    private static let requestColumnsWithoutProgress = requestColumns(
        progress: "NULL::bigint AS progress_run_id, NULL::double precision AS progress_fraction,"
            + " NULL::text AS progress_message", lastStarted: noLastStart)

    /// The SQL of the number a page in `order` is sorted by (``RequestQuery/Order-swift.struct``),
    /// of the columns of `overtime.requests` alone (the picking query reads no other table).
    private func sortKey(_ order: RequestQuery.Order) -> String {
        PostgresScheduleStore.sortKey(order, lastStarted: lastStartedSeen.withLockedValue { $0 })
    }

    private static func requestColumns(progress: String, lastStarted: String) -> String {
        PostgresScheduleStore.columns.split(separator: ",").map {
            "r." + $0.trimmingCharacters(in: .whitespacesAndNewlines)
        }.joined(separator: ", ")
            + """
            , r.active_run_id, r.active_attempt, r.active_started_at, \(progress), \(lastStarted),
            CASE WHEN r.running THEN regexp_replace(r.claimed_by, ' [0-9]+$', '') END AS holder,
            (SELECT h.result FROM overtime.history h WHERE h.identifier = r.identifier AND h.owner = r.owner
                ORDER BY h.run_id DESC, h.attempt DESC LIMIT 1) AS last_result, r.sequence
            """
    }

    /// The handlers the instances recorded as they started (their times on this machine's
    /// clock); none where no instance of this build has started (no table yet).
    func registeredHandlers(_ connection: PostgresConnection, offset: Int64) async throws -> [RegisteredHandlers] {
        if !handlersTableSeen.withLockedValue({ $0 }) {
            let exists = try await run(connection, "SELECT to_regclass('overtime.handlers') IS NOT NULL").first
            guard try exists?.decode(Bool.self) == true else { return [] }
            handlersTableSeen.withLockedValue { $0 = true }
        }
        var found: [RegisteredHandlers] = []
        let rows = try await run(
            connection, "SELECT instance, identifiers, prefixes, recorded_at FROM overtime.handlers")
        for row in rows {
            let (instance, identifiers, prefixes, recorded) = try row.decode((String, [String], [String], Int64).self)
            found.append(
                RegisteredHandlers(
                    instance: instance, identifiers: identifiers, prefixes: prefixes,
                    recordedAt: WallClockInstant(nanosecondsSinceEpoch: recorded &- offset)))
        }
        return found
    }

    private static func inspected(
        _ row: PostgresRow, now: WallClockInstant, offset: Int64, handlers: [RegisteredHandlers]
    ) throws -> InspectedRequest {
        let cell = NamedCells(row)
        let stored = try PostgresScheduleStore.request(cell)
        var running: RunningAttempt?
        if stored.isRunning, let runID = try cell("active_run_id", as: Int64?.self),
            let started = try cell("active_started_at", as: Int64?.self)
        {
            let startedAt = WallClockInstant(nanosecondsSinceEpoch: started &- offset)
            // Reported by this attempt, not by an earlier run of the request.
            var progress: RunProgress?
            if try cell("progress_run_id", as: Int64?.self) == runID,
                let fraction = try cell("progress_fraction", as: Double?.self)
            {
                progress = RunProgress(fraction: fraction, message: try cell("progress_message", as: String?.self))
            }
            running = RunningAttempt(
                runID: runID, attempt: Int(try cell("active_attempt", as: Int64?.self) ?? 1), startedAt: startedAt,
                deadline: startedAt + stored.request.maximumDuration, holder: try cell("holder"), progress: progress)
        }
        let lastResult = try cell("last_result", as: String?.self).flatMap(RunResult.init(stored:))
        let lastStarted = try cell("last_started_at", as: Int64?.self)
        return InspectedRequest(
            stored, running: running, lastResult: lastResult, position: try cell("sequence"),
            lastRunAt: lastStarted.map { WallClockInstant(nanosecondsSinceEpoch: $0 &- offset) },
            at: WallClockInstant(nanosecondsSinceEpoch: now.nanosecondsSinceEpoch &+ offset), handlers: handlers)
    }

    // MARK: History

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
        let sortsAPrefix =
            stretch == nil && query.identifier == nil && query.identifierPrefix != nil
            && prefixIsARange.withLockedValue { $0 }
        return try await using { [prefixSortedAtMost] connection, _ in
            var conditions: [String] = []
            var bindings = PostgresBindings()
            if let before = query.before {
                conditions.append(
                    "(run_id, attempt) < (\(Self.bind(before.runID, &bindings)), \(Self.bind(Int64(before.attempt), &bindings)))"
                )
            }
            if let after = query.after {
                conditions.append(
                    "(run_id, attempt) > (\(Self.bind(after.runID, &bindings)), \(Self.bind(Int64(after.attempt), &bindings)))"
                )
            }
            // Read up (from `after` or the oldest), the page is read oldest first and turned round.
            let direction = query.readsUp ? "ASC" : "DESC"
            // The stretch's far end, read from the index of runs: the page beyond starts past
            // it, unless this one fills.
            var stretchEnd: HistoryPosition?
            if let stretch {
                let end = try await run(
                    connection,
                    PostgresQuery(
                        unsafeSQL: """
                            SELECT run_id, attempt FROM overtime.history
                            \(conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND "))
                            ORDER BY run_id \(direction), attempt \(direction) OFFSET \(stretch - 1) LIMIT 1
                            """, binds: bindings)
                ).first.map { try $0.decode((Int64, Int64).self) }
                if let end {
                    stretchEnd = HistoryPosition(runID: end.0, attempt: Int(end.1))
                    conditions.append(
                        "(run_id, attempt) \(query.readsUp ? "<=" : ">=") (\(Self.bind(end.0, &bindings)), \(Self.bind(end.1, &bindings)))"
                    )
                }
            }
            if let search = query.search {
                let text = Self.bind(search, &bindings)
                conditions.append(
                    "(strpos(identifier, \(text)) > 0 OR strpos(stop_reason, \(text)) > 0"
                        + " OR position(convert_to(\(text), 'UTF8') IN output) > 0)")
            }
            Self.historyFilters(query, byteOrdered: prefixIsARange.withLockedValue { $0 }, &conditions, &bindings)
            let columns = "identifier, run_id, attempt, started_at, ended_at, result, stop_reason, output"
            let filters = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
            let order = "ORDER BY run_id \(direction), attempt \(direction) LIMIT \(query.limit)"
            var sql = "SELECT \(columns) FROM overtime.history \(filters) \(order)"
            // The planner reads a prefix's attempts newest first, expecting them spread
            // evenly through the history; those of identifiers run long ago lie far back
            // (2,222 attempts of 210,500: 87,000 read past, 20-55 ms). A prefix with few
            // attempts is read by the primary key's range and sorted instead (4-10 ms).
            if sortsAPrefix, let prefix = query.identifierPrefix {
                let counted = try await run(
                    connection,
                    """
                    SELECT count(*) FROM (SELECT 1 FROM overtime.history
                        WHERE identifier >= \(prefix) AND identifier < \(HandlerMatch.rangeEnd(of: prefix))
                        LIMIT \(prefixSortedAtMost + 1)) few
                    """
                ).first?.decode(Int64.self)
                if (counted ?? .max) <= prefixSortedAtMost {
                    sql = """
                        WITH matching AS MATERIALIZED (SELECT \(columns) FROM overtime.history \(filters))
                        SELECT \(columns) FROM matching \(order)
                        """
                }
            }
            var records = try await run(connection, PostgresQuery(unsafeSQL: sql, binds: bindings))
                .map(PostgresScheduleStore.record)
            if query.readsUp { records.reverse() }
            return HistoryPage(records: records, of: query, stretchEnd: stretchEnd)
        }
    }

    func count(_ query: HistoryQuery, upTo limit: Int) async throws(ScheduleStoreError) -> Int? {
        // A search is told by the attempt read back: counting it would read the history.
        guard query.search == nil else { return nil }
        var conditions: [String] = []
        var bindings = PostgresBindings()
        Self.historyFilters(query, byteOrdered: prefixIsARange.withLockedValue { $0 }, &conditions, &bindings)
        return try await count(in: "overtime.history", conditions, bindings, upTo: limit)
    }

    /// The conditions of `query`'s filters on the history (its positions and search aside),
    /// appended with their bindings. A prefix is a range of identifiers where they compare
    /// byte by byte (`byteOrdered`: schema version 13 on): two comparisons a row read cost
    /// the server less than half what `starts_with` does (a page of a prefix whose attempts
    /// lie 87,000 back in the history, newest first: 24 ms against 11).
    private static func historyFilters(
        _ query: HistoryQuery, byteOrdered: Bool, _ conditions: inout [String], _ bindings: inout PostgresBindings
    ) {
        if let identifier = query.identifier { conditions.append("identifier = \(Self.bind(identifier, &bindings))") }
        if let prefix = query.identifierPrefix {
            conditions.append(
                byteOrdered
                    ? Self.range(prefix, &bindings, column: "identifier")
                    : "starts_with(identifier, \(Self.bind(prefix, &bindings)))")
        }
        if let result = query.result { conditions.append("result = \(Self.bind(result.description, &bindings))") }
        if let from = query.startedFrom {
            conditions.append("started_at >= \(Self.bind(from.nanosecondsSinceEpoch, &bindings))")
        }
        if let until = query.startedBefore {
            conditions.append("started_at < \(Self.bind(until.nanosecondsSinceEpoch, &bindings))")
        }
    }

    func newestAttempts(of identifiers: [String]) async throws(ScheduleStoreError) -> [String: RunRecord] {
        let wanted = Array(Set(identifiers.prefix(Self.newestAttemptsLimit)))
        guard !wanted.isEmpty else { return [:] }
        return try await using { connection, _ in
            // One round trip: each identifier's newest attempt found by a descent of the
            // primary key (identifier, run_id, attempt), as `history(_:)` finds one request's.
            let rows = try await run(
                connection,
                """
                SELECT h.identifier, h.run_id, h.attempt, h.started_at, h.ended_at, h.result, h.stop_reason, h.output
                FROM unnest(\(wanted)::text[]) AS wanted(identifier)
                CROSS JOIN LATERAL (
                    SELECT * FROM overtime.history x WHERE x.identifier = wanted.identifier
                    ORDER BY x.run_id DESC, x.attempt DESC LIMIT 1) h
                """)
            var newest: [String: RunRecord] = [:]
            for row in rows {
                let record = try PostgresScheduleStore.record(row)
                newest[record.identifier] = record
            }
            return newest
        }
    }

    /// Times on the database's clock, as the history's.
    func operatorActions(limit: Int) async throws(ScheduleStoreError) -> [OperatorAction] {
        try await using { connection, _ in
            // A database no instance of this build has migrated yet (schema version 16) has none.
            let recorded = try await run(connection, "SELECT to_regclass('overtime.operator_actions') IS NOT NULL")
            guard try recorded.first?.decode(Bool.self) == true else { return [] }
            return try await run(
                connection,
                """
                SELECT at, by, action, subject, count, outcome FROM overtime.operator_actions
                ORDER BY id DESC LIMIT \(Int64(max(0, limit)))
                """
            ).map(PostgresScheduleStore.operatorAction)
        }
    }

    // MARK: Changes and instances

    /// The notifications the instances sent, and the server's transaction snapshot: the
    /// instances notify of submits and ends that leave work to do, not of every change (a
    /// run that starts, a cancel), and every write moves the snapshot (another database's
    /// too, which only costs a read).
    func changeMark() async throws(ScheduleStoreError) -> Int64 {
        let snapshot = try await using(lanes[0]) { connection, _ in
            try await run(connection, "SELECT pg_current_snapshot()::text").first?.decode(String.self) ?? ""
        }
        // FNV-1a of the snapshot's text.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in snapshot.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return Int64(bitPattern: hash) &+ notifications.withLockedValue { $0 }
    }

    func instances(now: WallClockInstant) async throws(ScheduleStoreError) -> [InspectedInstance] {
        try await using { connection, offset in
            struct Row {
                var claims = 0
                var claimsUntil: Int64?
                var connections = 0
                var lastSeen: Int64?
                var requests = 0
            }
            var rows: [String: Row] = [:]
            let nanoseconds = "(extract(epoch FROM %@) * 1000000000)::bigint"
            let connected = try await run(
                connection,
                PostgresQuery(
                    unsafeSQL: """
                        SELECT substr(application_name, \(PostgresScheduleConfiguration.applicationNamePrefix.count + 1)),
                            count(*), \(nanoseconds.replacingOccurrences(of: "%@", with: "max(coalesce(state_change, backend_start))"))
                        FROM pg_stat_activity WHERE starts_with(application_name, 'overtime ') GROUP BY 1
                        """))
            for row in connected {
                let (name, count, seen) = try row.decode((String, Int64, Int64?).self)
                rows[name, default: Row()].connections = Int(count)
                rows[name, default: Row()].lastSeen = seen
            }
            let owners = try await run(
                connection,
                "SELECT owner, count(*) FROM overtime.requests WHERE owner <> '' AND NOT finished GROUP BY owner")
            for row in owners {
                let (name, count) = try row.decode((String, Int64).self)
                rows[name, default: Row()].requests = Int(count)
            }
            let claims = try await run(
                connection,
                PostgresQuery(
                    unsafeSQL: """
                        SELECT regexp_replace(claimed_by, ' [0-9]+$', ''), count(*),
                            \(nanoseconds.replacingOccurrences(of: "%@", with: "max(claim_until)"))
                        FROM overtime.requests WHERE running AND claim_until > now() GROUP BY 1
                        """))
            for row in claims {
                let (holder, count, until) = try row.decode((String, Int64, Int64?).self)
                let name = Self.instanceName(ofHolder: holder)
                rows[name, default: Row()].claims += Int(count)
                rows[name, default: Row()].claimsUntil = max(rows[name]?.claimsUntil ?? .min, until ?? .min)
            }
            func local(_ nanoseconds: Int64?) -> WallClockInstant? {
                nanoseconds.map { WallClockInstant(nanosecondsSinceEpoch: $0 &- offset) }
            }
            return rows.sorted { $0.key < $1.key }.map { name, row in
                InspectedInstance(
                    name: name, claims: row.claims, claimsUntil: local(row.claimsUntil), connections: row.connections,
                    lastSeen: local(row.lastSeen), requests: row.requests)
            }
        }
    }

    /// The instance name in a claim's holder: `name (host:pid)`, or `host:pid` for an
    /// instance named after its host.
    static func instanceName(ofHolder holder: String) -> String {
        if holder.hasSuffix(")"), let open = holder.range(of: " (", options: .backwards) {
            return String(holder[..<open.lowerBound])
        }
        return String(holder.split(separator: ":").first ?? Substring(holder))
    }

    func close() {
        let wasClosed = closed.withLockedValue { closed in
            defer { closed = true }
            return closed
        }
        guard !wasClosed else { return }
        for lane in lanes {
            let connected = lane.connection.withLockedValue { connected in
                defer { connected = nil }
                return connected
            }
            // Queued on the loop ahead of its shutdown, which runs it before it ends (not
            // waited for: nothing of the inspector's runs on the loop after it); kept until
            // closed, as postgres-nio asserts.
            connected?.connection.close().whenComplete { _ in withExtendedLifetime(connected) {} }
        }
        group.shutdownGracefully { _ in }
    }

    deinit { close() }

    // MARK: Access

    /// Runs `body` with the least busy connection, or one not used yet when every one in
    /// use is busy (``InspectorReaders/choose(busy:opening:closed:most:)``).
    func using<T: Sendable>(
        _ body: (PostgresConnection, Int64) async throws -> T
    ) async throws(ScheduleStoreError) -> T {
        let index = busy.withLockedValue { busy in
            let index: Int
            switch InspectorReaders.choose(busy: busy, opening: 0, closed: false, most: lanes.count) {
            case .use(let chosen): index = chosen
            case .open:
                busy.append(0)
                index = busy.count - 1
            }
            busy[index] += 1
            return index
        }
        defer { busy.withLockedValue { $0[index] -= 1 } }
        return try await using(lanes[index], body)
    }

    /// Runs `body` with `lane`'s connection (connected, checked, and the first listening,
    /// first) and the clock offset, as one operation within
    /// ``PostgresScheduleConfiguration/operationTimeout``.
    private func using<T: Sendable>(
        _ lane: Lane, _ body: (PostgresConnection, Int64) async throws -> T
    ) async throws(ScheduleStoreError) -> T {
        guard !closed.withLockedValue({ $0 }) else {
            throw ScheduleStoreError("schedule database \(configuration.serverName): the inspector is closed")
        }
        do {
            return try await lane.operations.perform { deadline in
                let connected = try await connected(lane, within: deadline)
                return try await body(connected.connection, connected.clockOffset)
            }
        } catch let error as ScheduleStoreError {
            throw error
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "42P01" {  // undefined_table
            throw noSchedule
        } catch {
            throw ScheduleStoreError(
                "schedule database \(configuration.serverName): \(PostgresScheduleStore.describe(error))")
        }
    }

    private var noSchedule: ScheduleStoreError {
        ScheduleStoreError(
            "schedule database \(configuration.serverName)/\(configuration.database ?? configuration.username) holds no"
                + " Overtime schedule (schema overtime): no instance has connected to it yet")
    }

    /// `lane`'s connection, made and checked if there is none or it closed.
    private func connected(_ lane: Lane, within deadline: OperationDeadline) async throws -> Connected {
        if let current = lane.connection.withLockedValue({ $0 }), !current.connection.isClosed {
            deadline.watch(current.connection)
            return current
        }
        lane.connection.withLockedValue { $0 = nil }
        var settings = configuration.connection()
        // Not `overtime <name>`: the inspector is no instance of the fleet.
        settings.options.additionalStartupParameters = [("application_name", "overtime-inspector")]
        let made = try await connectAttempts.connect(
            within: deadline, on: lane.operations.loop, configuration: settings, id: 4, logger: Self.logger)
        deadline.watch(made)
        do {
            let version = try await run(
                made, "SELECT value FROM overtime.meta WHERE name = 'schema_version'"
            ).first?.decode(Int64.self)
            guard let version else { throw noSchedule }
            guard version <= PostgresScheduleStore.schemaVersion else {
                throw ScheduleStoreError(
                    "schedule database \(configuration.serverName): written by a newer Overtime (schema version"
                        + " \(version)); this build reads up to version \(PostgresScheduleStore.schemaVersion)")
            }
            guard version >= 7 else {
                throw ScheduleStoreError(
                    "schedule database \(configuration.serverName) has schema version \(version): start an instance"
                        + " of this build once to upgrade it")
            }
            progressColumnsSeen.withLockedValue { $0 = version >= 11 }
            lastStartedSeen.withLockedValue { $0 = version >= 17 }
            failureCandidatesMarked.withLockedValue { $0 = version >= 14 }
            activityCounted.withLockedValue { $0 = version >= 15 }
            statesCounted.withLockedValue { $0 = version >= 18 }
            latenessCounted.withLockedValue { $0 = version >= 19 }
            prefixIsARange.withLockedValue { $0 = version >= 13 }
            let before = SystemClock().wallClockNow.nanosecondsSinceEpoch
            let database =
                try await run(made, "SELECT \(unescaped: PostgresScheduleStore.databaseNow)").first?.decode(Int64.self)
                ?? before
            let after = SystemClock().wallClockNow.nanosecondsSinceEpoch
            if lane.listens {
                made.addListener(channel: PostgresScheduleStore.channel) { [notifications] _, _ in
                    notifications.withLockedValue { $0 &+= 1 }
                }
            }
            let connected = Connected(connection: made, clockOffset: database - (before / 2 + after / 2))
            lane.connection.withLockedValue { $0 = connected }
            return connected
        } catch {
            try? await made.close()
            throw error
        }
    }

    /// Sends `query` and waits for all of its answer (no thread waits).
    func run(_ connection: PostgresConnection, _ query: PostgresQuery) async throws -> PostgresQueryResult {
        let answer: EventLoopFuture<PostgresQueryResult> = connection.query(query, logger: Self.logger)
        let result = try await answer.get()
        OperationDeadline.current?.answered()
        return result
    }
}
