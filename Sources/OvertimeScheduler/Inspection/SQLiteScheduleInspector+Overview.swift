// A SQLite schedule's overview, counted by SQLite in one read transaction (one snapshot, so
// the counts add up): the states as the store counted them while it wrote (schema version
// 19; before it, with each handler's share and the failed ones in one pass over the
// requests), each prefix's share in a range of the index of those waiting and running, the
// last hour's attempts by the minutes the store counted, and how late that hour's runs
// started as the store counted it.

import Overtime

extension SQLiteScheduleInspector {
    func overview(now: WallClockInstant) async throws(ScheduleStoreError) -> ScheduleOverview {
        try await overview(now: now, countingEveryRow: !statesCounted)
    }

    /// The overview, its states counted in a pass over every request with `countingEveryRow`
    /// (a store before schema version 19; and a test's check of the counts kept).
    func overview(now: WallClockInstant, countingEveryRow: Bool) async throws(ScheduleStoreError) -> ScheduleOverview {
        try await using {
            [startsIndexed, resultsIndexed, activityCounted, statesCounted, failedIndexed, latenessCounted] connection
                throws(SQLiteError) in
            try connection.execute("BEGIN")
            defer { try? connection.execute("COMMIT") }
            let match = HandlerMatch(try Self.handlers(connection))
            // Counts another program damaged are not read: the requests are counted in a
            // pass instead, as are those whose handlers' shares (read in the rows' index)
            // come to more than the counts hold.
            let plausible =
                countingEveryRow ? false : try connection.integer(SQLiteScheduleStore.countsArePlausible) == 1
            var (counts, byHandler) =
                plausible ? try Self.countedStates(connection, match) : try Self.states(connection, match)
            var unserved = Self.unserved(counts, byHandler)
            if plausible && (unserved.waiting < 0 || unserved.running < 0) {
                (counts, byHandler) = try Self.states(connection, match)
                unserved = Self.unserved(counts, byHandler)
            }
            byHandler[.none] = unserved
            // Those a prerequisite stopped, told by the chain each keeps in its details: only
            // rows that have details and whose newest attempt did not fail are decoded.
            if counts.finishedWithDetails > 0 {
                counts.failed += try Self.stoppedByTheirChains(
                    connection, failedKept: statesCounted, failedIndexed: failedIndexed)
            }
            let first = ScheduleOverview.firstMinute(before: now)
            let counted =
                activityCounted
                ? try Self.countedMinutes(connection, from: first)
                : try Self.minutes(
                    connection, from: first, startsIndexed: startsIndexed, resultsIndexed: resultsIndexed)
            return ScheduleOverview(
                waiting: counts.waiting, retrying: counts.retrying, running: counts.running, failed: counts.failed,
                cancelled: counts.cancelled, succeeded: counts.finished - counts.failed,
                handlers: ScheduleOverview.handlerRows(byHandler, recorded: match.recorded),
                tags: ScheduleOverview.tagRows(counts.unfinishedWithDetails > 0 ? try Self.byTag(connection) : [:]),
                minutes: ScheduleOverview.minutes(from: first, counted: counted),
                lateness: latenessCounted ? try Self.countedLateness(connection, from: first) : nil)
        }
    }

    /// The waiting and running requests no registered handler serves: those counted but
    /// for each handler's share.
    private static func unserved(
        _ counts: StateCounts, _ byHandler: [HandlerMatch.Found: (waiting: Int, running: Int)]
    ) -> (waiting: Int, running: Int) {
        byHandler.values.reduce((counts.waiting, counts.running)) { ($0.waiting - $1.waiting, $0.running - $1.running) }
    }

    /// The unfinished requests by tag, each of its tags counted: the tags are packed with
    /// the other details (NULL for most requests), so only the rows that have details are
    /// decoded — in a second pass over the requests, which a schedule none of whose
    /// unfinished requests has details (told by the first) is spared.
    private static func byTag(_ connection: SQLiteConnection) throws(SQLiteError) -> [String: (
        waiting: Int, running: Int
    )] {
        let statement = try connection.statement(
            """
            SELECT details, running FROM requests
            WHERE details IS NOT NULL AND cancelled_at IS NULL AND (finished = 0 OR running = 1)
            """)
        defer { statement.reset() }
        var counts: [String: (waiting: Int, running: Int)] = [:]
        while try statement.step() {
            let running = statement.int(1) != 0
            for tag in RequestDetails(packed: statement.optionalBytes(0)).tags.split(separator: ",").map(String.init) {
                if running {
                    counts[tag, default: (0, 0)].running += 1
                } else {
                    counts[tag, default: (0, 0)].waiting += 1
                }
            }
        }
        return counts
    }

    /// The requests' counts by state, as ``InspectedRequest`` tells a row's (a cancelled one
    /// is cancelled, then one with an attempt in progress is running), and the waiting and
    /// running ones of each registered prefix, in one pass over the table: every count a
    /// filtered aggregate (no sort: grouping 100,000 rows cost more than the pass). A
    /// request goes to its identifier's handler, else to the first prefix registered that it
    /// starts with; the registered identifiers' few rows are looked up by the primary key.
    private static func states(
        _ connection: SQLiteConnection, _ match: HandlerMatch
    ) throws(SQLiteError) -> (StateCounts, [HandlerMatch.Found: (waiting: Int, running: Int)]) {
        let waiting = "cancelled_at IS NULL AND running = 0 AND finished = 0"
        let running = "cancelled_at IS NULL AND running = 1"
        let finished = "cancelled_at IS NULL AND running = 0 AND finished = 1"
        let failures = SQLiteScheduleStore.activityFailures
        var byHandler = try registeredIdentifiersShares(connection, match)
        // Each prefix's share in the pass, as columns of its own (a result holds at most
        // 2,000); a program that registered more prefixes has each counted by its range.
        let inThePass = match.prefixes.count <= prefixesCountedInOnePass
        var columns: [String] = []
        var prefixValues: [Value] = []
        for (index, prefix) in match.prefixes.enumerated() {
            let (bucket, values) = Self.bucket(of: index, match)
            if inThePass {
                columns.append("COUNT(*) FILTER (WHERE \(waiting) AND \(bucket)) AS waiting\(index)")
                columns.append("COUNT(*) FILTER (WHERE \(running) AND \(bucket)) AS running\(index)")
                prefixValues += values + values
            } else {
                let statement = try connection.statement(
                    """
                    SELECT COUNT(*) FILTER (WHERE \(waiting)), COUNT(*) FILTER (WHERE \(running))
                    FROM requests WHERE \(bucket)
                    """)
                defer { statement.reset() }
                bind(statement, values)
                if try statement.step() {
                    byHandler[HandlerMatch.Found(name: prefix, isPrefix: true)] = (statement.int(0), statement.int(1))
                }
            }
        }
        let statement = try connection.statement(
            """
            SELECT COUNT(*) FILTER (WHERE \(waiting)) AS waiting,
                COUNT(*) FILTER (WHERE \(waiting) AND failed_attempts > 0) AS retrying,
                COUNT(*) FILTER (WHERE \(running)) AS running,
                COUNT(*) FILTER (WHERE cancelled_at IS NOT NULL) AS cancelled,
                COUNT(*) FILTER (WHERE \(finished)) AS finished,
                COUNT(*) FILTER (WHERE \(finished) AND (SELECT result FROM history h
                    WHERE h.identifier = requests.identifier ORDER BY run_id DESC, attempt DESC LIMIT 1)
                    IN (\(failures))) AS failed,
                COUNT(*) FILTER (WHERE \(finished) AND details IS NOT NULL) AS finished_with_details,
                COUNT(*) FILTER (WHERE (\(waiting) OR \(running)) AND details IS NOT NULL) AS unfinished_with_details
                \(columns.map { ", " + $0 }.joined())
            FROM requests
            """)
        defer { statement.reset() }
        bind(statement, prefixValues)
        guard try statement.step() else { return (StateCounts(), byHandler) }
        let counts = try StateCounts(statement)
        for (index, prefix) in match.prefixes.enumerated() where inThePass {
            byHandler[HandlerMatch.Found(name: prefix, isPrefix: true)] = (
                try statement.int(statement.column("waiting\(index)")),
                try statement.int(statement.column("running\(index)"))
            )
        }
        return (counts, byHandler)
    }

    /// The requests' counts by state as the store kept them (schema version 19): a sum
    /// over a few rows. Each handler's share: a registered identifier's by the primary key,
    /// a prefix's in its range of the index of the waiting and running requests.
    private static func countedStates(
        _ connection: SQLiteConnection, _ match: HandlerMatch
    ) throws(SQLiteError) -> (StateCounts, [HandlerMatch.Found: (waiting: Int, running: Int)]) {
        // Each count sums the states whose `bits` are `value` (CountedState's bits).
        typealias Bit = CountedState
        func sum(_ name: String, _ bits: Int64, _ value: Int64, and more: String = "") -> String {
            "IFNULL(SUM(count) FILTER (WHERE state & \(bits) = \(value)\(more)), 0) AS \(name)"
        }
        let phase = Bit.cancelled | Bit.running | Bit.finished  // where the request stands
        let sums = [
            sum("waiting", phase, 0), sum("retrying", phase | Bit.retrying, Bit.retrying),
            sum("running", Bit.cancelled | Bit.running, Bit.running), sum("cancelled", Bit.cancelled, Bit.cancelled),
            sum("finished", phase, Bit.finished),
            sum("failed", phase | Bit.lastFailed, Bit.finished | Bit.lastFailed),
            sum("finished_with_details", phase | Bit.detailed, Bit.finished | Bit.detailed),
            // Not finished, or finished while its run goes on.
            sum(
                "unfinished_with_details", Bit.cancelled | Bit.detailed, Bit.detailed,
                and: " AND state & \(Bit.running | Bit.finished) != \(Bit.finished)"),
        ]
        let statement = try connection.statement("SELECT \(sums.joined(separator: ", ")) FROM request_counts")
        defer { statement.reset() }
        let counts = try statement.step() ? try StateCounts(statement) : StateCounts()
        var byHandler = try registeredIdentifiersShares(connection, match)
        for index in match.prefixes.indices {
            let (bucket, values) = Self.bucket(of: index, match)
            let statement = try connection.statement(
                """
                SELECT COUNT(*) FILTER (WHERE running = 0), COUNT(*) FILTER (WHERE running = 1)
                FROM requests INDEXED BY requests_unfinished
                WHERE cancelled_at IS NULL AND (finished = 0 OR running = 1) AND \(bucket)
                """)
            defer { statement.reset() }
            bind(statement, values)
            if try statement.step() {
                byHandler[HandlerMatch.Found(name: match.prefixes[index], isPrefix: true)] = (
                    statement.int(0), statement.int(1)
                )
            }
        }
        return (counts, byHandler)
    }

    /// The waiting and running requests of each registered identifier, by the primary key,
    /// a few hundred at a time (a statement takes a bounded number of values).
    private static func registeredIdentifiersShares(
        _ connection: SQLiteConnection, _ match: HandlerMatch
    ) throws(SQLiteError) -> [HandlerMatch.Found: (waiting: Int, running: Int)] {
        var byHandler: [HandlerMatch.Found: (waiting: Int, running: Int)] = [:]
        var chunk = match.identifiers[...]
        while !chunk.isEmpty {
            let part = chunk.prefix(500)
            chunk = chunk.dropFirst(500)
            let statement = try connection.statement(
                """
                SELECT identifier,
                    COUNT(*) FILTER (WHERE cancelled_at IS NULL AND running = 0 AND finished = 0),
                    COUNT(*) FILTER (WHERE cancelled_at IS NULL AND running = 1)
                FROM requests WHERE identifier IN (\(part.map { _ in "?" }.joined(separator: ", "))) GROUP BY identifier
                """)
            defer { statement.reset() }
            bind(statement, part.map(Value.text))
            while try statement.step() {
                byHandler[HandlerMatch.Found(name: statement.text(0), isPrefix: false)] = (
                    statement.int(1), statement.int(2)
                )
            }
        }
        return byHandler
    }

    /// The most prefixes whose shares one pass counts.
    static let prefixesCountedInOnePass = 64

    /// The condition that selects the requests the prefix at `index` of `match` serves
    /// (``HandlerMatch/share(ofPrefixAt:)``), and its values: its range first (a row outside
    /// it is passed over after two comparisons).
    private static func bucket(of index: Int, _ match: HandlerMatch) -> (String, [Value]) {
        let prefix = match.prefixes[index]
        let (registered, overlapping) = match.share(ofPrefixAt: index)
        var conditions = ["identifier >= ? AND identifier < ?"]
        var values = [Value.text(prefix), .text(prefixEnd(prefix))]
        if !registered.isEmpty {
            conditions.append("identifier NOT IN (\(registered.map { _ in "?" }.joined(separator: ", ")))")
            values += registered.map(Value.text)
        }
        for earlier in overlapping {
            conditions.append("NOT (identifier >= ? AND identifier < ?)")
            values += [.text(earlier), .text(prefixEnd(earlier))]
        }
        return (conditions.joined(separator: " AND "), values)
    }

    /// The finished requests, not cancelled, that a prerequisite stopped and whose newest
    /// attempt (if any) did not fail (those are counted by their attempt): as the row keeps
    /// it with `failedKept` (schema version 19), else as the history tells; read in the
    /// index of those that may have failed with `failedIndexed` (schema version 20), else
    /// in the whole table.
    private static func stoppedByTheirChains(
        _ connection: SQLiteConnection, failedKept: Bool, failedIndexed: Bool
    ) throws(SQLiteError) -> Int {
        let failures = SQLiteScheduleStore.activityFailures
        let notFailed =
            failedKept
            ? "last_failed = 0"
            : """
            IFNULL((SELECT result FROM history h WHERE h.identifier = requests.identifier
                ORDER BY run_id DESC, attempt DESC LIMIT 1) NOT IN (\(failures)), 1)
            """
        let chained = try connection.statement(
            """
            SELECT \(SQLiteScheduleStore.requestColumns) FROM requests
            \(failedIndexed ? "INDEXED BY requests_failed WHERE \(SQLiteScheduleStore.failedRows) AND" : "WHERE")
                cancelled_at IS NULL AND running = 0 AND finished = 1 AND details IS NOT NULL AND \(notFailed)
            """)
        defer { chained.reset() }
        var stopped = 0
        while try chained.step() {
            if try SQLiteScheduleStore.request(chained).chain?.stoppedBy != nil { stopped += 1 }
        }
        return stopped
    }

    /// The hour's minutes from `first` as the store counted them while it recorded each
    /// attempt (schema version 16): 60 rows at most, however many attempts the hour held.
    private static func countedMinutes(
        _ connection: SQLiteConnection, from first: Int64
    ) throws(SQLiteError) -> [Int64: (ended: Int, failed: Int)] {
        let firstMinute = first / SQLiteScheduleStore.activityMinute
        let statement = try connection.statement(
            "SELECT minute, ended, failed FROM activity WHERE minute >= ? AND minute < ?")
        defer { statement.reset() }
        statement.bind(1, firstMinute)
        statement.bind(2, firstMinute + Int64(ScheduleOverview.minutesCounted))
        var counted: [Int64: (ended: Int, failed: Int)] = [:]
        while try statement.step() { counted[statement.int64(0) - firstMinute] = (statement.int(1), statement.int(2)) }
        return counted
    }

    /// How late the runs that started in the hour's minutes from `first` started, as the
    /// store counted them while it wrote each start (schema version 21): a row per bucket
    /// and minute the hour used.
    private static func countedLateness(
        _ connection: SQLiteConnection, from first: Int64
    ) throws(SQLiteError) -> StartLateness? {
        let firstMinute = first / SQLiteScheduleStore.activityMinute
        let statement = try connection.statement(
            "SELECT bucket, SUM(started) FROM lateness WHERE minute >= ? AND minute < ? GROUP BY bucket")
        defer { statement.reset() }
        statement.bind(1, firstMinute)
        statement.bind(2, firstMinute + Int64(ScheduleOverview.minutesCounted))
        var counted: [Int: Int] = [:]
        while try statement.step() { counted[statement.int(0)] = statement.int(1) }
        return LatenessBuckets.summary(counted)
    }

    /// Before schema version 16, the attempts that started in each minute from `first` and ended, and the failed ones
    /// among them, by the minute's index. Each minute's attempts are counted in the index of
    /// start times alone, one range after another (grouped in one statement, SQLite sorted
    /// them all first); the failed ones are found by the index of results other than success.
    /// A store without those indexes (before schema versions 15 and 12) is read once, grouped.
    private static func minutes(
        _ connection: SQLiteConnection, from first: Int64, startsIndexed: Bool, resultsIndexed: Bool
    ) throws(SQLiteError) -> [Int64: (ended: Int, failed: Int)] {
        let minute: Int64 = 60_000_000_000
        let failures = SQLiteScheduleStore.activityFailures
        var counted: [Int64: (ended: Int, failed: Int)] = [:]
        guard startsIndexed, resultsIndexed else {
            let grouped = try connection.statement(
                """
                SELECT (started_at - ?1) / \(minute), COUNT(*), COUNT(*) FILTER (WHERE result IN (\(failures)))
                FROM history WHERE started_at >= ?1 AND started_at < ?2 GROUP BY 1
                """)
            defer { grouped.reset() }
            grouped.bind(1, first)
            grouped.bind(2, ScheduleOverview.minutesEnd(from: first))
            while try grouped.step() { counted[grouped.int64(0)] = (grouped.int(1), grouped.int(2)) }
            return counted
        }
        let ended = try connection.statement(
            "SELECT COUNT(*) FROM history INDEXED BY history_started WHERE started_at >= ? AND started_at < ?")
        for index in 0..<Int64(ScheduleOverview.minutesCounted) {
            ended.bind(1, first + index * minute)
            ended.bind(2, first + (index + 1) * minute)
            if try ended.step(), ended.int(0) > 0 { counted[index] = (ended.int(0), 0) }
            ended.reset()
        }
        let failed = try connection.statement(
            """
            SELECT started_at FROM history INDEXED BY history_unusual_results
            WHERE result IN (\(failures)) AND result <> 'succeeded' AND started_at >= ? AND started_at < ?
            """)
        defer { failed.reset() }
        failed.bind(1, first)
        failed.bind(2, ScheduleOverview.minutesEnd(from: first))
        while try failed.step() {
            counted[(failed.int64(0) - first) / minute, default: (0, 0)].failed += 1
        }
        return counted
    }
}

/// The requests' counts by state, as one pass counts them.
private struct StateCounts {
    var waiting = 0
    var retrying = 0
    var running = 0
    var cancelled = 0
    var finished = 0
    /// Of the finished ones, those whose newest attempt failed.
    var failed = 0
    /// Of the finished ones, those that keep details (a chain among them).
    var finishedWithDetails = 0
    /// Of the waiting and running ones, those that keep details (their tags among them).
    var unfinishedWithDetails = 0

    init() {}

    /// The counts of the row `statement` stands on, by their columns' names.
    init(_ statement: SQLiteStatement) throws(SQLiteError) {
        waiting = try statement.int(statement.column("waiting"))
        retrying = try statement.int(statement.column("retrying"))
        running = try statement.int(statement.column("running"))
        cancelled = try statement.int(statement.column("cancelled"))
        finished = try statement.int(statement.column("finished"))
        failed = try statement.int(statement.column("failed"))
        finishedWithDetails = try statement.int(statement.column("finished_with_details"))
        unfinishedWithDetails = try statement.int(statement.column("unfinished_with_details"))
    }
}
