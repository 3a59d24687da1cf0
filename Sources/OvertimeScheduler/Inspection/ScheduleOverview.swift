// A schedule at a glance: how many requests stand in each state, which handler the
// unfinished ones wait for, how many attempts ran and failed in each minute of the last hour
// and how late that hour's runs started. What a dashboard's first page shows; each store
// counts it in a few statements.

import Overtime

/// A schedule at a glance, as ``ScheduleInspector/overview(now:)`` counts it at one moment.
public struct ScheduleOverview: Sendable, Hashable {
    /// Not finished and not running: enqueued, or blocked (by a requirement, a
    /// prerequisite, the concurrency limit).
    public let waiting: Int
    /// Of ``waiting``, those whose last attempt failed and that will be tried again.
    public let retrying: Int
    /// With an attempt in progress.
    public let running: Int
    /// Finished because they failed for good: their last attempt failed with no retry left,
    /// or a prerequisite's failure or cancellation stopped them.
    public let failed: Int
    /// Cancelled, and kept until retention prunes them.
    public let cancelled: Int
    /// Finished otherwise (their last attempt succeeded), kept until retention prunes them.
    public let succeeded: Int
    /// The unfinished requests by the handler that runs them, most first; the requests no
    /// registered handler serves have a row of their own (``HandlerLoad/handler`` `nil`).
    /// Empty for a schedule whose programs recorded no handlers.
    public let handlers: [HandlerLoad]
    /// The unfinished requests by tag, most first, then by tag: a request with several tags
    /// counts in each. Empty when no unfinished request has a tag.
    public let tags: [TagLoad]
    /// The attempts that ended, by the minute they started in, over the hour before the
    /// overview was read: ``minutesCounted`` minutes, oldest first.
    public let minutes: [MinuteActivity]
    /// How late the runs that started in the same hour started; `nil` when none did (or the
    /// store does not count it).
    public let lateness: StartLateness?

    /// The minutes ``minutes`` covers.
    public static let minutesCounted = 60

    /// An overview; for stores outside this module.
    public init(
        waiting: Int, retrying: Int, running: Int, failed: Int, cancelled: Int, succeeded: Int,
        handlers: [HandlerLoad], tags: [TagLoad] = [], minutes: [MinuteActivity], lateness: StartLateness? = nil
    ) {
        self.waiting = waiting
        self.retrying = retrying
        self.running = running
        self.failed = failed
        self.cancelled = cancelled
        self.succeeded = succeeded
        self.handlers = handlers
        self.tags = tags
        self.minutes = minutes
        self.lateness = lateness
    }
}

/// The unfinished requests with one tag (a row of ``ScheduleOverview/tags``).
public struct TagLoad: Sendable, Hashable {
    /// The tag.
    public let tag: String
    /// Not running: enqueued or blocked.
    public let waiting: Int
    /// With an attempt in progress.
    public let running: Int

    /// A row; for stores outside this module.
    public init(tag: String, waiting: Int, running: Int) {
        self.tag = tag
        self.waiting = waiting
        self.running = running
    }
}

/// The unfinished requests one handler runs (a row of ``ScheduleOverview/handlers``).
public struct HandlerLoad: Sendable, Hashable {
    /// The identifier or prefix the handler was registered for; `nil` for the requests no
    /// registered handler serves (they never run until one is).
    public let handler: String?
    /// Whether ``handler`` is a prefix (``Scheduler/register(prefix:handler:)``).
    public let isPrefix: Bool
    /// Not running: enqueued or blocked.
    public let waiting: Int
    /// With an attempt in progress.
    public let running: Int

    /// A row; for stores outside this module.
    public init(handler: String?, isPrefix: Bool, waiting: Int, running: Int) {
        self.handler = handler
        self.isPrefix = isPrefix
        self.waiting = waiting
        self.running = running
    }
}

/// The attempts that started in one minute and have ended (a row of ``ScheduleOverview/minutes``).
public struct MinuteActivity: Sendable, Hashable {
    /// When the minute began.
    public let start: WallClockInstant
    /// The attempts that started in it and ended, however they ended.
    public let ended: Int
    /// Of those, the ones that failed, expired or were terminated.
    public let failed: Int

    /// A minute's row; for stores outside this module.
    public init(start: WallClockInstant, ended: Int, failed: Int) {
        self.start = start
        self.ended = ended
        self.failed = failed
    }
}

extension ScheduleOverview {
    /// Where the hour an overview read at `now` counts begins: the start of the minute
    /// ``minutesCounted`` - 1 minutes before `now`'s (minutes of the epoch, so every store
    /// and every read at the same moment agree).
    @_spi(ScheduleStore) public static func firstMinute(before now: WallClockInstant) -> Int64 {
        let minute = Int64(60_000_000_000)
        let current =
            now.nanosecondsSinceEpoch >= 0
            ? now.nanosecondsSinceEpoch / minute : (now.nanosecondsSinceEpoch - minute + 1) / minute
        return (current - Int64(minutesCounted - 1)) * minute
    }

    /// Where the minutes from `first` (``firstMinute(before:)``) end.
    @_spi(ScheduleStore) public static func minutesEnd(from first: Int64) -> Int64 {
        first + Int64(minutesCounted) * 60_000_000_000
    }

    /// The minutes from `first` (``firstMinute(before:)``), given the attempts counted for
    /// each minute's index (0 the first; others are left out), every minute present.
    @_spi(ScheduleStore) public static func minutes(
        from first: Int64, counted: [Int64: (ended: Int, failed: Int)]
    ) -> [MinuteActivity] {
        (0..<Int64(minutesCounted)).map { index in
            let found = counted[index] ?? (0, 0)
            return MinuteActivity(
                start: WallClockInstant(nanosecondsSinceEpoch: first + index * 60_000_000_000), ended: found.ended,
                failed: found.failed)
        }
    }

    /// The tag rows for `counts` by tag, most requests first, then by tag.
    @_spi(ScheduleStore) public static func tagRows(_ counts: [String: (waiting: Int, running: Int)]) -> [TagLoad] {
        counts.map { TagLoad(tag: $0.key, waiting: $0.value.waiting, running: $0.value.running) }.sorted {
            ($0.waiting + $0.running, $1.tag) > ($1.waiting + $1.running, $0.tag)
        }
    }

    /// The handler rows for `counts` by the handler found for each request
    /// (``HandlerMatch``), most requests first, then by name; the unserved row last.
    @_spi(ScheduleStore) public static func handlerRows(
        _ counts: [HandlerMatch.Found: (waiting: Int, running: Int)], recorded: Bool
    ) -> [HandlerLoad] {
        guard recorded else { return [] }
        return counts.filter { $0.value.waiting + $0.value.running > 0 }.map { found, count in
            HandlerLoad(handler: found.name, isPrefix: found.isPrefix, waiting: count.waiting, running: count.running)
        }.sorted { a, b in
            if (a.handler == nil) != (b.handler == nil) { return b.handler == nil }
            if a.waiting + a.running != b.waiting + b.running { return a.waiting + a.running > b.waiting + b.running }
            return (a.handler ?? "") < (b.handler ?? "")
        }
    }

    /// Whether an attempt that ended so counts as failed in ``MinuteActivity/failed``.
    @_spi(ScheduleStore) public static func isFailure(_ result: RunResult) -> Bool { result.isFailure }

    /// The results ``isFailure(_:)`` counts, as stores keep them.
    @_spi(ScheduleStore) public static let failureResults = [RunResult.failed, .expired, .terminated].map(\.description)
}

/// Which registered handler serves a request, as an overview groups them: the handler of
/// its exact identifier, else that of the first prefix registered it starts with (as the
/// scheduler picks), else none.
@_spi(ScheduleStore) public struct HandlerMatch: Sendable {
    /// A handler found for a request.
    public struct Found: Sendable, Hashable {
        /// The identifier or prefix; `nil`: none serves it.
        public let name: String?
        /// Whether ``name`` is a prefix.
        public let isPrefix: Bool

        /// No handler.
        public static let none = Found(name: nil, isPrefix: false)

        /// A handler's row key.
        public init(name: String?, isPrefix: Bool) {
            self.name = name
            self.isPrefix = isPrefix
        }
    }

    /// The identifiers registered on their own, in the order compared.
    public let identifiers: [String]
    /// The prefixes registered, in the order recorded (a fleet's: each instance's in turn).
    public let prefixes: [String]
    /// Whether any program recorded its handlers.
    public let recorded: Bool

    /// The handlers every program of `recorded` registered.
    public init(_ recorded: [RegisteredHandlers]) {
        identifiers = Array(Set(recorded.flatMap(\.identifiers))).sorted()
        var seen: Set<String> = []
        prefixes = recorded.flatMap(\.prefixes).filter { seen.insert($0).inserted }
        self.recorded = !recorded.isEmpty
    }

    /// The handler that serves `identifier`.
    public func handler(of identifier: String) -> Found {
        if identifiers.contains(identifier) { return Found(name: identifier, isPrefix: false) }
        // Byte by byte, as the stores compare a prefix (and the pages' prefix filters).
        if let prefix = prefixes.first(where: { identifier.utf8.starts(with: $0.utf8) }) {
            return Found(name: prefix, isPrefix: true)
        }
        return .none
    }

    /// What the prefix at `index` of ``prefixes`` serves: the identifiers from it up to
    /// ``rangeEnd(of:)`` but those in `registered` (identifiers in its range registered on
    /// their own) and those in the ranges of `overlapping` (earlier prefixes that overlap
    /// it, one starting with the other: the scheduler picks the first registered). Compared
    /// byte by byte, as ``handler(of:)`` does; a store counts a prefix's requests by it.
    public func share(ofPrefixAt index: Int) -> (registered: [String], overlapping: [String]) {
        let prefix = prefixes[index]
        return (
            identifiers.filter { $0.utf8.starts(with: prefix.utf8) },
            prefixes[..<index].filter { $0.utf8.starts(with: prefix.utf8) || prefix.utf8.starts(with: $0.utf8) }
        )
    }

    /// The key a store's query gives a request's row: `i` and the identifier, `p` and the
    /// prefix, or `-` for none.
    public static func key(_ found: Found) -> String {
        guard let name = found.name else { return "-" }
        return (found.isPrefix ? "p" : "i") + name
    }

    /// The smallest text after every text that starts with `prefix`, compared byte by byte
    /// (no UTF-8 sequence starts with a byte above U+10FFFF's first): the identifiers a
    /// prefix's handler serves are the keys from `prefix` up to it, which both stores' indexes
    /// read as a range.
    public static func rangeEnd(of prefix: String) -> String { prefix + "\u{10FFFF}\u{10FFFF}" }

    /// The handler a key of ``key(_:)`` names.
    public static func found(key: String) -> Found {
        guard let kind = key.first, kind != "-" else { return .none }
        return Found(name: String(key.dropFirst()), isPrefix: kind == "p")
    }
}

extension ScheduleInspector {
    /// The overview counted from pages of ``requests(_:now:)`` and of ``history(_:)``, for
    /// inspectors that have no better way: every request and every attempt of the last hour
    /// is read. Its ``ScheduleOverview/handlers`` is empty (the pages do not say which
    /// handlers were registered).
    public func overview(now: WallClockInstant) async throws(ScheduleStoreError) -> ScheduleOverview {
        var waiting = 0
        var retrying = 0
        var running = 0
        var failed = 0
        var cancelled = 0
        var succeeded = 0
        var byTag: [String: (waiting: Int, running: Int)] = [:]
        var query = RequestQuery(selection: .all, limit: 1000)
        while true {
            let page = try await requests(query, now: now)
            for inspected in page.requests {
                switch inspected.state.kind {
                case .running:
                    running += 1
                    for tag in inspected.request.tags { byTag[tag, default: (0, 0)].running += 1 }
                case .succeeded: succeeded += 1
                case .failed: failed += 1
                case .cancelled: cancelled += 1
                case .enqueued, .blocked:
                    waiting += 1
                    if inspected.attempt > 1 { retrying += 1 }
                    for tag in inspected.request.tags { byTag[tag, default: (0, 0)].waiting += 1 }
                }
            }
            guard let next = page.next else { break }
            query.after = next
        }
        let first = ScheduleOverview.firstMinute(before: now)
        var counted: [Int64: (ended: Int, failed: Int)] = [:]
        var history = HistoryQuery(
            startedFrom: WallClockInstant(nanosecondsSinceEpoch: first),
            startedBefore: WallClockInstant(nanosecondsSinceEpoch: ScheduleOverview.minutesEnd(from: first)),
            limit: 1000)
        while true {
            let records = try await self.history(history)
            for record in records {
                let index = (record.startedAt.nanosecondsSinceEpoch - first) / 60_000_000_000
                counted[index, default: (0, 0)].ended += 1
                if ScheduleOverview.isFailure(record.result) { counted[index, default: (0, 0)].failed += 1 }
            }
            guard records.count == history.limit, let last = records.last else { break }
            history.before = HistoryPosition(last)
        }
        return ScheduleOverview(
            waiting: waiting, retrying: retrying, running: running, failed: failed, cancelled: cancelled,
            succeeded: succeeded, handlers: [], tags: ScheduleOverview.tagRows(byTag),
            minutes: ScheduleOverview.minutes(from: first, counted: counted))
    }
}
