/// The lifecycle as a pure state machine: requests in, actions out.
///
/// It owns the state and nothing else. The runtime performs the actions in order
/// (emitting each event to every observer before the next action), then calls
/// ``settle(hasOpenGrants:)``, which decides whether the program suspends or finishes
/// terminating. Keeping the decision here lets it be tested without a loop.
///
/// Termination is final, and its first request's time is kept: a second request within
/// `repeatedTerminationGrace` of the first is the same request whatever asked for either
/// (the program, a signal, the control socket — `timeout` signals a process and its
/// group), and an operator's request after it expires every grant now.
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
        /// Run every open grant's expiration handler now: termination was asked again.
        case expireAllGrants
        /// Termination is complete: close the loop.
        case finishTermination
        /// Call ``LifecycleMachine/memoryWarningDue(now:)`` at this instant: a memory
        /// warning came inside the interval of the last one delivered.
        case scheduleMemoryWarning(at: MonotonicInstant)
    }

    /// Why a request did nothing.
    enum Ignored: Equatable {
        /// The program is already in the requested state.
        case alreadyThere
        /// The program is terminating or terminated; only termination is final.
        case terminating
        /// Termination asked again within the grace of its first request.
        case sameTermination
    }

    private(set) var state: LifecycleState = .active
    /// When termination was first requested; set once, never cleared.
    private(set) var terminationRequestedAt: MonotonicInstant?
    /// A second request for termination within this time of the first is the same one.
    let repeatedTerminationGrace: Duration
    /// At most one memory warning reaches observers per this long.
    let memoryWarningInterval: Duration
    /// When the last memory warning reached observers.
    private(set) var lastMemoryWarning: MonotonicInstant?
    /// When a warning that came inside the interval is delivered; at most one waits.
    private(set) var memoryWarningDue: MonotonicInstant?

    init(repeatedTerminationGrace: Duration = .seconds(1), memoryWarningInterval: Duration = .seconds(10)) {
        self.repeatedTerminationGrace = repeatedTerminationGrace
        self.memoryWarningInterval = memoryWarningInterval
    }

    /// A memory warning told at `now`: delivered at once unless one was delivered within
    /// the interval; then once at the interval's end, however many come meanwhile (a
    /// pressure source tells again and again while memory stays short). Terminated
    /// programs hear nothing.
    mutating func memoryWarning(now: MonotonicInstant) -> [Action] {
        guard state != .terminated, memoryWarningDue == nil else { return [] }
        if let last = lastMemoryWarning, now - last < memoryWarningInterval {
            memoryWarningDue = last + memoryWarningInterval
            return [.scheduleMemoryWarning(at: last + memoryWarningInterval)]
        }
        lastMemoryWarning = now
        return [.emit(.didReceiveMemoryWarning)]
    }

    /// The coalesced warning's time came.
    mutating func memoryWarningDue(now: MonotonicInstant) -> [Action] {
        guard memoryWarningDue != nil else { return [] }
        memoryWarningDue = nil
        guard state != .terminated else { return [] }
        lastMemoryWarning = now
        return [.emit(.didReceiveMemoryWarning)]
    }

    /// Termination was requested and is under way (or done).
    var isTerminating: Bool { terminationRequestedAt != nil }

    /// The actions for `request` made at `now`, or why it is ignored.
    mutating func handle(_ request: LifecycleRequest, now: MonotonicInstant) -> Result<[Action], IgnoredRequest> {
        if let first = terminationRequestedAt {
            switch request {
            case .termination, .terminationFromOutside:
                if now - first < repeatedTerminationGrace { return .failure(IgnoredRequest(.sameTermination)) }
                if request == .terminationFromOutside, state != .terminated { return .success([.expireAllGrants]) }
                return .failure(IgnoredRequest(.terminating))
            case .background, .foreground, .backgroundLaunch:
                return .failure(IgnoredRequest(.terminating))
            }
        }
        if state == .terminated { return .failure(IgnoredRequest(.terminating)) }
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
        case (.backgroundLaunch, .suspended):
            // No willResignActive: the program was not active. A fresh budget for the work.
            state = .background
            return .success([.enter(.background), .startBudget, .emit(.didEnterBackground)])
        case (.backgroundLaunch, _):
            return .failure(IgnoredRequest(.alreadyThere))
        case (.termination, .active), (.termination, .inactive),
            (.terminationFromOutside, .active), (.terminationFromOutside, .inactive):
            terminationRequestedAt = now
            return .success(enterBackground() + [.emit(.willTerminate)])
        case (.termination, .background), (.terminationFromOutside, .background):
            terminationRequestedAt = now
            return .success([.emit(.willTerminate)])
        case (.termination, .suspended), (.terminationFromOutside, .suspended):
            // Woken from suspension to terminate: a fresh budget for the last work.
            terminationRequestedAt = now
            state = .background
            return .success([.enter(.background), .startBudget, .emit(.willTerminate)])
        case (.termination, .terminated), (.terminationFromOutside, .terminated):
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
