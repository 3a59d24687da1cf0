// The rules for grants as pure functions: admission, expiry and termination.

/// Decides what happens to grants; the runtime's core performs the actions, in order.
///
/// Nothing here reads a clock, touches a table or calls user code, so each rule is
/// tested as a transcript of actions (as ``LifecycleMachine`` is). The core skips an
/// action aimed at a grant that ended meanwhile: an expiration handler may end grants.
///
/// The same ``refusal(_:now:maximumDuration:)`` decides a begin on the loop (from the
/// loop's own state) and off it (from the published state).
struct GrantDecisions {
    /// How long before a deadline the expiration handler runs.
    let leadTime: Duration
    /// What follows a termination.
    let terminationPolicy: TerminationPolicy

    /// What a begin may see of the runtime.
    struct View: Equatable {
        var state: LifecycleState
        /// The background budget's deadline, when one runs.
        var budgetDeadline: MonotonicInstant?
        /// When its expiration handlers run; `nil`: a lead time before the deadline.
        var budgetExpirationPoint: MonotonicInstant? = nil
    }

    /// Which grants an action is for.
    enum Target: Equatable {
        /// The grant the decision was asked about.
        case grant
        /// Every open grant, in begin order.
        case all
    }

    /// One step the core performs.
    enum Action: Equatable {
        /// Run the expiration handler (once per grant; a grant already past it is skipped).
        case expire(Target)
        /// Ask ``atOwnCheck(ownDeadline:now:)`` again for the grant at this instant.
        case checkAgain(at: MonotonicInstant)
        /// Move the grant's own deadline to this instant.
        case setOwnDeadline(MonotonicInstant)
        /// End the grant(s) still open and report each.
        case terminate(Target)
        /// The budget's expiration point has been handled.
        case markBudgetExpired
        /// The budget is over.
        case clearBudget
        /// Decide whether the program suspends or finishes terminating.
        case settle
        /// Exit the process with this status.
        case exitProcess(status: Int32)
    }

    // MARK: Admission

    /// Why a grant begun at `now` is refused, or `nil` when it may begin. The cap on open
    /// grants is checked by the caller, which knows how to count them.
    @inline(__always)
    func refusal(_ view: View, now: MonotonicInstant, maximumDuration: Duration?) -> BackgroundTaskRefusal? {
        switch view.state {
        case .terminated: return .terminated
        case .suspended: return .suspended
        case .background:
            // Past the expiration point, a grant would be asked to stop as it began.
            if let deadline = view.budgetDeadline {
                let expirationPoint = view.budgetExpirationPoint ?? deadline - leadTime
                if now >= expirationPoint {
                    return .insufficientTimeRemaining(
                        remaining: max(deadline - now, .zero), leadTime: deadline - expirationPoint)
                }
            }
        case .active, .inactive: break
        }
        if let maximumDuration, maximumDuration <= leadTime {
            return .maximumDurationTooShort(requested: maximumDuration, leadTime: leadTime)
        }
        return nil
    }

    /// What a grant needs once stored: a check before its own deadline, and its
    /// expiration handler at once if it joined after the budget's expiration point was
    /// handled (admitted off the loop just before it, applied just after).
    func afterBegin(ownDeadline: MonotonicInstant?, budgetExpirationDone: Bool) -> [Action] {
        var actions: [Action] = []
        if budgetExpirationDone { actions.append(.expire(.grant)) }
        if let ownDeadline { actions.append(.checkAgain(at: ownDeadline - leadTime)) }
        return actions
    }

    // MARK: Time passing

    /// At `now`, for the budget's expiration point: every open grant is asked to stop.
    func atBudgetExpirationPoint(_ budget: DeadlineSchedule.Budget?, now: MonotonicInstant) -> [Action] {
        guard let budget, !budget.expirationDone, now >= budget.expirationPoint else { return [] }
        return [.markBudgetExpired, .expire(.all)]
    }

    /// At `now`, for the budget's deadline: grants still open are terminated.
    func atBudgetDeadline(_ budget: DeadlineSchedule.Budget?, now: MonotonicInstant) -> [Action] {
        guard let budget, now >= budget.deadline else { return [] }
        return [.clearBudget, .terminate(.all), .settle]
    }

    /// At `now`, for a grant whose check fell due: terminate it at its own deadline,
    /// expire it within the lead time of it (and check again at the deadline), or check
    /// again later (its deadline was moved).
    func atOwnCheck(ownDeadline: MonotonicInstant?, now: MonotonicInstant) -> [Action] {
        guard let ownDeadline else { return [] }
        if now >= ownDeadline { return [.terminate(.grant)] }
        let expirationPoint = ownDeadline - leadTime
        if now >= expirationPoint { return [.expire(.grant), .checkAgain(at: ownDeadline)] }
        return [.checkAgain(at: expirationPoint)]
    }

    /// Expiring a grant now, at an operator's request: its deadline moves to now + lead
    /// time (never later than it was).
    func forcedExpiry(ownDeadline: MonotonicInstant?, now: MonotonicInstant) -> [Action] {
        let deadline = min(ownDeadline ?? now + leadTime, now + leadTime)
        return [.setOwnDeadline(deadline), .expire(.grant), .checkAgain(at: deadline)]
    }

    /// After `terminated` grants were terminated in one pass.
    func afterTerminations(_ terminated: Int) -> [Action] {
        guard terminated > 0, let status = terminationPolicy.exitStatus else { return [] }
        return [.exitProcess(status: status)]
    }
}
