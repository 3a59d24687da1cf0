// A stored request as the plain column values every store writes and reads back.

import Overtime

/// A ``StoredRequest`` as plain column values (integers, text, flags), the one mapping
/// every store uses: times are nanoseconds since 1970 on the wall clock, durations
/// nanoseconds, policies and requirements their words.
@_spi(ScheduleStore) public struct RequestColumns: Sendable, Hashable {
    /// `identifier`.
    public var identifier: String
    /// `earliest_begin`.
    public var earliestBegin: Int64?
    /// `interval_ns`: `nil` for a one-shot request.
    public var intervalNanoseconds: Int64?
    /// `flex_ns`.
    public var flexNanoseconds: Int64?
    /// `catch_up`: `once`, `every` or `none`.
    public var catchUp: String
    /// `catch_up_maximum`.
    public var catchUpMaximum: Int
    /// `randomized_delay_ns`.
    public var randomizedDelayNanoseconds: Int64
    /// `maximum_duration_ns`.
    public var maximumDurationNanoseconds: Int64
    /// `backoff`: `linear` or `exponential`.
    public var backoff: String
    /// `initial_delay_ns`.
    public var initialDelayNanoseconds: Int64
    /// `maximum_delay_ns`.
    public var maximumDelayNanoseconds: Int64
    /// `maximum_attempts`.
    public var maximumAttempts: Int
    /// `requirements`: their names, comma-separated, sorted.
    public var requirements: String
    /// `anchor`.
    public var anchor: Int64
    /// `owed`.
    public var owed: Int
    /// `retry_at`.
    public var retryAt: Int64?
    /// `failed_attempts`.
    public var failedAttempts: Int
    /// `finished`.
    public var finished: Bool
    /// `submitted_at`.
    public var submittedAt: Int64
    /// `current_run_id`.
    public var currentRunID: Int64?
    /// `running`.
    public var running: Bool
    /// `scope`: `shared` or `perInstance`.
    public var scope: String
    /// `planned_at`: the planned time of the run in progress or being retried.
    public var plannedAt: Int64?
    /// `calendar`: a calendar repetition's expression (`interval_ns` is then 0).
    public var calendar: String?
    /// `grid_offset_ns`: a calendar repetition's randomized delay, drawn at submission.
    public var gridOffsetNanoseconds: Int64
    /// `input`: the bytes handed to each run.
    public var input: [UInt8]
    /// `tags`: sorted, each between commas (`,nightly,reports,`), empty without tags, so
    /// that a store finds a tag as `,tag,` in it.
    public var tags: String

    /// `wakes_system`: whether its runs wake the system.
    public var wakesSystem: Bool
    /// `cancelled_at`: when the request was cancelled (``RequestWrite/cancel(_:at:)``).
    public var cancelledAt: Int64?
    /// `prerequisites`: the request's prerequisites, one per line (an identifier holds no
    /// control character), sorted; empty without.
    public var prerequisites: String
    /// `chain`: ``ChainState/packed`` for a request with prerequisites, else `nil`.
    public var chain: [UInt8]?

    /// `previous_window_at`, where a calendar repetition's previous planned time's window
    /// opened, which stores look at to find the plans a wall clock set back leaves ahead
    /// (``ScheduleStore/plannedAheadOfClock(_:)``; an interval's is found by arithmetic);
    /// `nil` for other requests. Written, never read back.
    public var previousWindowAt: Int64?

    /// `due_at`, when the next run may start (`nil`: nothing more runs), which stores
    /// index. Written, never read back (`nil` in columns read back).
    public var dueAt: Int64?
    /// `requirement_mask`, one bit per requirement, so that a store selects the requests
    /// whose requirements hold with one `&`. Written, never read back (0 in columns read back).
    public var requirementMask: Int64

    /// The columns of `stored`.
    public init(_ stored: StoredRequest) {
        let request = stored.request
        let plan = stored.plan
        identifier = request.identifier
        earliestBegin = request.earliestBegin?.nanosecondsSinceEpoch
        intervalNanoseconds = request.repetition.map { $0.interval.saturatingNanoseconds }
        flexNanoseconds = request.repetition.map { $0.flex.saturatingNanoseconds }
        switch request.catchUp.kind {
        case .once: (catchUp, catchUpMaximum) = ("once", 1)
        case .every(let maximum): (catchUp, catchUpMaximum) = ("every", maximum)
        case .none: (catchUp, catchUpMaximum) = ("none", 0)
        }
        randomizedDelayNanoseconds = request.randomizedDelay.saturatingNanoseconds
        maximumDurationNanoseconds = request.maximumDuration.saturatingNanoseconds
        backoff = request.retry.backoff.description
        initialDelayNanoseconds = request.retry.initialDelay.saturatingNanoseconds
        maximumDelayNanoseconds = request.retry.maximumDelay.saturatingNanoseconds
        maximumAttempts = request.retry.maximumAttempts
        requirements = request.requirements.sorted().map(\.description).joined(separator: ",")
        anchor = plan.anchor.nanosecondsSinceEpoch
        owed = plan.owed
        retryAt = plan.retryAt?.nanosecondsSinceEpoch
        failedAttempts = plan.failedAttempts
        finished = plan.isFinished
        submittedAt = stored.submittedAt.nanosecondsSinceEpoch
        currentRunID = stored.currentRunID
        running = stored.isRunning
        scope = request.scope.description
        plannedAt = plan.plannedTime?.nanosecondsSinceEpoch
        calendar = request.repetition?.calendar?.expression
        gridOffsetNanoseconds = plan.gridOffset.saturatingNanoseconds
        tags = Self.tagsColumn(request.tags)
        input = request.input
        cancelledAt = stored.cancelledAt?.nanosecondsSinceEpoch
        wakesSystem = request.wakesSystem
        let prerequisites = request.prerequisites
        self.prerequisites = prerequisites.isEmpty ? "" : prerequisites.sorted().joined(separator: "\n")
        chain = stored.chain?.packed
        previousWindowAt =
            request.repetition?.calendar == nil
            ? nil : SchedulePlanner.previousWindowStart(plan, request)?.nanosecondsSinceEpoch
        dueAt = stored.nextStart?.nanosecondsSinceEpoch
        requirementMask = request.requirements.mask
    }

    /// Columns read back from a store.
    public init(
        identifier: String, earliestBegin: Int64?, intervalNanoseconds: Int64?, flexNanoseconds: Int64?,
        catchUp: String, catchUpMaximum: Int, randomizedDelayNanoseconds: Int64, maximumDurationNanoseconds: Int64,
        backoff: String, initialDelayNanoseconds: Int64, maximumDelayNanoseconds: Int64, maximumAttempts: Int,
        requirements: String, anchor: Int64, owed: Int, retryAt: Int64?, failedAttempts: Int, finished: Bool,
        submittedAt: Int64, currentRunID: Int64?, running: Bool, scope: String, plannedAt: Int64? = nil,
        calendar: String? = nil, gridOffsetNanoseconds: Int64 = 0, tags: String = "", input: [UInt8] = [],
        cancelledAt: Int64? = nil, prerequisites: String = "", chain: [UInt8]? = nil, wakesSystem: Bool = false
    ) {
        self.wakesSystem = wakesSystem
        self.prerequisites = prerequisites
        self.chain = chain
        self.cancelledAt = cancelledAt
        self.input = input
        self.tags = tags
        self.calendar = calendar
        self.gridOffsetNanoseconds = gridOffsetNanoseconds
        previousWindowAt = nil
        self.identifier = identifier
        self.earliestBegin = earliestBegin
        self.intervalNanoseconds = intervalNanoseconds
        self.flexNanoseconds = flexNanoseconds
        self.catchUp = catchUp
        self.catchUpMaximum = catchUpMaximum
        self.randomizedDelayNanoseconds = randomizedDelayNanoseconds
        self.maximumDurationNanoseconds = maximumDurationNanoseconds
        self.backoff = backoff
        self.initialDelayNanoseconds = initialDelayNanoseconds
        self.maximumDelayNanoseconds = maximumDelayNanoseconds
        self.maximumAttempts = maximumAttempts
        self.requirements = requirements
        self.anchor = anchor
        self.owed = owed
        self.retryAt = retryAt
        self.failedAttempts = failedAttempts
        self.finished = finished
        self.submittedAt = submittedAt
        self.currentRunID = currentRunID
        self.running = running
        self.scope = scope
        self.plannedAt = plannedAt
        dueAt = nil
        requirementMask = 0
    }

    /// `tags` as the column holds them.
    public static func tagsColumn(_ tags: Set<String>) -> String {
        tags.isEmpty ? "" : "," + tags.sorted().joined(separator: ",") + ","
    }

    /// What a store looks for in the `tags` column to find `tag`.
    public static func tagPattern(_ tag: String) -> String { "," + tag + "," }

    /// The stored request these columns hold; `rowID` is the store's own key for the row.
    public func stored(rowID: Int64?) -> StoredRequest {
        var request = ScheduledTaskRequest(identifier: identifier)
        request.earliestBegin = earliestBegin.map(WallClockInstant.init(nanosecondsSinceEpoch:))
        if let calendar {
            request.repetition = Repetition(
                on: CalendarSchedule(storedExpression: calendar), flex: .nanoseconds(flexNanoseconds ?? 0))
        } else if let intervalNanoseconds {
            request.repetition = Repetition(
                every: .nanoseconds(intervalNanoseconds), flex: .nanoseconds(flexNanoseconds ?? 0))
        }
        switch catchUp {
        case "every": request.catchUp = .every(maximum: catchUpMaximum)
        case "none": request.catchUp = .none
        default: request.catchUp = .once
        }
        request.randomizedDelay = .nanoseconds(randomizedDelayNanoseconds)
        request.maximumDuration = .nanoseconds(maximumDurationNanoseconds)
        request.retry.backoff = backoff == "linear" ? .linear : .exponential
        request.retry.initialDelay = .nanoseconds(initialDelayNanoseconds)
        request.retry.maximumDelay = .nanoseconds(maximumDelayNanoseconds)
        request.retry.maximumAttempts = maximumAttempts
        if !requirements.isEmpty {
            request.requirements = Set(requirements.split(separator: ",").compactMap { Requirement(named: String($0)) })
        }
        request.scope = scope == "perInstance" ? .perInstance : .shared
        if !tags.isEmpty { request.tags = Set(tags.split(separator: ",").map(String.init)) }
        if !input.isEmpty { request.input = input }
        request.wakesSystem = wakesSystem
        if !prerequisites.isEmpty {
            request.prerequisites = Set(
                prerequisites.split(separator: "\n", omittingEmptySubsequences: true).map(String.init))
        }
        let plan = PlanState(
            anchor: WallClockInstant(nanosecondsSinceEpoch: anchor), owed: owed,
            retryAt: retryAt.map(WallClockInstant.init(nanosecondsSinceEpoch:)), failedAttempts: failedAttempts,
            isFinished: finished, plannedTime: plannedAt.map(WallClockInstant.init(nanosecondsSinceEpoch:)),
            gridOffset: .nanoseconds(gridOffsetNanoseconds))
        return StoredRequest(
            request: request, plan: plan, submittedAt: WallClockInstant(nanosecondsSinceEpoch: submittedAt),
            currentRunID: currentRunID, isRunning: running, rowID: rowID,
            cancelledAt: cancelledAt.map(WallClockInstant.init(nanosecondsSinceEpoch:)),
            chain: chain.flatMap { ChainState(packed: $0) })
    }
}
