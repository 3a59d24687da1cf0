/// The lifecycle as a pure state machine: requests in, actions out.
///
/// It owns the state and nothing else. The runtime performs the actions in order
/// (emitting each event to every observer before the next action), then calls
/// ``settle(hasOpenGrants:)``, which decides whether the program suspends or finishes
/// terminating. Keeping the decision here lets it be tested without a loop.
struct LifecycleMachine {
    /// One step the runtime performs.
    enum Action: Equatable {
        /// Make `state` the visible state.
        case enter(LifecycleState)
        /// Deliver the event to every observer.
        case emit(LifecycleEvent)
        /// Start the background budget: deadline = now + budget.
        case startBudget
        /// Clear the background deadline.
        case clearBudget
        /// Termination is complete: close the loop.
        case finishTermination
    }

    /// Why a request did nothing.
    enum Ignored: Equatable {
        /// The program is already in the requested state.
        case alreadyThere
        /// The program is terminating or terminated; only termination is final.
        case terminating
    }

    private(set) var state: LifecycleState = .active
    /// Set once termination was requested; never cleared.
    private(set) var isTerminating = false

    /// The actions for `request`, or why it is ignored.
    mutating func handle(_ request: LifecycleRequest) -> Result<[Action], IgnoredRequest> {
        if isTerminating || state == .terminated { return .failure(IgnoredRequest(.terminating)) }
        switch (request, state) {
        case (.background, .active), (.background, .inactive):
            return .success(enterBackground())
        case (.background, _):
            return .failure(IgnoredRequest(.alreadyThere))
        case (.foreground, .background), (.foreground, .suspended):
            state = .active
            return .success([
                .enter(.inactive), .clearBudget, .emit(.willEnterForeground),
                .enter(.active), .emit(.didBecomeActive),
            ])
        case (.foreground, _):
            return .failure(IgnoredRequest(.alreadyThere))
        case (.termination, .active), (.termination, .inactive):
            isTerminating = true
            return .success(enterBackground() + [.emit(.willTerminate)])
        case (.termination, .background):
            isTerminating = true
            return .success([.emit(.willTerminate)])
        case (.termination, .suspended):
            // Woken from suspension to terminate: a fresh budget for the last work.
            isTerminating = true
            state = .background
            return .success([.enter(.background), .startBudget, .emit(.willTerminate)])
        case (.termination, .terminated):
            return .failure(IgnoredRequest(.terminating))
        }
    }

    /// What follows once a transition's actions ran, or the set of open grants changed.
    mutating func settle(hasOpenGrants: Bool) -> [Action] {
        guard state == .background, !hasOpenGrants else { return [] }
        if isTerminating {
            state = .terminated
            return [.enter(.terminated), .clearBudget, .finishTermination]
        }
        state = .suspended
        return [.enter(.suspended), .clearBudget, .emit(.didSuspend)]
    }

    private mutating func enterBackground() -> [Action] {
        state = .background
        return [
            .enter(.inactive), .emit(.willResignActive),
            .enter(.background), .startBudget, .emit(.didEnterBackground),
        ]
    }
}

/// A request the lifecycle machine did not act on, and why.
struct IgnoredRequest: Error, Equatable {
    let reason: LifecycleMachine.Ignored
    init(_ reason: LifecycleMachine.Ignored) { self.reason = reason }
}
