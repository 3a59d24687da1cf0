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
/// ``GrantTable`` stores grants, ``DeadlineSchedule`` knows when they are due,
/// ``ObserverRegistry`` holds observers. The core performs what they decide and calls
/// user code, one callback at a time, on the loop thread.
///
/// Every entry from libuv goes through ``turn(_:)``: it runs the work, drains the
/// inbound queue until it is empty, applies deferred lifecycle decisions, re-arms the
/// single deadline timer and flushes metrics, in that order.
final class RuntimeCore: @unchecked Sendable {  // confined to the loop thread
    let configuration: RuntimeConfiguration
    let clock: any RuntimeClock
    let loop: EventLoop
    let queue: InboundQueue
    let published: PublishedState
    let activity: LoopActivity
    let executor: LoopExecutor
    var logger: Logger { configuration.logger }

    let decisions: GrantDecisions
    // Loop-confined state. `@exclusivity(unchecked)`: only the loop thread touches these,
    // and dynamic exclusivity checks on every begin/end cost more than the work itself.
    // The rule that makes it safe: no `inout` access to them spans a call into user code
    // (copy out, call the handler, write back), because a handler may begin or end
    // grants and so touch the same storage.
    @exclusivity(unchecked) var metrics: RuntimeMetrics
    @exclusivity(unchecked) var lifecycle: LifecycleMachine
    let grants = GrantTable()
    @exclusivity(unchecked) var deadlines: DeadlineSchedule
    @exclusivity(unchecked) var observers = ObserverRegistry()
    @exclusivity(unchecked) var timers = LoopTimers()
    /// The time the current callback started, like libuv's `uv_now`: grants begun on the
    /// loop thread take it as their begin time, which saves a clock read per begin.
    @exclusivity(unchecked) private(set) var loopTime = MonotonicInstant.zero

    /// Queued IDs ended on the loop before their begin was applied (see `end`).
    @exclusivity(unchecked) var earlyQueuedEnds: [UInt64: (callSite: CallSite, queued: Bool)] = [:]
    /// A lifecycle decision to take once the current transition is over.
    var needsSettle = false
    var transitionDepth = 0
    @exclusivity(unchecked) var wakeup: WakeupTimer
    /// Threads waiting until the loop has applied everything queued.
    var quiescenceWaiters: [DispatchSemaphore] = []
    var onShutdown: [() -> Void] = []
    /// Drivers' hooks for lifecycle events, called before observers.
    var eventHooks: [(LifecycleEvent) -> Void] = []
    /// Drivers' hooks for a step of the wall clock, and what notices one (made on first use).
    var wallClockStepHooks: [() -> Void] = []
    var wallClockWatcher: WallClockStepWatcher?
    /// Parts other modules add to the status line (the scheduler's next run), and the
    /// drivers that show it again when a part changes.
    var statusParts: [() -> String?] = []
    var statusHooks: [() -> Void] = []
    /// Drivers' hooks for a loop that was away longer than their threshold (the process
    /// paused, frozen or starved), called at the start of the next turn, before anything
    /// else in it; the shortest threshold, and when the last turn began (a pause can come
    /// in the middle of a turn as well as between two).
    var stallHooks: [(threshold: Duration, hook: (Duration) -> Void)] = []
    var shortestStall: Duration?
    private var lastTurnStarted: MonotonicInstant?
    private var isInTurn = false
    private var buffer: [InboundWork] = []

    init(
        configuration: RuntimeConfiguration, clock: any RuntimeClock, loop: EventLoop,
        queue: InboundQueue, published: PublishedState, activity: LoopActivity, executor: LoopExecutor
    ) {
        self.wakeup = WakeupTimer(loop: loop, virtual: nil)
        self.configuration = configuration
        self.clock = clock
        self.loop = loop
        self.queue = queue
        self.published = published
        self.activity = activity
        self.executor = executor
        self.metrics = RuntimeMetrics(factory: configuration.metricsFactory)
        self.deadlines = DeadlineSchedule(leadTime: configuration.expirationLeadTime)
        self.lifecycle = LifecycleMachine(repeatedTerminationGrace: configuration.repeatedTerminationGrace)
        self.decisions = GrantDecisions(
            leadTime: configuration.expirationLeadTime, terminationPolicy: configuration.terminationPolicy)
    }

    /// Traps in debug builds when called off the loop thread (swift-nio's
    /// `assertInEventLoop`): every member of the core is the loop thread's alone.
    @inline(__always)
    func assertOnLoop(file: StaticString = #fileID, line: UInt = #line) {
        assert(loop.isCurrentThread, "RuntimeCore used off its loop thread", file: file, line: line)
    }

    /// The clock's current instant (a fresh read; see ``loopTime`` for the cached one).
    var now: MonotonicInstant { clock.now }

    func refreshLoopTime() {
        loopTime = clock.now
    }

    // MARK: Turns

    /// Runs `body` as one turn of the loop (see the type's documentation).
    func turn(_ body: () -> Void) {
        assertOnLoop()
        if isInTurn {
            // Re-entered from a callback (e.g. a virtual clock fired on the loop thread):
            // the outer turn finishes the work.
            body()
            return
        }
        isInTurn = true
        activity.beginTurn()
        refreshLoopTime()
        if let shortest = shortestStall {
            // Away longer than a hook's threshold since the last turn began (idle, or paused
            // in the middle of that turn): its checks (a fleet's claims) come before any
            // callback of this turn — a handler's timer among them.
            if let started = lastTurnStarted, loopTime > started, loopTime - started >= shortest {
                let away = loopTime - started
                for (threshold, hook) in stallHooks where away >= threshold { hook(away) }
            }
            lastTurnStarted = loopTime
        }
        body()
        finishTurn()
        activity.endTurn()
        isInTurn = false
    }

    private func finishTurn() {
        while true {
            drainInbound()
            if needsSettle {
                needsSettle = false
                settle()
                continue
            }
            if let next = timers.nextWakeup, next <= now {
                runDueTimers(now: now)
                continue
            }
            break
        }
        reportEarlyQueuedEnds()
        rearmTimer()
        metrics.flush()
        if !quiescenceWaiters.isEmpty {
            let waiters = quiescenceWaiters
            quiescenceWaiters = []
            for waiter in waiters { waiter.signal() }
        }
    }

    private func drainInbound() {
        while true {
            queue.takeAll(into: &buffer)  // hands the queue our empty buffer, keeps capacity
            if buffer.isEmpty { return }
            for item in buffer { process(item) }
            buffer.removeAll(keepingCapacity: true)
        }
    }

    private func process(_ item: InboundWork) {
        switch item {
        case .begin(let request): applyQueuedBegin(request)
        case .end(let id, let callSite): end(id, callSite: callSite, queued: true)
        case .lifecycle(let request, let source): apply(request, from: source)
        case .job(let job):
            refreshLoopTime()
            activity.run(.executorJob) { executor.run(job) }
        case .run(let body):
            refreshLoopTime()
            activity.run(.closure) { body() }
        }
    }

    /// Calls user code as `callback`: named for the watchdog, timed for metrics.
    func callUser(_ callback: LoopCallback, timer: Timer, _ body: () -> Void) {
        let started = SystemClock.monotonicNanoseconds()
        refreshLoopTime()
        activity.run(callback, body)
        timer.recordNanoseconds(Int64(clamping: SystemClock.monotonicNanoseconds() &- started))
        refreshLoopTime()
    }

    // MARK: Timer

    /// Arms the one timer for the next wake-up: the earlier of the grants' deadlines and
    /// the loop timers.
    func rearmTimer() {
        guard lifecycle.state != .terminated else {
            // Nothing is due any more: a virtual clock must not keep stepping to this runtime.
            wakeup.arm(at: nil, now: { clock.now })
            return
        }
        var next = deadlines.nextWakeup
        if let timer = timers.nextWakeup, next.map({ timer < $0 }) ?? true { next = timer }
        wakeup.arm(at: next, now: { clock.now })
    }

    /// The timer fired (or virtual time reached the wake-up).
    func timerFired() {
        wakeup.fired()
        refreshLoopTime()
        processDeadlines(now: loopTime)
        runDueTimers(now: loopTime)
    }

    private func runDueTimers(now: MonotonicInstant) {
        for timer in timers.popDue(now: now) {
            refreshLoopTime()
            activity.run(.timer(timer.callSite)) { timer.fire() }
        }
    }

    /// Adds a loop timer; one already due runs before this turn ends.
    func add(_ timer: LoopTimer) {
        assertOnLoop()
        timers.add(timer, at: timer.deadline)
    }

    /// The wall clock was set: every hook re-plans.
    func wallClockStepped() {
        logger.notice("the wall clock was set; plans in wall-clock time are recomputed")
        for hook in wallClockStepHooks { hook() }
    }

    /// A loop timer was cancelled: it no longer decides the next wake-up.
    func timersChanged() {
        timers.removeCancelled()
    }

    // MARK: Shutdown

    /// The lifecycle reached `.terminated`: finish streams, close every handle.
    func shutDown() {
        for leftover in queue.close() {
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
        for action in onShutdown { action() }
        onShutdown = []
        eventHooks = []
        wallClockStepHooks = []
        statusParts = []
        statusHooks = []
        wallClockWatcher = nil
        loop.closeAllHandles()
    }
}
