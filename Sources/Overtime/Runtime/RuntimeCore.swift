import CoreMetrics
import Dispatch
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Everything the loop thread owns, and the order in which it does things.
///
/// The parts stand on their own: ``LifecycleMachine`` decides transitions,
/// ``GrantEngine`` holds the grants and when they are due (``GrantDecisions`` decides
/// what that means), ``ObserverRegistry`` holds observers, ``DriverHooks`` what drivers
/// asked to be called for, ``TurnState`` where the turn stands. The core performs what
/// they decide and calls user code, one callback at a time, on the loop thread.
///
/// Every entry from libuv goes through ``turn(_:)``: it runs the work, drains the
/// inbound queue until it is empty, applies deferred lifecycle decisions, re-arms the
/// single deadline timer and flushes metrics, in that order.
final class RuntimeCore: @unchecked Sendable {  // confined to the loop thread
    let configuration: RuntimeConfiguration
    /// The loop, its clock, and what feeds, wakes and watches it.
    let host: LoopHost
    let published: PublishedState
    var logger: Logger { configuration.logger }

    // Loop-confined state. `@exclusivity(unchecked)`: only the loop thread touches these,
    // and dynamic exclusivity checks on every begin/end cost more than the work itself.
    // The rule that makes it safe: no `inout` access to them spans a call into user code
    // (copy out, call the handler, write back), because a handler may begin or end
    // grants and so touch the same storage.
    @exclusivity(unchecked) var metrics: RuntimeMetrics
    /// Spans of grants; `nil` without a tracer.
    let tracing: RuntimeTracing?
    @exclusivity(unchecked) var lifecycle: LifecycleMachine
    /// The open grants, their deadlines and the rules over them.
    let engine: GrantEngine
    @exclusivity(unchecked) var observers = ObserverRegistry()
    @exclusivity(unchecked) var timers = LoopTimers()
    /// What drivers asked to be called for (lifecycle events, clock steps, stalls, status, shutdown).
    var hooks = DriverHooks()
    /// The bookkeeping of the turn in progress and between turns.
    @exclusivity(unchecked) var turnState: TurnState

    /// The time the current callback started (see ``TurnState/loopTime``).
    var loopTime: MonotonicInstant { turnState.loopTime }

    init(
        configuration: RuntimeConfiguration, clock: any RuntimeClock, loop: EventLoop,
        queue: InboundQueue, published: PublishedState, activity: LoopActivity, executor: LoopExecutor
    ) {
        self.configuration = configuration
        host = LoopHost(loop: loop, clock: clock, queue: queue, activity: activity, executor: executor)
        turnState = TurnState(wakeup: WakeupTimer(loop: loop, virtual: nil))
        self.published = published
        self.metrics = RuntimeMetrics(factory: configuration.metricsFactory)
        self.tracing = RuntimeTracing.make(configuration.tracer)
        self.engine = GrantEngine(
            leadTime: configuration.expirationLeadTime, terminationPolicy: configuration.terminationPolicy)
        self.lifecycle = LifecycleMachine(
            repeatedTerminationGrace: configuration.repeatedTerminationGrace,
            memoryWarningInterval: configuration.memoryWarningInterval)
    }

    /// Traps in debug builds when called off the loop thread (swift-nio's
    /// `assertInEventLoop`): every member of the core is the loop thread's alone.
    @inline(__always)
    func assertOnLoop(file: StaticString = #fileID, line: UInt = #line) {
        assert(host.loop.isCurrentThread, "RuntimeCore used off its loop thread", file: file, line: line)
    }

    /// The clock's current instant (a fresh read; see ``loopTime`` for the cached one).
    var now: MonotonicInstant { host.clock.now }

    func refreshLoopTime() {
        turnState.loopTime = host.clock.now
    }

    // MARK: Turns

    /// Runs `body` as one turn of the loop (see the type's documentation).
    func turn(_ body: () -> Void) {
        assertOnLoop()
        if turnState.isInTurn {
            // Re-entered from a callback (e.g. a virtual clock fired on the loop thread):
            // the outer turn finishes the work.
            body()
            return
        }
        turnState.isInTurn = true
        host.activity.beginTurn()
        refreshLoopTime()
        checkStalls(at: loopTime)
        body()
        finishTurn()
        host.activity.endTurn()
        turnState.isInTurn = false
    }

    private func finishTurn() {
        // Timers this turn made due run once more here (a pause in it — SIGSTOP in a
        // callback — made them due), never again: a timer that is always due (one that
        // takes longer than its interval) would otherwise keep the turn from ending, and
        // the loop from ever reading a signal or a control request. What is due after that
        // pass arms the timer in the past: the next turn runs it, after the loop has polled.
        var ranLateTimers = false
        while true {
            drainInbound()
            if turnState.needsSettle {
                turnState.needsSettle = false
                settle()
                continue
            }
            if !ranLateTimers, let next = timers.nextWakeup {
                let current = now
                if next <= current {
                    ranLateTimers = true
                    checkStalls(at: current)
                    runDueTimers(now: current)
                    continue
                }
            }
            break
        }
        reportEarlyQueuedEnds()
        rearmTimer()
        metrics.flush()
        if !turnState.quiescenceWaiters.isEmpty {
            let waiters = turnState.quiescenceWaiters
            turnState.quiescenceWaiters = []
            for waiter in waiters { waiter.signal() }
        }
    }

    /// Away at least a stall hook's threshold since time was last looked at here (idle
    /// between turns, or paused in one): the hooks' checks (a fleet's claims) run before
    /// any callback that could act on what the pause made stale — a handler's timer among
    /// them.
    private func checkStalls(at instant: MonotonicInstant) {
        guard let shortest = hooks.shortestStall else { return }
        if let last = turnState.lastStallCheck, instant > last, instant - last >= shortest {
            let away = instant - last
            for (threshold, hook) in hooks.stalls where away >= threshold { hook(away) }
        }
        turnState.lastStallCheck = instant
    }

    private func drainInbound() {
        while true {
            host.queue.takeAll(into: &turnState.inbound)  // hands the queue our empty buffer, keeps capacity
            if turnState.inbound.isEmpty { return }
            for item in turnState.inbound { process(item) }
            turnState.inbound.removeAll(keepingCapacity: true)
        }
    }

    private func process(_ item: InboundWork) {
        switch item {
        case .begin(let request): applyQueuedBegin(request)
        case .end(let id, let callSite): end(id, callSite: callSite, queued: true)
        case .lifecycle(let request, let source): apply(request, from: source)
        case .job(let job):
            refreshLoopTime()
            host.activity.run(.executorJob) { host.executor.run(job) }
        case .run(let body):
            refreshLoopTime()
            host.activity.run(.closure) { body() }
        }
    }

    /// Calls user code as `callback`: named for the watchdog, timed for metrics.
    func callUser(_ callback: LoopCallback, timer: Timer, _ body: () -> Void) {
        let started = SystemClock.monotonicNanoseconds()
        refreshLoopTime()
        host.activity.run(callback, body)
        timer.recordNanoseconds(Int64(clamping: SystemClock.monotonicNanoseconds() &- started))
        refreshLoopTime()
    }

    // MARK: Timer

    /// Arms the one timer for the next wake-up: the earlier of the grants' deadlines and
    /// the loop timers.
    func rearmTimer() {
        guard lifecycle.state != .terminated else {
            // Nothing is due any more: a virtual clock must not keep stepping to this runtime.
            turnState.wakeup.arm(at: nil, now: { host.clock.now })
            return
        }
        var next = engine.deadlines.nextWakeup
        if let timer = timers.nextWakeup, next.map({ timer < $0 }) ?? true { next = timer }
        turnState.wakeup.arm(at: next, now: { host.clock.now })
    }

    /// The timer fired (or virtual time reached the wake-up).
    func timerFired() {
        turnState.wakeup.fired()
        refreshLoopTime()
        processDeadlines(now: loopTime)
        runDueTimers(now: loopTime)
    }

    private func runDueTimers(now: MonotonicInstant) {
        for timer in timers.popDue(now: now) {
            refreshLoopTime()
            host.activity.run(.timer(timer.callSite)) { timer.fire() }
        }
    }

    /// Adds a loop timer; one already due runs before this turn ends.
    func add(_ timer: LoopTimer) {
        assertOnLoop()
        timers.add(timer, at: timer.deadline)
    }

    /// The wall clock was set: every hook re-plans.
    func wallClockStepped(because reason: String = "the wall clock was set") {
        logger.notice("\(reason); plans in wall-clock time are recomputed")
        for hook in hooks.wallClockSteps { hook() }
    }

    /// A loop timer was cancelled: it no longer decides the next wake-up.
    func timersChanged() {
        timers.removeCancelled()
    }

    // MARK: Shutdown

    /// The lifecycle reached `.terminated`: finish streams, close every handle.
    func shutDown() {
        for leftover in host.queue.close() {
            switch leftover {
            case .begin(let request):
                published.releaseQueuedGrant()
                logger.warning(
                    "background task refused: the runtime terminated before it began",
                    metadata: ["task": "\(request.name)", "id": "\(request.id)", "call_site": "\(request.callSite)"])
                request.endHandler?(.terminated, nil)
            case .job:
                logger.error("a job was enqueued on the loop executor after termination; it is dropped")
            case .run(let body):
                body()
            case .end:
                published.restoreQueuedEnd()
            case .lifecycle:
                break
            }
        }
        for entry in observers.removeAll() { entry.onFinish?() }
        for timer in timers.removeAll() { timer.cancel() }  // never due now
        for action in hooks.removeAll() { action() }
        host.loop.closeAllHandles()
    }
}
