// What a link of a chain does as its prerequisites conclude, as pure functions.

import Overtime

/// How a prerequisite stands, as a link waiting on it sees it.
enum PrerequisiteOutcome: Sendable, Hashable {
    /// Not finished (or submitted again since): the link waits.
    case pending
    /// Its one-shot run succeeded; what it set as its output, if anything.
    case succeeded(output: [UInt8]?)
    /// Failed for good (or was failed by a prerequisite of its own).
    case failed
    /// Cancelled (or cancelled by a prerequisite of its own).
    case cancelled
    /// No request has the identifier any more, or it is no longer a one-shot: it can never
    /// succeed.
    case gone
}

/// What becomes of a link.
enum ChainAction: Sendable, Hashable {
    /// It still waits on prerequisites not concluded.
    case wait(ChainState)
    /// Every prerequisite succeeded: it is due as its plan says.
    case ready(ChainState)
    /// A prerequisite failed for good or is gone: the link fails, without running.
    case fail(ChainState)
    /// A prerequisite was cancelled: the link is cancelled.
    case cancel(ChainState)
}

/// The rules of chains. Pure: the scheduler reads the prerequisites' outcomes and
/// performs the result. Tested as transcripts.
enum ChainDecisions {
    /// The link `state` given what its prerequisites' outcomes are now. A failure wins over
    /// a cancellation (the first in identifier order is named); a prerequisite not in
    /// `outcomes` is pending.
    static func decide(_ state: ChainState, outcomes: [String: PrerequisiteOutcome]) -> ChainAction {
        var state = state
        let waiting = state.waitingOn.sorted()
        if let failed = waiting.first(where: { outcomes[$0] == .failed || outcomes[$0] == .gone }) {
            state.stoppedBy = failed
            return .fail(state)
        }
        if let cancelled = waiting.first(where: { outcomes[$0] == .cancelled }) {
            state.stoppedBy = cancelled
            return .cancel(state)
        }
        for identifier in waiting {
            guard case .succeeded(let output) = outcomes[identifier] else { continue }
            state.waitingOn.remove(identifier)
            if let output { state.handedOn[identifier] = output }
        }
        return state.isWaiting ? .wait(state) : .ready(state)
    }

    /// The outcome of the prerequisite `stored` (`nil`: no request has its identifier),
    /// given its newest attempt that ended.
    static func outcome(of stored: StoredRequest?, lastRun: RunRecord?) -> PrerequisiteOutcome {
        guard let stored, stored.request.repetition == nil else { return .gone }
        if stored.cancelledAt != nil { return .cancelled }
        guard stored.plan.isFinished else { return .pending }
        if stored.chain?.stoppedBy != nil { return .failed }
        guard let lastRun else { return .succeeded(output: nil) }  // its history pruned
        return lastRun.result == .succeeded ? .succeeded(output: lastRun.output) : .failed
    }
}

extension StoredRequest {
    /// Takes `action` on this link at `now`; returns whether it finished the request
    /// (failed or cancelled).
    @discardableResult
    mutating func take(_ action: ChainAction, now: WallClockInstant) -> Bool {
        switch action {
        case .wait(let state), .ready(let state):
            chain = state
            return false
        case .fail(let state):
            chain = state
            plan.isFinished = true
            return true
        case .cancel(let state):
            chain = state
            plan.isFinished = true
            cancelledAt = now
            return true
        }
    }

    /// When its next run may start, as a store indexes it: `nil` while it waits on a
    /// prerequisite, and when nothing more runs.
    @_spi(ScheduleStore) public var nextStart: WallClockInstant? {
        if chain?.isWaiting == true { return nil }
        return SchedulePlanner.nextStart(plan, request)
    }
}
