// Reading a schedule without taking part in it: what a dashboard or a report shows beside
// the daemon that owns the schedule.

import Overtime

/// Reads a schedule while the scheduler that owns it runs, and changes nothing: for
/// dashboards, reports and scripts beside the daemon. Every answer is read from the store
/// at that moment; none is kept. Opened with ``ScheduleDatabase/inspector()``.
public protocol ScheduleInspector: Sendable {
    /// The requests `query` selects, in its order (``RequestQuery/order``: by default the
    /// order submitted), at most `query.limit`, each with where it stands at `now`; and where
    /// the next page starts. A selection the store cannot index (``RequestQuery/Selection-swift.struct/failed``,
    /// a tag) reads a bounded number of rows per page, so a page may hold fewer than the
    /// limit and still have a next.
    func requests(_ query: RequestQuery, now: WallClockInstant) async throws(ScheduleStoreError) -> RequestPage
    /// How many requests `query` selects (where its page starts, its order and limit
    /// aside), counted up to `limit`: an answer of `limit` means at least that many. `nil`
    /// when only reading each row could tell (a tag, a search, all that failed for good): a
    /// list then shows no total. Those that failed for good with a prefix or a tag the
    /// built-in stores count by reading their pages: `nil` when a page stops at its bound of
    /// rows read before they end.
    func count(_ query: RequestQuery, upTo limit: Int) async throws(ScheduleStoreError) -> Int?
    /// The request of `identifier`, finished or not, or `nil`.
    func request(_ identifier: String, now: WallClockInstant) async throws(ScheduleStoreError) -> InspectedRequest?
    /// The ended attempts `query` selects, newest first, at most `query.limit`. A search
    /// (``HistoryQuery/search``) reads the whole history here; ``historyPage(_:)`` reads it a
    /// bounded stretch at a time.
    func history(_ query: HistoryQuery) async throws(ScheduleStoreError) -> [RunRecord]
    /// A page of the ended attempts `query` selects, newest first, at most `query.limit`, and
    /// where the next page starts. A search no index answers (``HistoryQuery/search``)
    /// reads a bounded stretch of the history per page, so a page may hold fewer than the
    /// limit and still have a next.
    func historyPage(_ query: HistoryQuery) async throws(ScheduleStoreError) -> HistoryPage
    /// How many ended attempts `query` selects (where its page starts, and its limit, aside),
    /// counted up to `limit`: an answer of `limit` means at least that many. `nil` when only
    /// reading each attempt could tell (a search): a list then shows no total.
    func count(_ query: HistoryQuery, upTo limit: Int) async throws(ScheduleStoreError) -> Int?
    /// The newest ended attempt of each of `identifiers` that has one, by identifier: what a
    /// list of requests shows beside each row, read at once rather than one request at a time
    /// (at most 1,000 identifiers; those past them are not looked up).
    func newestAttempts(of identifiers: [String]) async throws(ScheduleStoreError) -> [String: RunRecord]
    /// A number that changes whenever the schedule does (a commit by its owner): polled, it
    /// says when to read again.
    func changeMark() async throws(ScheduleStoreError) -> Int64
    /// The schedule at a glance at `now`: requests by state, by handler and by tag, and the attempts
    /// of the last hour by minute, each counted in the store.
    func overview(now: WallClockInstant) async throws(ScheduleStoreError) -> ScheduleOverview
    /// The instances of a fleet sharing the schedule, with what each holds; empty for a
    /// schedule one daemon owns.
    func instances(now: WallClockInstant) async throws(ScheduleStoreError) -> [InspectedInstance]
    /// What operators did through the scheduler's control commands (who ran, retried or
    /// cancelled what), newest first, at most `limit`.
    func operatorActions(limit: Int) async throws(ScheduleStoreError) -> [OperatorAction]
    /// Whether instances of a fleet share the schedule (``instances(now:)`` lists them).
    var isShared: Bool { get }
    /// Closes the inspector; later calls fail.
    func close()
}

extension ScheduleInspector {
    /// A schedule one daemon owns has no instances to list.
    public func instances(now: WallClockInstant) async throws(ScheduleStoreError) -> [InspectedInstance] { [] }

    /// A schedule one daemon owns.
    public var isShared: Bool { false }

    /// An inspector that cannot count tells no total.
    public func count(_ query: RequestQuery, upTo limit: Int) async throws(ScheduleStoreError) -> Int? { nil }

    /// An inspector that cannot count attempts tells no total.
    public func count(_ query: HistoryQuery, upTo limit: Int) async throws(ScheduleStoreError) -> Int? { nil }

    /// An inspector of a store that records no operators' actions has none to show.
    public func operatorActions(limit: Int) async throws(ScheduleStoreError) -> [OperatorAction] { [] }

    /// One ``history(_:)`` read: a full page has more beyond its far end, and one read from
    /// a position (``HistoryQuery/before``, ``HistoryQuery/after``) more at its near end.
    public func historyPage(_ query: HistoryQuery) async throws(ScheduleStoreError) -> HistoryPage {
        HistoryPage(records: try await history(query), of: query, stretchEnd: nil)
    }

    /// One ``history(_:)`` read for each identifier, for inspectors that have no better way.
    public func newestAttempts(of identifiers: [String]) async throws(ScheduleStoreError) -> [String: RunRecord] {
        var newest: [String: RunRecord] = [:]
        for identifier in Set(identifiers.prefix(Self.newestAttemptsLimit)) {
            var query = HistoryQuery(limit: 1)
            query.identifier = identifier
            if let record = try await history(query).first { newest[identifier] = record }
        }
        return newest
    }

    /// The identifiers one ``newestAttempts(of:)`` looks up, at most.
    @_spi(ScheduleStore) public static var newestAttemptsLimit: Int { 1_000 }
}

/// Which requests a ``ScheduleInspector`` lists.
public struct RequestQuery: Sendable, Hashable {
    /// Which states a query selects. A struct, so that selections can be added.
    public struct Selection: Sendable, Hashable, CustomStringConvertible {
        enum Kind: String, Hashable, CaseIterable {
            case pending, running, failed, cancelled, all
        }
        let kind: Kind
        /// Not finished: enqueued, blocked or running.
        public static let pending = Selection(kind: .pending)
        /// A run in progress.
        public static let running = Selection(kind: .running)
        /// Finished because its last run failed for good, or a prerequisite's failure or
        /// cancellation stopped it.
        public static let failed = Selection(kind: .failed)
        /// Cancelled, and kept until retention prunes it.
        public static let cancelled = Selection(kind: .cancelled)
        /// Every request the store keeps.
        public static let all = Selection(kind: .all)
        /// The selection named `name` (`pending`, `running`, `failed`, `cancelled`, `all`).
        public init?(named name: String) {
            guard let kind = Kind(rawValue: name) else { return nil }
            self.kind = kind
        }
        init(kind: Kind) { self.kind = kind }
        /// Its name.
        public var description: String { kind.rawValue }
    }

    /// Which states.
    public var selection: Selection
    /// Only identifiers that start with this text; `nil`: any.
    public var identifierPrefix: String?
    /// Only requests with this tag; `nil`: any.
    public var tag: String?
    /// Only requests whose identifier or one of whose tags holds this text, as written
    /// (case and all: its UTF-8 bytes); `nil`: any. No index answers it, so a page reads a
    /// bounded number of rows, as for a tag.
    public var search: String? {
        get { searchText }
        set { searchText = newValue.flatMap { $0.isEmpty ? nil : $0 } }
    }
    private var searchText: String?
    /// Only requests after this position (``InspectedRequest/position`` of the last one a
    /// page showed) in the query's order: the next page.
    public var after: Int64?
    /// Newest first: the requests submitted last come first, and ``after`` is a position
    /// the page's requests come before. `false` (the default): in the order submitted.
    /// With another ``order``: that order turned round (what a page before another reads).
    public var newestFirst = false
    /// What the requests are listed by: ``Order-swift.struct/submitted`` (the default),
    /// or their next run, attempts or last run, each in its own direction.
    public var order = Order.submitted
    /// With an ``order`` other than by submission: the value the request at ``after`` was
    /// sorted by (``RequestPage/nextKey``), so that a page starts after both; `nil`: the
    /// first page.
    public var afterKey: Int64?
    /// At most this many (1 to 1,000).
    public var limit: Int

    /// A query; `limit` is kept within 1 to 1,000.
    public init(
        selection: Selection = .pending, identifierPrefix: String? = nil, tag: String? = nil, after: Int64? = nil,
        limit: Int = 50
    ) {
        self.selection = selection
        self.identifierPrefix = identifierPrefix.flatMap { $0.isEmpty ? nil : $0 }
        self.tag = tag.flatMap { $0.isEmpty ? nil : $0 }
        self.after = after
        self.limit = min(max(limit, 1), 1000)
    }
}

extension RequestQuery {
    /// What a page of requests is listed by. The SQLite store keeps no index for the orders
    /// other than by submission (three cost its scheduler a fifth of its runs per second):
    /// it sorts the requests the filters select, but for the waiting and running ones with no
    /// other filter by next run, which it reads in its scheduler's own index of due requests
    /// (those waiting for a prerequisite as a page reaches them), and by attempts, which it
    /// reads in its index of those an attempt of which failed (schema version 23: a run that
    /// succeeds does not write it) and the rest in the order submitted — each with a pass over
    /// those running — and by last run, which it reads in its index of those that have started
    /// (schema version 24: a one-shot is in it only while it runs) and those never started in
    /// the order submitted. The PostgreSQL store reads the unfinished ones in an index per order, whose
    /// writes its fleet's runs absorb; it sorts those of the other states as selected. Each
    /// store sorts by one number per request, ascending, ties by position — its due time
    /// (none: the largest number), its attempt negated, its newest attempt's start negated
    /// (none: the largest number) — and ``RequestPage/nextKey`` is that number.
    public struct Order: Sendable, Hashable, CustomStringConvertible {
        enum Kind: String, Hashable, CaseIterable {
            case submitted
            case nextRun = "next-run"
            case attempts
            case lastRun = "last-run"
        }
        let kind: Kind
        /// In the order submitted (``RequestQuery/newestFirst`` says which way).
        public static let submitted = Order(kind: .submitted)
        /// The soonest next run first (the time the store plans it, due or not); those with
        /// none — running, finished, waiting for a prerequisite — last.
        public static let nextRun = Order(kind: .nextRun)
        /// The highest ``InspectedRequest/attempt`` first — the attempt in progress or the
        /// next one, so the requests retrying most come first; finished ones (0) last.
        public static let attempts = Order(kind: .attempts)
        /// The most recently started attempt first; those never run last.
        public static let lastRun = Order(kind: .lastRun)
        /// The order named `name` (`submitted`, `next-run`, `attempts`, `last-run`).
        public init?(named name: String) {
            guard let kind = Kind(rawValue: name) else { return nil }
            self.kind = kind
        }
        init(kind: Kind) { self.kind = kind }
        /// Its name.
        public var description: String { kind.rawValue }
    }
}

/// Which ended attempts a ``ScheduleInspector`` lists.
public struct HistoryQuery: Sendable, Hashable {
    /// Only this identifier's attempts (one request's history: a prefix would also take in
    /// `job-10` for `job-1`); `nil`: any.
    public var identifier: String?
    /// Only identifiers that start with this text; `nil`: any.
    public var identifierPrefix: String?
    /// Only attempts that ended so; `nil`: any.
    public var result: RunResult?
    /// Only attempts started at or after this time; `nil`: any.
    public var startedFrom: WallClockInstant?
    /// Only attempts started before this time; `nil`: any.
    public var startedBefore: WallClockInstant?
    /// Only attempts older than this one (the last a page showed): the next page.
    public var before: HistoryPosition?
    /// Only attempts newer than this one (the first a page showed): the page before. Without
    /// ``before``, the query reads up from it: the `limit` attempts just newer than it, still
    /// listed newest first. An inspector's ``ScheduleInspector/history(_:)`` reads it too.
    public var after: HistoryPosition?
    /// Whether the query reads up from the oldest attempt it selects (a list's last page)
    /// rather than down from the newest: the `limit` oldest, still listed newest first.
    public var fromOldest = false
    /// Only attempts whose identifier, stop reason or output holds this text, as written
    /// (case and all: its UTF-8 bytes); `nil`: any. No index answers it:
    /// ``ScheduleInspector/historyPage(_:)`` reads a bounded stretch of the history per page.
    public var search: String? {
        get { searchText }
        set { searchText = newValue.flatMap { $0.isEmpty ? nil : $0 } }
    }
    private var searchText: String?
    /// At most this many (1 to 1,000).
    public var limit: Int

    /// A query; `limit` is kept within 1 to 1,000.
    public init(
        identifierPrefix: String? = nil, result: RunResult? = nil, startedFrom: WallClockInstant? = nil,
        startedBefore: WallClockInstant? = nil, before: HistoryPosition? = nil, limit: Int = 50
    ) {
        self.identifierPrefix = identifierPrefix.flatMap { $0.isEmpty ? nil : $0 }
        self.result = result
        self.startedFrom = startedFrom
        self.startedBefore = startedBefore
        self.before = before
        self.limit = min(max(limit, 1), 1000)
    }
}

extension RequestQuery {
    /// Whether `request`'s identifier or one of its tags holds the search text (``search``),
    /// byte for byte: what a store's query checks, for stores that check in the program.
    @_spi(ScheduleStore) public func searchMatches(_ request: ScheduledTaskRequest) -> Bool {
        guard let search else { return true }
        let text = Array(search.utf8)
        return request.identifier.utf8.holds(text) || request.tags.contains { $0.utf8.holds(text) }
    }
}

/// A page of requests.
public struct RequestPage: Sendable, Hashable {
    /// The requests, in the store's order.
    public let requests: [InspectedRequest]
    /// Where the next page starts (``RequestQuery/after``); `nil` when the selection ends here.
    public let next: Int64?
    /// With an order other than by submission, the value the request at ``next`` was sorted
    /// by (``RequestQuery/afterKey``); `nil` otherwise.
    public let nextKey: Int64?

    /// A page; for stores outside this module.
    public init(requests: [InspectedRequest], next: Int64?, nextKey: Int64? = nil) {
        self.requests = requests
        self.next = next
        self.nextKey = next == nil ? nil : nextKey
    }
}

extension RequestPage {
    /// How many requests `query` selects, counted up to `limit` by reading its pages (`read`:
    /// the inspector's ``ScheduleInspector/requests(_:now:)``) in the order submitted: for
    /// a selection whose rows must each be read to be told, as those that failed for good.
    /// `nil` when a page stopped at its bound of rows read before the list ended: how many
    /// lie beyond is not known.
    @_spi(ScheduleStore) public static func counted(
        _ query: RequestQuery, upTo limit: Int,
        reading read: (RequestQuery) async throws(ScheduleStoreError) -> RequestPage
    ) async throws(ScheduleStoreError) -> Int? {
        var reading = query
        reading.order = .submitted
        reading.newestFirst = false
        reading.after = nil
        reading.afterKey = nil
        var counted = 0
        while counted < limit {
            reading.limit = min(limit - counted, 1000)
            let page = try await read(reading)
            counted += page.requests.count
            guard let next = page.next else { return counted }
            if page.requests.count < reading.limit { return nil }
            reading.after = next
        }
        return counted
    }

    /// A page being read batch by batch, for store implementations: read at most ``batch``
    /// rows after ``after`` (and ``afterKey``), hand them to ``visit(_:sortKey:)`` in order
    /// while it says go on, then ``batchEnded(rows:)`` returns the page, or `nil` to read
    /// another batch. Selections no index answers (failed for good, a tag, a search) are
    /// checked here, reading on — at most `rowsReadPerPage` rows — until the page is full.
    ///
    /// A tag or a search is checked by the store's query too, which then skips rows it
    /// does not hand: such a page first finds where its ``stretch`` ends, in the query's
    /// order without the tag and the search (``stretchEnds(at:sortKey:)``), and reads no
    /// row past it, so that text no request holds costs a stretch, not every request.
    @_spi(ScheduleStore) public struct Reading: Sendable {
        private let query: RequestQuery
        private let rowsReadPerPage: Int
        /// How many rows to read at most in each batch.
        public let batch: Int
        /// With a tag or a search, how many rows the page may pass over at most, in the
        /// query's order with the other filters: the store finds the last of them first
        /// (``stretchEnds(at:sortKey:)``), reading none beyond; `nil` otherwise.
        public let stretch: Int?
        private var stretchEnd: (position: Int64, key: Int64?)?
        /// Where the next batch starts (after this position).
        public private(set) var after: Int64?
        /// With an order other than by submission, the value the row at ``after`` was
        /// sorted by.
        public private(set) var afterKey: Int64?
        private var found: [InspectedRequest] = []
        private var total = 0

        /// Reading `query`'s page, at most `rowsReadPerPage` rows.
        public init(_ query: RequestQuery, rowsReadPerPage: Int) {
            self.query = query
            self.rowsReadPerPage = rowsReadPerPage
            // Failed requests are told from succeeded ones by their newest attempt, and a tag's
            // pattern may turn up in an input: such rows are read in larger batches.
            let checked = query.selection == .failed || query.tag != nil || query.search != nil
            batch = checked ? min(max(query.limit, 500), rowsReadPerPage) : query.limit
            stretch = query.tag != nil || query.search != nil ? max(1, rowsReadPerPage) : nil
            // In another order, a position without the value it was sorted by starts nowhere
            // in particular: the first page.
            let sorted = query.order != .submitted
            after = sorted && query.afterKey == nil ? nil : query.after
            afterKey = sorted && after != nil ? query.afterKey : nil
        }

        /// Takes the next row, which was sorted by `sortKey` (any value when by
        /// submission); returns whether to go on (the page is not full).
        public mutating func visit(_ inspected: InspectedRequest, sortKey: Int64 = 0) -> Bool {
            after = inspected.position
            if query.order != .submitted { afterKey = sortKey }
            let selected =
                query.tag.map { inspected.request.tags.contains($0) } ?? true
                && (query.selection != .failed || inspected.state == .failed)
                && query.searchMatches(inspected.request)
            if selected { found.append(inspected) }
            return found.count < query.limit
        }

        /// The ``stretch`` ends at the row at `position`, sorted by `sortKey` (any value when
        /// by submission): the store reads no row past it, and a page that does not fill
        /// before it goes on after it. Not called when fewer rows than the stretch remain.
        public mutating func stretchEnds(at position: Int64, sortKey: Int64 = 0) {
            stretchEnd = (position, query.order == .submitted ? nil : sortKey)
        }

        /// The batch ended after `rows` rows were visited: the page, or `nil` to read on.
        public mutating func batchEnded(rows: Int) -> RequestPage? {
            total += rows
            if rows < batch && found.count < query.limit {
                return RequestPage(requests: found, next: stretchEnd?.position, nextKey: stretchEnd?.key)
            }
            if found.count >= query.limit || total >= rowsReadPerPage {
                return RequestPage(requests: found, next: after, nextKey: afterKey)
            }
            return nil
        }
    }
}

/// A page of history.
public struct HistoryPage: Sendable, Hashable {
    /// The attempts, newest first.
    public let records: [RunRecord]
    /// Where the next page starts (``HistoryQuery/before``); `nil` when the history ends here.
    public let next: HistoryPosition?
    /// Where the page before starts (``HistoryQuery/after``): newer attempts may come before
    /// this page; `nil` when none can (the first page).
    public let previous: HistoryPosition?

    /// A page; for stores outside this module.
    public init(records: [RunRecord], next: HistoryPosition?, previous: HistoryPosition? = nil) {
        self.records = records
        self.next = next
        self.previous = previous
    }

    /// The page of `query` that holds `records` (newest first), read as `query` says
    /// (``HistoryQuery/readsUp``): a full page has more beyond its far end; short of one,
    /// the far end is `stretchEnd`, where a read of a bounded stretch (a search) stopped, if
    /// it stopped short of the history's end. The near end has more when the read began at a
    /// position.
    @_spi(ScheduleStore) public init(records: [RunRecord], of query: HistoryQuery, stretchEnd: HistoryPosition?) {
        let full = records.count == query.limit
        if query.readsUp {
            previous = full ? records.first.map(HistoryPosition.init) : stretchEnd
            // Read from `after`, that one and those older than it remain.
            next = query.after.flatMap { after in records.last.map(HistoryPosition.init) ?? after.justNewer }
        } else {
            next = full ? records.last.map(HistoryPosition.init) : stretchEnd
            previous = query.before.flatMap { before in records.first.map(HistoryPosition.init) ?? before.justOlder }
        }
        self.records = records
    }
}

extension HistoryQuery {
    /// Whether the query reads up, from ``after`` or the oldest attempt, rather than down
    /// from ``before`` or the newest: a store reads its attempts oldest first, and turns the
    /// page round.
    public var readsUp: Bool { fromOldest || (after != nil && before == nil) }

    /// Whether `record` holds the search text (``search``) in its identifier, stop reason or
    /// output, byte for byte: what a store's query checks, for stores that check in the program.
    @_spi(ScheduleStore) public func searchMatches(_ record: RunRecord) -> Bool {
        guard let search else { return true }
        let text = Array(search.utf8)
        return record.identifier.utf8.holds(text) || (record.stopReason?.utf8.holds(text) ?? false)
            || (record.output?.holds(text) ?? false)
    }
}

extension Collection where Element == UInt8 {
    /// Whether `bytes` occur in these, one after another.
    func holds(_ bytes: [UInt8]) -> Bool {
        guard !bytes.isEmpty else { return true }
        guard count >= bytes.count else { return false }
        var start = startIndex
        while distance(from: start, to: endIndex) >= bytes.count {
            if self[start...].starts(with: bytes) { return true }
            start = index(after: start)
        }
        return false
    }
}

/// Where a page of history ended: its last attempt's run and attempt.
public struct HistoryPosition: Sendable, Hashable {
    /// The run's ID.
    public var runID: Int64
    /// The attempt.
    public var attempt: Int

    /// The position of `runID`'s `attempt`.
    public init(runID: Int64, attempt: Int) {
        self.runID = runID
        self.attempt = attempt
    }

    /// The position of `record`.
    public init(_ record: RunRecord) { self.init(runID: record.runID, attempt: record.attempt) }

    /// The position just older than this one: a read of what is newer takes this one in.
    /// `nil` at the end of the range.
    var justOlder: HistoryPosition? {
        attempt > .min ? HistoryPosition(runID: runID, attempt: attempt - 1) : nil
    }

    /// The position just newer than this one: a read of what is older takes this one in.
    /// `nil` at the end of the range.
    var justNewer: HistoryPosition? {
        attempt < .max ? HistoryPosition(runID: runID, attempt: attempt + 1) : nil
    }
}

/// One request as an inspector reads it: the request, its state, and what it waits for.
public struct InspectedRequest: Sendable, Hashable {
    /// The request.
    public let request: ScheduledTaskRequest
    /// Its state: enqueued, blocked, running, or finished (succeeded, failed, cancelled).
    public let state: WorkInfo.State
    /// When it was submitted.
    public let submittedAt: WallClockInstant
    /// What it waits for; `nil` when running or finished.
    public let waitingFor: ScheduleWait?
    /// The attempt that runs next, or the one in progress; when finished, 0.
    public let attempt: Int
    /// The attempt in progress; `nil` when none is.
    public let running: RunningAttempt?
    /// When it was cancelled; `nil` unless it was.
    public let cancelledAt: WallClockInstant?
    /// The prerequisite whose failure or cancellation stopped it; `nil` otherwise.
    public let stoppedBy: String?
    /// Where it stands in the store's order: ``RequestQuery/after`` for the next page.
    public let position: Int64
    /// When its newest attempt started (the one in progress, if any); `nil` before its first,
    /// or in a store written before it kept this.
    public let lastRunAt: WallClockInstant?
}

/// An attempt in progress, as the store records it.
public struct RunningAttempt: Sendable, Hashable {
    /// The run's ID.
    public let runID: Int64
    /// The attempt.
    public let attempt: Int
    /// When it started.
    public let startedAt: WallClockInstant
    /// When its grant ends at the latest: its start plus the request's maximum duration.
    public let deadline: WallClockInstant
    /// In a fleet: the instance that holds it; `nil` otherwise.
    public let holder: String?
    /// The progress its handler reported last (``ScheduledTask/setProgress(_:message:)``), as
    /// the store recorded it — at most a second behind; `nil` before the first report.
    public let progress: RunProgress?

    /// An attempt whose grant ends `deadline` at the latest: for store implementations.
    @_spi(ScheduleStore) public init(
        runID: Int64, attempt: Int, startedAt: WallClockInstant, deadline: WallClockInstant, holder: String?,
        progress: RunProgress? = nil
    ) {
        self.runID = runID
        self.attempt = attempt
        self.startedAt = startedAt
        self.deadline = deadline
        self.holder = holder
        self.progress = progress
    }
}

/// An instance of a fleet, as the shared store sees it.
public struct InspectedInstance: Sendable, Hashable {
    /// Its name (`host:pid`, after the instance name when one is configured).
    public let name: String
    /// How many runs it holds now.
    public let claims: Int
    /// The latest time its claims run to (renewed while it lives); `nil` when it holds none.
    public let claimsUntil: WallClockInstant?
    /// Its connections to the database.
    public let connections: Int
    /// When it was last heard from (its newest connection's last activity).
    public let lastSeen: WallClockInstant?
    /// Its own requests (scoped to the instance) not yet finished: what retiring it removes.
    public let requests: Int

    /// An instance; for stores outside this module.
    public init(
        name: String, claims: Int, claimsUntil: WallClockInstant?, connections: Int, lastSeen: WallClockInstant?,
        requests: Int = 0
    ) {
        self.name = name
        self.claims = claims
        self.claimsUntil = claimsUntil
        self.connections = connections
        self.lastSeen = lastSeen
        self.requests = requests
    }
}
