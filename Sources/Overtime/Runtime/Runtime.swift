import Dispatch
import Logging
import OvertimeSupport
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The Overtime runtime: a lifecycle, expiring background-task grants, and their
/// enforcement, on one libuv loop.
///
/// ```swift
/// let runtime = try Runtime()
/// let token = runtime.observe { event in
///     guard event == .didEnterBackground else { return }
///     let id = runtime.beginBackgroundTask(name: "flush") { flusher.stop() }
///     flusher.flush { runtime.endBackgroundTask(id) }
/// }
/// runtime.run()   // until terminated
/// ```
///
/// Every member is safe to call from any thread. Calls made off the loop thread are
/// queued (FIFO per calling thread) and applied on the loop; observers, expiration
/// handlers and end handlers run on the loop thread, one at a time.
///
/// `Runtime` is a facade: the lifecycle machine, the grant table, the deadline
/// schedule, the observer registry, the loop and the watchdog are separate parts.
public final class Runtime: Sendable {
    /// The configuration the runtime was created with (validated).
    public let configuration: RuntimeConfiguration
    /// The clock every deadline is computed with.
    public let clock: any RuntimeClock
    /// The loop thread as a Swift executor, for actors and tasks.
    public let executor: LoopExecutor

    let loop: EventLoop
    let queue: InboundQueue
    let published: PublishedState
    let core: RuntimeCore
    let drivers: DriverContext
    let controlCommands = ControlCommands()
    /// The control socket, in place from `init` on (see ``SocketPathClaim``).
    let controlListener: ListeningSocket?
    private let sharedMetrics: SharedMetrics
    private let watchdog: Watchdog?
    private let runState = Locked(RunState.notStarted)
    private let terminatedGroup = DispatchGroup()
    private let terminationWaiters = Locked<[CheckedContinuation<Void, Never>]?>([])
    private let nextObserverID = Atomic<UInt64>(0)
    /// The thread that made the runtime, and its signal mask before the runtime blocked
    /// the handled signals on it (see ``SignalDriver/blockUntilWatched(_:)``).
    private let creatingThread: Locked<CreatingThread?>

    private struct CreatingThread: @unchecked Sendable {  // pthread_t and sigset_t are plain values
        let thread: pthread_t
        let mask: sigset_t
    }

    private enum RunState { case notStarted, running, finished }

    /// The time remaining in the foreground, where no deadline applies: larger than any
    /// real budget, so comparisons such as `remaining < .seconds(5)` read naturally.
    public static let unlimitedTime = Duration.seconds(Int64.max)

    /// Creates a runtime. Nothing runs until ``run()`` or ``start()``.
    ///
    /// - Throws: ``RuntimeError/invalidConfiguration(field:reason:)`` naming a bad
    ///   field (a control socket path that is taken or in a missing folder among them), or
    ///   ``RuntimeError/libuv(call:code:)`` if the loop cannot be created.
    public init(
        configuration: RuntimeConfiguration = RuntimeConfiguration(),
        clock: any RuntimeClock = SystemClock()
    ) throws(RuntimeError) {
        try configuration.validate()
        if let endpoint = configuration.controlSocket {
            // At start, not when the loop runs: a daemon must not run on without its control
            // socket, and the socket is in place (with its final mode) before `run()`.
            if let path = endpoint.path {
                let folder = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
                var info = stat()
                if !folder.isEmpty, stat(folder, &info) != 0 {
                    throw .invalidConfiguration(
                        field: "controlSocket", reason: "cannot use the folder '\(folder)': \(errnoDescription())")
                }
            }
            do throws(ListeningSocket.Failure) {
                // Owner only; the server's peer check is the real gate, this closes the door too.
                controlListener = try ListeningSocket(endpoint, mode: 0o600, backlog: 16)
            } catch {
                switch error {
                case .unavailable(let refusal):
                    throw .invalidConfiguration(field: "controlSocket", reason: refusal)
                case .system(let operation, let code):
                    throw .invalidConfiguration(
                        field: "controlSocket",
                        reason: "cannot listen on \(endpoint): \(operation): \(errnoDescription(code))")
                }
            }
            if let warning = endpoint.path.flatMap(SocketPathClaim.sharedFolderWarning(for:)) {
                configuration.logger.warning("control socket: \(warning)")
            }
        } else {
            controlListener = nil
        }
        self.configuration = configuration
        self.clock = clock
        loop = try EventLoop()
        queue = InboundQueue(loop: loop)
        published = PublishedState()
        executor = LoopExecutor(loop: loop, queue: queue, logger: configuration.logger)
        let activity = LoopActivity()
        core = RuntimeCore(
            configuration: configuration, clock: clock, loop: loop, queue: queue,
            published: published, activity: activity, executor: executor)
        drivers = DriverContext(core: core)
        sharedMetrics = core.metrics.shared
        watchdog = configuration.watchdogTimeout.map {
            Watchdog(
                timeout: $0, policy: configuration.watchdogPolicy, activity: activity,
                logger: configuration.logger, onTrip: configuration.onWatchdogTrip)
        }
        terminatedGroup.enter()
        creatingThread = Locked(
            configuration.signalHandling.map {
                CreatingThread(thread: pthread_self(), mask: SignalDriver.blockUntilWatched($0))
            })
        // Unowned: the loop is owned by the core, which these closures would otherwise keep alive.
        let core = self.core
        loop.onWake = { [unowned core] in core.turn {} }
        loop.onTimer = { [unowned core] in core.turn { core.timerFired() } }
        if let watchdog { core.hooks.shutdown.append { watchdog.stop() } }
        // The system clock first, by type: a cast to a protocol scans every conformance
        // the program has (a tenth of a daemon's start), and daemons run on this clock.
        if !(clock is SystemClock), let driver = clock as? any VirtualTimeSource {
            let timer = VirtualTimer(
                fire: { [weak self] in self?.fireVirtualTimer() },
                waitForQueuedRequests: { [weak self] in self?.waitForQueuedRequests() },
                wallClockStepped: { [weak self] in self?.announceWallClockStep() })
            core.turnState.wakeup = WakeupTimer(loop: loop, virtual: timer)  // before the loop runs
            driver.register(timer)
        }
    }

    // MARK: Running

    /// Runs the loop on the calling thread until the lifecycle is `.terminated`, then
    /// closes every libuv handle and returns. Daemons call it from the main thread.
    ///
    /// Calling it (or ``start()``) a second time logs an error and returns at once.
    public func run() {
        guard markRunning() else { return }
        runLoop()
    }

    /// Runs the loop on a thread of its own and returns at once: for a library
    /// embedded in a host program. `waitUntilTerminated()` waits for the end (from a thread, or `await`ed).
    public func start() {
        guard markRunning() else { return }
        spawnThread(name: "overtime-loop") { [self] in runLoop() }  // inherits the blocked signals
        // The host's thread gets its own mask back; the loop thread unblocks them once watched.
        if let creator = creatingThread.withLock({ $0 }), pthread_equal(creator.thread, pthread_self()) != 0 {
            var mask = creator.mask
            pthread_sigmask(SIG_SETMASK, &mask, nil)
        }
    }

    private func runLoop() {
        // A peer that hangs up makes a socket write raise SIGPIPE, which kills the
        // process by default; libuv leaves that to the program. Blocked on the loop
        // thread only (the signal goes to the writing thread), the write fails with EPIPE
        // and the host's own disposition of SIGPIPE is left alone.
        var pipeSignal = sigset_t()
        sigemptyset(&pipeSignal)
        sigaddset(&pipeSignal, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &pipeSignal, nil)
        loop.adoptCurrentThread()
        watchdog?.start()
        startDrivers()
        loop.run()
        watchdog?.stop()
        runState.withLock { $0 = .finished }
        terminatedGroup.leave()
        let waiters = terminationWaiters.withLock { waiters in
            defer { waiters = nil }  // nil: terminated; later callers return at once
            return waiters ?? []
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Blocks until the runtime has terminated and its loop has closed.
    public func waitUntilTerminated() {
        terminatedGroup.wait()
    }

    /// Suspends until the runtime has terminated and its loop has closed.
    public func waitUntilTerminated() async {
        await withCheckedContinuation { continuation in
            let done = terminationWaiters.withLock { waiters in
                guard waiters != nil else { return true }
                waiters!.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    /// Whether the loop closed cleanly (every libuv handle closed) after termination;
    /// `nil` while it runs.
    public var loopClosedCleanly: Bool? {
        guard runState.withLock({ $0 == .finished }) else { return nil }
        return loop.closeResult == 0
    }

    private func markRunning() -> Bool {
        let wasNotStarted = runState.withLock { state in
            defer { if state == .notStarted { state = .running } }
            return state == .notStarted
        }
        if !wasNotStarted {
            configuration.logger.error("Runtime.run() or start() was called on a runtime already started; ignored")
        }
        return wasNotStarted
    }

    private var isLoopAlive: Bool { runState.withLock { $0 == .running } }

    /// Whether the caller runs on the loop thread.
    public var isOnLoopThread: Bool { loop.isCurrentThread }

    // MARK: Lifecycle

    /// The current lifecycle state, as last applied by the loop.
    public var state: LifecycleState { published.state }

    /// Leaves the foreground: `willResignActive`, `didEnterBackground` (and
    /// `didSuspend` once no grant is open). A no-op in the background.
    public func requestBackground() { request(.background) }

    /// Returns to the foreground: `willEnterForeground`, `didBecomeActive`. Open grants
    /// go on; the background deadline is cleared. A no-op in the foreground.
    public func requestForeground() { request(.foreground) }

    /// Delivers a ``LifecycleEvent/reload`` event to every observer (what SIGHUP does by
    /// default). The state does not change.
    public func requestReload() {
        let core = self.core
        if !queue.enqueue(.run { core.emitReload() }) {
            configuration.logger.debug("reload request after termination ignored")
        }
    }

    /// Tells observers the system is short of memory: ``LifecycleEvent/didReceiveMemoryWarning``
    /// on the loop, at most one per ``RuntimeConfiguration/memoryWarningInterval`` (one
    /// inside it is delivered at its end), then the freed heap goes back to the system.
    /// From any thread; `OvertimeSystem`'s `MemoryPressureMonitor` calls it when the
    /// kernel reports memory stalls.
    public func requestMemoryWarning() {
        let core = self.core
        if !queue.enqueue(.run { core.memoryWarning(from: "requestMemoryWarning()") }) {
            configuration.logger.debug("memory warning after termination ignored")
        }
    }

    /// Terminates gracefully: from the foreground via the background, then
    /// `willTerminate`; then waits until no grant is open or the budget is spent.
    public func requestTermination() { request(.termination) }

    private func request(_ request: LifecycleRequest) {
        // Always queued, even on the loop thread: every observer sees an event before
        // the next transition starts.
        if !queue.enqueue(.lifecycle(request, source: "the program's request")) {
            configuration.logger.debug(
                "lifecycle request after termination ignored", metadata: ["request": "\(request)"])
        }
    }

    /// Calls `handler` on the loop thread with every lifecycle event from now on, until
    /// the returned token is cancelled or released.
    public func observe(_ handler: @escaping @Sendable (LifecycleEvent) -> Void) -> ObservationToken {
        addObserver(handler, onFinish: nil)
    }

    /// Every lifecycle event from now on, never dropping one; the sequence finishes when
    /// the runtime terminates (or immediately if it already has).
    ///
    /// An async consumer sees events after the loop has moved on: begin grants for a
    /// transition in an ``observe(_:)`` closure, which runs before the transition ends.
    public var lifecycleEvents: AsyncStream<LifecycleEvent> {
        AsyncStream(bufferingPolicy: .unbounded) { continuation in
            let token = addObserver({ continuation.yield($0) }, onFinish: { continuation.finish() })
            continuation.onTermination = { _ in token.cancel() }
        }
    }

    private func addObserver(
        _ handler: @escaping @Sendable (LifecycleEvent) -> Void, onFinish: (@Sendable () -> Void)?
    ) -> ObservationToken {
        let id = nextObserverID.wrappingAdd(1, ordering: .relaxed).newValue
        let entry = ObserverRegistry.Entry(id: id, handler: handler, onFinish: onFinish)
        let core = self.core
        let queue = self.queue
        let token = ObservationToken(flag: entry) {
            _ = queue.enqueue(.run { core.observers.remove(id: id) })
        }
        if !onLoop({ core in core.addObserver(entry) }) {
            onFinish?()
        }
        return token
    }

    // MARK: Loop access

    /// Runs `body` on the loop thread, after everything queued before it.
    public func execute(_ body: @escaping @Sendable () -> Void) {
        if !queue.enqueue(.run(body)) {
            configuration.logger.error("Runtime.execute after termination: the closure is dropped")
        }
    }

    /// Blocks until the loop has applied every request queued before this call (and
    /// whatever they queued in turn). Returns at once on the loop thread, before
    /// ``start()``/``run()``, and after termination.
    public func waitForQueuedRequests() {
        guard !isOnLoopThread else { return }
        _ = enqueueAndWait { _ in }
    }

    /// Runs `body` with the core on the loop: inline on the loop thread, queued
    /// otherwise. Returns `false` if the runtime has shut down.
    @discardableResult
    func onLoop(_ body: @escaping @Sendable (RuntimeCore) -> Void) -> Bool {
        if isOnLoopThread {
            body(core)
            return true
        }
        let core = self.core
        return queue.enqueue(.run { body(core) })
    }

    /// Runs `body` on the loop and waits for its result; `nil` when the loop is not
    /// running (not started, or terminated).
    func onLoopAndWait<T: Sendable>(_ body: @escaping @Sendable (RuntimeCore) -> T) -> T? {
        if isOnLoopThread { return body(core) }
        return enqueueAndWait(body)
    }

    /// Queues `body` and blocks until the loop has run it and finished the turn it ran
    /// in (so what it queued in turn was applied too); `nil` when the loop is not running.
    private func enqueueAndWait<T: Sendable>(_ body: @escaping @Sendable (RuntimeCore) -> T) -> T? {
        guard isLoopAlive else { return nil }
        let result = Locked<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        let core = self.core
        let queued = queue.enqueue(
            .run {
                result.withLock { $0 = body(core) }
                core.turnState.quiescenceWaiters.append(done)
            })
        guard queued else { return nil }
        done.wait()
        return result.withLock { $0 }
    }

    /// A virtual clock's wall clock stepped: the hooks run on the loop; waits for them.
    private func announceWallClockStep() {
        if isOnLoopThread {
            core.wallClockStepped()
        } else {
            _ = enqueueAndWait { core in core.wallClockStepped() }
        }
    }

    private func fireVirtualTimer() {
        if isOnLoopThread {
            core.turn { core.timerFired() }
        } else {
            _ = enqueueAndWait { core in core.timerFired() }
        }
    }

    var metrics: SharedMetrics { sharedMetrics }
}
