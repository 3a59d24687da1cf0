import CLibUV
import Logging

/// Performing lifecycle transitions: the machine decides, the core acts.
extension RuntimeCore {
    func apply(_ request: LifecycleRequest, from source: String) {
        switch lifecycle.handle(request, now: now) {
        case .failure(let ignored):
            switch ignored.reason {
            case .terminating:
                logger.notice(
                    "lifecycle request ignored: the program is terminating",
                    metadata: ["request": "\(request)", "source": "\(source)"])
            case .sameTermination:
                logger.info(
                    "\(source): termination asked again within \(configuration.repeatedTerminationGrace) of the first request: the same request"
                )
            case .alreadyThere:
                break
            }
        case .success(let actions):
            if actions.contains(.expireAllGrants) {
                logger.notice(
                    "\(source): termination asked again while terminating: expiring every background task now")
            }
            turnState.transitionDepth += 1
            perform(actions)
            turnState.transitionDepth -= 1
            settle()
        }
    }

    /// Decides, once no transition is running, whether the program suspends or
    /// finishes terminating.
    func settle() {
        guard turnState.transitionDepth == 0 else {
            turnState.needsSettle = true
            return
        }
        var hasOpenGrants = engine.grants.openCount > 0
        if !hasOpenGrants, lifecycle.state == .background,
            !published.closeAdmission(terminating: lifecycle.isTerminating)
        {
            hasOpenGrants = true  // a begin off the loop holds a reservation: its grant is coming
        }
        let actions = lifecycle.settle(hasOpenGrants: hasOpenGrants)
        if !actions.isEmpty {
            turnState.transitionDepth += 1
            perform(actions)
            turnState.transitionDepth -= 1
        }
    }

    /// Called whenever a grant left the table, or a begin off the loop gave up its
    /// reservation: in the background with nothing open, the lifecycle settles at the end
    /// of the turn.
    @inline(__always)  // on every end of a grant; the optimizer stopped inlining it on its own
    func checkIdle() {
        if engine.grants.openCount == 0, lifecycle.state == .background { turnState.needsSettle = true }
    }

    private func perform(_ actions: [LifecycleMachine.Action]) {
        for action in actions {
            switch action {
            case .enter(let state):
                enter(state)
            case .emit(let event):
                deliver(event)
                if event == .didReceiveMemoryWarning { returnFreedMemory() }
            case .startBudget:
                engine.deadlines.startBudget(now: now, length: configuration.backgroundBudget)
                published.setBudget(engine.deadlines.budget)
            case .clearBudget:
                engine.deadlines.clearBudget()
                published.setBudget(nil)
            case .expireAllGrants:
                forceExpire(nil)
            case .finishTermination:
                shutDown()
            case .scheduleMemoryWarning(let due):
                let queue = host.queue
                add(
                    LoopTimer(
                        deadline: due, callSite: CallSite(fileID: #fileID, line: #line),
                        body: { [unowned self] in perform(lifecycle.memoryWarningDue(now: now)) }, onCancel: nil,
                        remove: { _ = queue.enqueue(.run { [unowned self] in timersChanged() }) }))
            }
        }
    }

    private func enter(_ state: LifecycleState) {
        let previous = published.state
        published.setState(state)
        if state != .suspended, state != .terminated { published.openAdmission() }
        metrics.noteStateChange(from: previous, to: state, at: now)
        logger.debug("lifecycle state", metadata: ["state": "\(state)"])
    }

    private func deliver(_ event: LifecycleEvent) {
        for hook in hooks.lifecycleEvents { hook(event) }
        // One watchdog stamp and one timing for the whole delivery, not one per observer:
        // with a thousand observers the per-call bookkeeping (clock reads, the watchdog's
        // lock) cost more than the observers themselves.
        // The snapshot keeps every entry alive, so each is borrowed as a guaranteed reference
        // (`_withUnsafeGuaranteedRef`, as swift-nio does on its hot paths): no retain of the
        // entry nor of its handler's context per call. The row
        // `transition_1000_observers_p99_us` needs it: 116 µs with plain iteration, 35–51 µs
        // with it (target 100).
        let snapshot = observers.snapshot
        callUser(.observer(event), timer: metrics.observerDuration) {
            snapshot.withUnsafeBufferPointer { entries in
                for index in entries.indices {
                    Unmanaged.passUnretained(entries[index])._withUnsafeGuaranteedRef { entry in
                        if !entry.isSet { entry.handler(event) }
                    }
                }
            }
        }
    }

    /// A memory warning from `source`: delivered now or coalesced (see
    /// ``LifecycleMachine/memoryWarning(now:)``).
    @discardableResult
    func memoryWarning(from source: String) -> String {
        let actions = lifecycle.memoryWarning(now: now)
        if actions.isEmpty { logger.debug("memory warning coalesced", metadata: ["source": "\(source)"]) }
        perform(actions)
        for action in actions {
            switch action {
            case .emit(.didReceiveMemoryWarning): return "memory warning delivered"
            case .scheduleMemoryWarning(let due):
                return "memory warning coalesced: at most one per interval, this one delivered in \(due - now)"
            default: continue
            }
        }
        return lifecycle.state == .terminated
            ? "memory warning ignored: the program has terminated"
            : "memory warning coalesced with one already due"
    }

    /// After the observers of a memory warning gave back what they could: returns the
    /// freed heap to the system (glibc's `malloc_trim`).
    func returnFreedMemory() {
        metrics.shared.countMemoryWarning()
        overtime_return_freed_memory()
    }

    /// Ends the running background budget within `length` at the latest.
    func capBackgroundBudget(_ length: Duration, from source: String) {
        guard engine.deadlines.capBudget(deadline: now + max(length, .zero), now: now) else { return }
        published.setBudget(engine.deadlines.budget)
        logger.notice("\(source): the background budget ends within \(length)")
    }

    /// Delivers ``LifecycleEvent/reload`` to every observer, unless terminated.
    func emitReload() {
        guard lifecycle.state != .terminated else { return }
        deliver(.reload)
    }

    func addObserver(_ entry: ObserverRegistry.Entry) {
        if lifecycle.state == .terminated {
            entry.onFinish?()
        } else {
            observers.add(entry)
        }
    }
}
