// When a request's runs are due, as pure functions over wall-clock times.

import Overtime

/// Where one request stands in its schedule; persisted with the request.
@_spi(ScheduleStore) public struct PlanState: Sendable, Hashable {
    /// The next planned time on the request's grid: the end of the window in which the
    /// next regular run may start (a one-shot request's only time).
    public var anchor: WallClockInstant
    /// Catch-up runs still owed (missed planned times), started one after another.
    public var owed = 0
    /// A failed attempt's retry is due at this time (instead of the anchor).
    public var retryAt: WallClockInstant?
    /// Failed attempts of the run in progress (0: its first attempt is next).
    public var failedAttempts = 0
    /// A one-shot request has run to completion, or failed for good.
    public var isFinished = false
    /// The planned time the run in progress or being retried stands for, kept across its
    /// attempts (a retry's or a takeover's own time is ``retryAt``); `nil` between runs.
    public var plannedTime: WallClockInstant?
    /// A calendar repetition's randomized delay, drawn at submission: every planned time is
    /// the calendar's time plus it. (An interval's is in its anchor.)
    public var gridOffset: Duration = .zero

    /// A plan as a store wrote it.
    public init(
        anchor: WallClockInstant, owed: Int = 0, retryAt: WallClockInstant? = nil, failedAttempts: Int = 0,
        isFinished: Bool = false, plannedTime: WallClockInstant? = nil, gridOffset: Duration = .zero
    ) {
        self.gridOffset = gridOffset
        self.anchor = anchor
        self.owed = owed
        self.retryAt = retryAt
        self.failedAttempts = failedAttempts
        self.isFinished = isFinished
        self.plannedTime = plannedTime
    }
}

/// What the scheduler does next for one request.
enum PlanAction: Sendable, Hashable {
    /// Wait: nothing is due before this wall-clock time.
    case waitUntil(WallClockInstant)
    /// Start a run now: attempt `attempt` (1 for a first attempt).
    case run(attempt: Int)
    /// Nothing more will run (a one-shot done, or failed for good).
    case finished
}

/// How a run ended, as the planner sees it.
enum RunOutcome: Sendable, Hashable {
    case succeeded
    /// Failed, expired or terminated: retried per the policy, after its backoff.
    case failed
    /// A requirement stopped holding: retried as soon as they all hold again (no backoff:
    /// nothing failed), counted against the maximum attempts.
    case stopped
}

/// The rules of a request's schedule. Pure: the scheduler passes the time (and the random
/// delay it drew), and performs the result. Tested as transcripts.
@_spi(ScheduleStore) public enum SchedulePlanner {
    /// The anchor of a calendar repetition whose calendar names no more times: nothing is
    /// due again, and the request is finished after its run in progress.
    static let exhausted = WallClockInstant(nanosecondsSinceEpoch: .max)

    /// The plan of a newly submitted request: its first planned time is its earliest
    /// begin (or `now`) — a calendar's first time from then — plus the random delay drawn
    /// for it.
    static func initial(_ request: ScheduledTaskRequest, now: WallClockInstant, randomDelay: Duration) -> PlanState {
        let begin = request.earliestBegin ?? now
        guard let calendar = request.repetition?.calendar else { return PlanState(anchor: begin + randomDelay) }
        let first = calendar.nextTime(after: begin - .nanoseconds(1)).map { $0 + randomDelay } ?? exhausted
        return PlanState(anchor: first, gridOffset: randomDelay)
    }

    /// The planned time after `planned` on the request's grid (`exhausted` when a calendar
    /// names no more).
    static func plannedTime(
        after planned: WallClockInstant, _ state: PlanState, _ request: ScheduledTaskRequest
    ) -> WallClockInstant {
        guard let calendar = request.repetition?.calendar else { return planned + interval(request) }
        return calendar.nextTime(after: planned - state.gridOffset).map { $0 + state.gridOffset } ?? exhausted
    }

    /// The planned time before `planned` on the request's grid, if there is one.
    static func plannedTime(
        before planned: WallClockInstant, _ state: PlanState, _ request: ScheduledTaskRequest
    ) -> WallClockInstant? {
        guard let calendar = request.repetition?.calendar else { return planned - interval(request) }
        if planned == exhausted { return nil }
        return calendar.previousTime(before: planned - state.gridOffset).map { $0 + state.gridOffset }
    }

    /// Where the flex window before the planned time `planned` opens: `flex` earlier, never
    /// before the planned time before it.
    static func windowStart(
        _ planned: WallClockInstant, _ state: PlanState, _ request: ScheduledTaskRequest
    ) -> WallClockInstant {
        guard let repetition = request.repetition else { return planned }  // a one-shot: no window
        let flex = repetition.flex
        guard repetition.calendar != nil else { return planned - min(flex, repetition.interval) }
        guard flex > .zero, planned != exhausted else { return planned }
        return max(planned - flex, plannedTime(before: planned, state, request) ?? planned - flex)
    }

    /// The earliest time a run may start: a retry's time, or the start of the anchor's
    /// flex window — never before the earliest begin.
    static func dueTime(_ state: PlanState, _ request: ScheduledTaskRequest) -> WallClockInstant {
        var due = state.retryAt ?? windowStart(state.anchor, state, request)
        if let earliest = request.earliestBegin, due < earliest { due = earliest }
        return due
    }

    /// When the request's next run may start, as a store indexes it: `nil` when nothing
    /// more runs; a catch-up run owed is due since the planned time it replaces.
    @_spi(ScheduleStore) public static func nextStart(_ state: PlanState, _ request: ScheduledTaskRequest)
        -> WallClockInstant?
    {
        if state.isFinished { return nil }
        if state.owed > 0, state.retryAt == nil {
            return plannedTime(before: state.anchor, state, request) ?? state.anchor
        }
        return dueTime(state, request)
    }

    /// Where the flex window of a repeating request's previous planned time opened, as a
    /// store indexes it to find the plans a wall clock set back leaves ahead: `nil` for a
    /// one-shot request.
    @_spi(ScheduleStore) public static func previousWindowStart(_ state: PlanState, _ request: ScheduledTaskRequest)
        -> WallClockInstant?
    {
        guard let repetition = request.repetition, !state.isFinished,
            let previous = plannedTime(before: state.anchor, state, request)
        else { return nil }
        return repetition.calendar == nil ? windowStart(previous, state, request) : previous - repetition.flex
    }

    /// The planned time a run started now stands for: a retried run's own (kept from its
    /// first attempt), an owed catch-up run's missed time (the oldest owed first), else the
    /// due time.
    static func plannedTime(_ state: PlanState, _ request: ScheduledTaskRequest) -> WallClockInstant {
        if let planned = state.plannedTime, state.retryAt != nil || state.failedAttempts > 0 { return planned }
        if state.owed > 0, state.retryAt == nil {
            guard request.repetition?.calendar != nil else { return state.anchor - interval(request) * state.owed }
            var planned = state.anchor
            for _ in 0..<state.owed {
                guard let earlier = plannedTime(before: planned, state, request) else { break }
                planned = earlier
            }
            return planned
        }
        return dueTime(state, request)
    }

    /// What to do at `now` (the request is not running).
    static func next(_ state: PlanState, _ request: ScheduledTaskRequest, now: WallClockInstant) -> PlanAction {
        if state.isFinished { return .finished }
        if state.owed > 0, state.retryAt == nil { return .run(attempt: state.failedAttempts + 1) }
        let due = dueTime(state, request)
        return now >= due ? .run(attempt: state.failedAttempts + 1) : .waitUntil(due)
    }

    /// A run starts at `now`: a regular run takes its planned time off the grid (the next
    /// one is the anchor plus the interval, however long this run takes); a catch-up run
    /// pays one owed run.
    static func started(_ state: PlanState, _ request: ScheduledTaskRequest, now: WallClockInstant) -> PlanState {
        var state = state
        guard state.retryAt == nil, state.failedAttempts == 0 else { return state }  // a retry keeps the slot
        state.plannedTime = plannedTime(state, request)
        if state.owed > 0 {
            state.owed -= 1
        } else if request.repetition != nil, now >= dueTime(state, request) {
            state.anchor = plannedTime(after: state.anchor, state, request)
        }
        return state
    }

    /// A run ended at `now` with `outcome`.
    static func ended(
        _ state: PlanState, _ request: ScheduledTaskRequest, outcome: RunOutcome, now: WallClockInstant
    ) -> PlanState {
        var state = state
        state.retryAt = nil
        switch outcome {
        case .succeeded:
            state.failedAttempts = 0
            state.plannedTime = nil
            if request.repetition == nil || state.anchor == exhausted && state.owed == 0 { state.isFinished = true }
        case .failed, .stopped:
            state.failedAttempts += 1
            if state.failedAttempts >= max(1, request.retry.maximumAttempts) {
                // Failed for good: a one-shot is finished (kept, visible); a repeating
                // request gives up this run and goes on with its grid.
                state.failedAttempts = 0
                state.plannedTime = nil
                if request.repetition == nil || state.anchor == exhausted && state.owed == 0 { state.isFinished = true }
            } else if outcome == .stopped {
                state.retryAt = now
            } else {
                state.retryAt = now + request.retry.delay(afterFailedAttempts: state.failedAttempts)
            }
        }
        return state
    }

    /// An attempt that the end of its process (or of its claim, in a fleet) interrupted:
    /// retried once, at once (same run, next attempt); interrupted twice in a row
    /// (`twice`), it counts as a failed attempt and is retried per the policy.
    static func interrupted(
        _ state: PlanState, _ request: ScheduledTaskRequest, attempt: Int, twice: Bool, now: WallClockInstant
    ) -> PlanState {
        if twice { return ended(state, request, outcome: .failed, now: now) }
        var state = state
        state.failedAttempts = attempt
        state.retryAt = now
        return state
    }

    /// Re-plans a repeating request at `now` after the program was not running, or after
    /// the wall clock stepped: missed planned times become owed runs per the catch-up
    /// policy, and the anchor moves to the first planned time after `now`. A wall clock
    /// stepped back so far that the previous planned time's window lies ahead pulls the
    /// anchor back onto the grid (the next run never waits longer than an interval and its
    /// flex).
    static func catchUp(_ state: PlanState, _ request: ScheduledTaskRequest, now: WallClockInstant) -> PlanState {
        if request.repetition?.calendar != nil { return calendarCatchUp(state, request, now: now) }
        guard let repetition = request.repetition, !state.isFinished, repetition.interval > .zero else { return state }
        var state = state
        let interval = repetition.interval
        // The previous planned time's window is still ahead: the clock went back. (After a
        // run started early in its flex window, the anchor is up to interval + flex ahead.)
        let flex = min(repetition.flex, interval)
        let previousWindow = state.anchor - interval - flex
        if previousWindow > now {
            let steps = Int(((previousWindow - now) / interval).rounded(.up))
            state.anchor = state.anchor - interval * steps
            return state
        }
        guard now > state.anchor else { return state }
        let missed = Int(((now - state.anchor) / interval).rounded(.down)) + 1
        state.anchor = state.anchor + interval * missed
        switch request.catchUp.kind {
        case .once: state.owed = max(state.owed, 1)
        case .every(let maximum): state.owed = min(state.owed + missed, maximum)
        case .none: state.owed = 0
        }
        return state
    }

    /// Corrects the waits of a plan that stand for a length of time, not a time of day —
    /// a retry's backoff, a one-shot's "due on submit, plus its random delay" — after the
    /// wall clock read `step` more than before (`.zero` when the step is not known: at a
    /// start, after the process was not running). They move with the clock, so what was
    /// left of them is left still, and never lie further ahead of `now` than their length:
    /// a clock set back three hours holds no retry or due one-shot for three hours, and one
    /// set forward runs no backoff early. Times of day (an earliest begin, a repeating
    /// request's grid) stay; ``catchUp(_:_:now:)`` re-plans the grid.
    static func clockStepped(
        _ state: PlanState, _ request: ScheduledTaskRequest, by step: Duration, now: WallClockInstant
    ) -> PlanState {
        guard !state.isFinished else { return state }
        var state = state
        if let retry = state.retryAt {
            let longest = request.retry.delay(afterFailedAttempts: state.failedAttempts)
            state.retryAt = min(retry + step, now + longest)
        } else if request.repetition == nil, request.earliestBegin == nil {
            state.anchor = min(state.anchor + step, now + request.randomizedDelay)
        }
        return state
    }

    /// ``catchUp(_:_:now:)`` for a calendar: the same rules, walking the calendar's times.
    private static func calendarCatchUp(_ state: PlanState, _ request: ScheduledTaskRequest, now: WallClockInstant)
        -> PlanState
    {
        guard let repetition = request.repetition, !state.isFinished, state.anchor != exhausted else { return state }
        var state = state
        if let previousWindow = previousWindowStart(state, request), previousWindow > now {
            // The clock went back: the next planned time is the first whose window is ahead.
            state.anchor = plannedTime(after: now + repetition.flex, state, request)
            return state
        }
        guard now > state.anchor else { return state }
        let counted: Int
        switch request.catchUp.kind {
        case .every(let maximum): counted = maximum
        case .once, .none: counted = 1
        }
        var missed = 1
        var planned = state.anchor
        while missed < counted {
            planned = plannedTime(after: planned, state, request)
            guard planned <= now else { break }
            missed += 1
        }
        state.anchor = plannedTime(after: now, state, request)
        switch request.catchUp.kind {
        case .once: state.owed = max(state.owed, 1)
        case .every(let maximum): state.owed = min(state.owed + missed, maximum)
        case .none: state.owed = 0
        }
        return state
    }

    private static func interval(_ request: ScheduledTaskRequest) -> Duration {
        request.repetition?.interval ?? .zero
    }
}
