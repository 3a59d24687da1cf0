import Logging
import Overtime
import OvertimeSupport
import Synchronization
import Tracing

/// Deferred and periodic background work that survives restarts: what BGTaskScheduler and
/// WorkManager give mobile apps and systemd timers give units, for a program that embeds
/// an Overtime `Runtime`.
///
/// ```swift
/// let scheduler = try Scheduler(runtime: runtime, configuration: .init(storePath: "/var/lib/app/schedule.db"))
/// try scheduler.register("com.example.refresh") { task in
///     refresh(run: task.runID) { ok in task.setTaskCompleted(success: ok) }
/// }
/// try scheduler.start()
/// var request = ScheduledTaskRequest(identifier: "com.example.refresh")
/// request.repetition = Repetition(every: .seconds(3600), flex: .seconds(600))
/// try scheduler.submit(request)              // kept if pending (the default policy)
/// ```
///
/// - **Durable**: every change is a transaction in the store before it takes effect; a run
///   in progress at a crash is marked interrupted at the next start and retried once (same
///   run ID, next attempt); a completed run is never repeated.
/// - **On time, never early**: plans are wall-clock times (persisted); waiting is one timer
///   on the runtime's monotonic clock; a step of the wall clock re-plans everything.
/// - **Each run is a grant** named after its identifier, with the request's maximum
///   duration. Never completed: terminated, recorded as a failed attempt with its report.
/// - **Never two runs of one identifier at once**; at most
///   ``SchedulerConfiguration/maximumConcurrentRuns`` in all; the backlog a start finds
///   (runs due while the program was down) starts ``SchedulerConfiguration/startSpacing`` apart.
///
/// Every member is safe from any thread. Handlers run on the runtime's loop thread.
/// Decisions and store writes happen on the scheduler's own serial queue, never on the
/// loop: the queue owns the scheduler's state, and everything else (the loop, handlers
/// completing, the store's notifications, the sync queue) reaches it by queueing work. Only runs in progress are kept in memory: the store is the index of due times.
///
/// The members that reach the store come in two forms. The `async` ones (`try await
/// scheduler.submit(request)`) run on the scheduler's queue and resume their caller from
/// it: the ones to call on the loop, in a handler that submits more work. The synchronous
/// ones wait for that queue (and the store: a fleet's database, up to its operation
/// timeout), so called on the loop thread they refuse with
/// ``SchedulerError/Code/blockingCallOnTheLoop`` instead of holding it, as SwiftNIO's
/// `EventLoopFuture.wait()` refuses on its loop; elsewhere (the main thread before
/// `runtime.run()`, a thread of the program's own) they are the plain form.
public final class Scheduler: Sendable {
    /// The runtime whose grants the runs get.
    public let runtime: Runtime
    /// How it stores and starts runs.
    public let configuration: SchedulerConfiguration
    /// What opening the store found and repaired.
    public let recovery: StoreRecovery

    let store: any ScheduleStore
    let conditions: any ConditionSource
    /// Owns every decision, store write and the ``State``, in order.
    let queue: SerialWorkQueue
    /// Where the store's commits are put on disk, beside the queue's decisions.
    let syncQueue = SerialWorkQueue(name: "overtime-sync")
    /// Where the bodies of async handlers run (their nonisolated code).
    let handlerQueue = SerialWorkQueue(name: "overtime-tasks")
    /// The scheduler's state: the queue's alone.
    let state: QueueConfined<State>
    /// The handlers, filled before ``start()`` and read-only from then on.
    let registry = Locked(Registry())
    /// A decision cycle is queued: more reasons to decide join it (set from any thread).
    let cycleQueued = Locked(false)
    /// Handlers' completions not yet taken by the queue (its inbox: the first one queues
    /// the message that takes them all).
    let completions = Locked<[Completion]>([])
    /// The runs whose grants are open, for stopping them when their claims lapse: the
    /// loop's stall check must do that before anything else in its turn, without waiting
    /// for the queue.
    let openRuns = Locked<[String: OpenRun]>([:])
    /// The next run planned, as the status line shows it (the queue writes, the loop reads).
    let statusPart = Locked<String?>(nil)
    /// Batches written to the store so far: the queue counts them, the sync queue reads
    /// how many its `fsync` covers (those written before it began).
    let writtenBatches = Atomic<Int>(0)
    /// A sync is queued and not yet begun: commits before it begins share it.
    let syncQueued = Atomic<Bool>(false)
    /// Batches on disk: the sync queue's alone.
    let syncedBatches: QueueConfined<Int>
    /// The runtime shut down: its loop and timers are gone, so nothing more is decided
    /// (a fleet's notifications may still arrive); the store stays readable. Set by the loop.
    let runtimeShutDown = Locked(false)
    /// Into the runtime's metrics factory.
    let metrics: SchedulerMetrics
    /// Counts the requests by state when metrics are collected; set by ``start()``.
    let requestSampler = Locked<MetricSamplerRegistration?>(nil)
    /// A count of the requests by state is on its way (one at a time).
    let samplingRequests = Atomic<Bool>(false)
    /// Why this process cannot wake the system (``ScheduledTaskRequest/wakesSystem``),
    /// asked of the kernel once; `nil` when it can.
    let wakeAlarmUnavailableReason = DriverContext.wakeAlarmUnavailableReason
    /// Numbers the consumers of ``workInfoUpdates(_:)``.
    let watcherIDs = Atomic<Int>(0)
    /// How many consumers of ``workInfoUpdates(_:)`` there are (the queue counts them): a
    /// handler's progress reaches the queue only when someone watches.
    let watching = Atomic<Int>(0)
    var logger: Logger { configuration.logger }

    enum Handler: Sendable {
        case synchronous(@Sendable (ScheduledTask) -> Void)
        case asynchronous(@Sendable (ScheduledTask) async throws -> Void)
    }

    /// A run in progress, until its end is durable.
    struct ActiveRun: Sendable {
        let task: ScheduledTask
        let grant: BackgroundTaskID
        let startedAt: WallClockInstant
        /// The request and plan as they stand (an update while it runs changes the request).
        var stored: StoredRequest
        /// Its span (with a tracer), ended with its end.
        let span: (any Span)?
        /// The request was replaced or cancelled while this run ran: its end touches no plan.
        var detached = false
        /// A requirement stopped holding: the run was told to stop.
        var stoppedBy: Requirement?
        /// Its claim on a shared store could not be renewed: the run was told to stop
        /// before another instance takes it.
        var claimLapsing = false
        /// It ended: what the next commit records. Its grant ends once that is durable.
        var ending: RunEnd?
        /// The runtime ended the grant itself (terminated at its deadline).
        var grantEnded = false
        /// When its progress was last written to the store (``ProgressRecording``).
        var progressWrittenAt: MonotonicInstant?
    }

    /// A run whose end is written but not yet on disk: its grant ends after the next sync.
    struct AwaitingDisk: Sendable {
        let task: ScheduledTask
        let grant: BackgroundTaskID
        /// Written by this batch (``Scheduler/writtenBatches``).
        let batch: Int
        /// The runtime ended the grant itself meanwhile (terminated at its deadline).
        var grantEnded: Bool
    }

    /// The handlers by identifier and by prefix.
    struct Registry: Sendable {
        var handlers: [String: Handler] = [:]
        /// Handlers for every identifier with a prefix, longest prefix first.
        var prefixHandlers: [(prefix: String, handler: Handler)] = []
        /// ``start()`` was called: no more handlers.
        var isClosed = false
    }

    /// A run whose grant is open (see ``openRuns``).
    struct OpenRun: Sendable {
        let grant: BackgroundTaskID
        /// Told to stop because its claim lapses (once).
        var claimLapsing = false
    }

    /// Everything the queue decides with.
    struct State: Sendable {
        /// The queue has started deciding (``start()``'s first work ran).
        var started = false
        var running: [String: ActiveRun] = [:]
        var timer: LoopTimer?
        /// When the last run of the backlog started, on the monotonic clock: spacing never
        /// depends on the wall clock (a step back would hold every start for the size of the step).
        var lastBacklogStart: MonotonicInstant?
        /// Runs due before this time are the backlog that start spacing paces: the time of
        /// the scheduler's start, or of the last step of the wall clock.
        var backlogMark: WallClockInstant?
        /// The wall clock less the monotonic clock when last looked at (``wallClockOffset()``):
        /// how far a step moved the wall clock.
        var wallClockOffset: Duration?
        /// The highest run ID given out.
        var lastRunID: Int64 = 0
        /// Why the runtime refused the last grant (suspended, terminated), until a
        /// lifecycle change.
        var refusal: String?
        var token: ObservationToken?
        /// The program is terminating: no run starts any more (runs in progress finish).
        var terminating = false
        /// Closed as if the process had ended (tests of restarts): nothing more is done.
        var abandoned = false
        /// The machine's conditions as last read.
        var conditions = SystemConditions()
        /// The next run planned, as the status line shows it.
        var nextRun: String?
        /// Due requests whose identifier has no handler in this program (warned once each).
        var unhandled: Set<String> = []
        /// Identifiers of runs whose end is noted, for the next cycle to write.
        var ended: [String] = []
        /// Runs whose end is written, their grants open until a sync puts it on disk.
        var awaitingDisk: [AwaitingDisk] = []
        /// When the history was last pruned (wall clock), `nil` before the first time.
        var lastPruned: WallClockInstant?
        /// When the wake alarm is set for (the earliest next run of a request that wakes the
        /// system), as last asked of the runtime.
        var wakeAlarm: WallClockInstant?
        /// The consumers of ``workInfoUpdates(_:)``, by identifier and number.
        var watchers: [String: [Int: WorkWatcher]] = [:]
    }

    /// Opens (creating) the store and recovers it. Nothing runs until ``start()``.
    ///
    /// - Throws: ``SchedulerError/Code/store`` when the store cannot be opened (a newer
    ///   schema among the reasons) or ``SchedulerError/Code/invalidRequest`` for a bad
    ///   configuration.
    public init(runtime: Runtime, configuration: SchedulerConfiguration) throws(SchedulerError) {
        guard configuration.maximumConcurrentRuns >= 1 else {
            throw SchedulerError(
                code: .invalidRequest, message: "maximumConcurrentRuns must be at least 1",
                field: "maximumConcurrentRuns")
        }
        try configuration.historyRetention.check()
        try ScheduleLimits.check("startSpacing", configuration.startSpacing, in: .zero...ScheduleLimits.maximumDuration)
        try ScheduleLimits.check(
            "conditionRecheckInterval", configuration.conditionRecheckInterval,
            in: ScheduleLimits.minimumInterval...ScheduleLimits.maximumDuration)
        self.runtime = runtime
        self.configuration = configuration
        metrics = SchedulerMetrics(factory: runtime.configuration.metricsFactory)
        conditions =
            configuration.conditions
            ?? LinuxConditionSource(configuration: .init(storagePath: Self.folder(of: configuration.storePath)))
        let database = configuration.database ?? .sqlite(path: configuration.storePath)
        let context = ScheduleStoreContext(
            now: runtime.clock.wallClockNow, wallClock: { [clock = runtime.clock] in clock.wallClockNow },
            logger: configuration.logger, watchdogTimeout: runtime.configuration.watchdogTimeout)
        let queue = SerialWorkQueue(name: "overtime-sched")
        let store: any ScheduleStore
        switch database.open {
        case .synchronous(let open):
            do {
                store = try open(context)
            } catch {
                throw .store(error)
            }
        case .asynchronous(let open):
            // A server to talk to first: the caller waits on the scheduler's queue as the
            // synchronous forms do, which the loop never does.
            if runtime.isOnLoopThread {
                throw SchedulerError(
                    code: .blockingCallOnTheLoop,
                    message:
                        "Scheduler.init was called on the runtime's loop thread, which it would hold until \(database) answers: make the scheduler before the runtime runs, or off its loop"
                )
            }
            do {
                store = try queue.syncTask { () async throws(ScheduleStoreError) in try await open(context) }
            } catch {
                throw .store(error)
            }
        }
        do {
            self.store = store
            self.recovery = store.recovery
            self.queue = queue
            state = QueueConfined(State(lastRunID: try store.lastRunID()), on: queue)
            syncedBatches = QueueConfined(0, on: syncQueue)
        } catch {
            throw .store(error)
        }
    }

    /// The wall-clock time as the store reckons it: the runtime's clock, or a shared
    /// database's where the schedule is a fleet's (due times are compared on one clock).
    var wallClockNow: WallClockInstant { store.wallClock(runtime.clock.wallClockNow) }

    private static func folder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    // MARK: Registering and starting

    /// Registers the handler for `identifier`, before ``start()``. It runs on the loop
    /// thread and must end each task with ``ScheduledTask/setTaskCompleted(success:fileID:line:)``.
    public func register(
        _ identifier: String, handler: @escaping @Sendable (ScheduledTask) -> Void
    ) throws(SchedulerError) {
        try register(identifier, .synchronous(handler), isPrefix: false)
    }

    /// Registers an async body for `identifier`, before ``start()``: returning completes
    /// the task successfully, throwing unsuccessfully; expiration cancels the body.
    ///
    /// The body's nonisolated code runs on the scheduler's task thread (one thread, asleep
    /// while no body runs), not on Swift's global executor, whose Dispatch pool would wake
    /// the process every second from then on. Bodies take turns on it between their
    /// `await`s: hand CPU-heavy work to an executor of your own.
    public func register(
        _ identifier: String, body: @escaping @Sendable (ScheduledTask) async throws -> Void
    ) throws(SchedulerError) {
        try register(identifier, .asynchronous(body), isPrefix: false)
    }

    /// Registers the handler for every identifier that starts with `prefix` (one handler
    /// for many requests of a kind, e.g. `"thumbnail."` for `"thumbnail.4711"`), before
    /// ``start()``. An identifier registered on its own, or a longer prefix, comes first.
    public func register(
        prefix: String, handler: @escaping @Sendable (ScheduledTask) -> Void
    ) throws(SchedulerError) {
        try register(prefix, .synchronous(handler), isPrefix: true)
    }

    /// Registers an async body for every identifier that starts with `prefix` (see
    /// ``register(prefix:handler:)``).
    public func register(
        prefix: String, body: @escaping @Sendable (ScheduledTask) async throws -> Void
    ) throws(SchedulerError) {
        try register(prefix, .asynchronous(body), isPrefix: true)
    }

    private func register(_ name: String, _ handler: Handler, isPrefix: Bool) throws(SchedulerError) {
        try registry.withLock { registry throws(SchedulerError) in
            guard !registry.isClosed else {
                throw SchedulerError(
                    code: .registeredAfterStart, message: "'\(name)' registered after start(); register first")
            }
            try ScheduleLimits.check(identifier: name, field: isPrefix ? "prefix" : "identifier")
            if isPrefix {
                guard !registry.prefixHandlers.contains(where: { $0.prefix == name }) else {
                    throw SchedulerError(code: .alreadyRegistered, message: "prefix '\(name)' is already registered")
                }
                registry.prefixHandlers.append((name, handler))
                registry.prefixHandlers.sort { $0.prefix.utf8.count > $1.prefix.utf8.count }
            } else {
                guard registry.handlers[name] == nil else {
                    throw SchedulerError(code: .alreadyRegistered, message: "'\(name)' is already registered")
                }
                registry.handlers[name] = handler
            }
        }
    }

    /// Records the handlers registered (closed at start) in the store, for inspectors. A
    /// store that cannot take it is warned about: the schedule runs as before.
    private func recordHandlers() async {
        let (identifiers, prefixes) = registry.withLock { ($0.handlers.keys.sorted(), $0.prefixHandlers.map(\.prefix)) }
        do throws(ScheduleStoreError) {
            try await store.recordHandlers(identifiers: identifiers, prefixes: prefixes, at: wallClockNow)
        } catch {
            logger.warning("cannot record the handlers in the schedule store: \(error)")
        }
    }

    /// The handler `identifier` runs with: its own, or its longest registered prefix's.
    func handler(for identifier: String) -> Handler? {
        registry.withLock { registry in
            registry.handlers[identifier] ?? registry.prefixHandlers.first { identifier.hasPrefix($0.prefix) }?.handler
        }
    }

    /// The name of the handler that serves `identifier`: the identifier itself, or the
    /// prefix it is served under (what metrics are labelled by).
    func handlerName(for identifier: String) -> String {
        registry.withLock { registry in
            registry.handlers[identifier] != nil
                ? identifier : registry.prefixHandlers.first { identifier.hasPrefix($0.prefix) }?.prefix ?? identifier
        }
    }

    /// Re-plans what the process missed (retrying runs a crash interrupted, pulling plans
    /// back if the wall clock went back meanwhile) and starts running what is due.
    public func start() throws(SchedulerError) {
        try registry.withLock { registry throws(SchedulerError) in
            guard !registry.isClosed else {
                throw SchedulerError(code: .alreadyStarted, message: "start() was called before")
            }
            registry.isClosed = true
        }
        let token = runtime.observe { [weak self] event in
            guard let self else { return }
            switch event {
            case .willTerminate: stopStartingRuns()
            case .didEnterBackground:
                // A grant held while the queue decides: a run due now begins its own grant
                // before the program could suspend with none open, and the loop never
                // waits for the store (a fleet's database may be slow to answer).
                // Ended once: when decided, or at its expiration if the store is slower.
                let deciding = Locked<BackgroundTaskID?>(nil)
                let runtime = runtime
                let end: @Sendable () -> Void = {
                    if let id = deciding.withLock({ $0.take() }), !id.isInvalid { runtime.endBackgroundTask(id) }
                }
                let id = runtime.beginBackgroundTask(name: "overtime.scheduler: deciding", expirationHandler: end)
                deciding.withLock { $0 = id }
                queue.task {
                    await self.lifecycleChanged()
                    end()
                }
            case .didBecomeActive, .willEnterForeground:
                queue.task { await self.lifecycleChanged() }
            default: break
            }
        }
        conditions.start(runtime: runtime) { [weak self] in
            guard let self else { return }
            queue.task { await self.conditionsChanged() }
        }
        store.start(
            ScheduleStoreEvents(
                changed: { [weak self] in self?.cycleSoon() },
                claimsLapsing: { [weak self] identifiers in self?.claimsLapsing(identifiers) }))
        addControlCommands()
        let context = runtime.driverContext
        runtime.execute { [weak self] in
            context.onWallClockStep { [weak self] in self?.wallClockStepped() }
            context.addStatusPart { [weak self] in self?.statusPart.withLock { $0 } }
            context.onWakeAlarm { [weak self] in self?.cycleSoon() }
            context.onShutdown { [weak self] in
                guard let self else { return }
                runtimeShutDown.withLock { $0 = true }
                queue.async { self.finishWatchers() }
            }
            if let threshold = self?.store.stallThreshold {
                context.onStall(longerThan: threshold) { [weak self] away in self?.checkClaimsAfterStall(away) }
            }
        }
        queue.task { [self] in
            state.value.started = true
            state.value.token = token
            state.value.conditions = conditions.read()
            state.value.wallClockOffset = wallClockOffset()
            state.value.backlogMark = wallClockNow
            await recordHandlers()
            await retryInterruptedRuns()
            await settleChainsLeftWaiting()
            await correctPlansForTheClock(step: nil)
            await cycle(conditionsAreFresh: true)
        }
        requestSampler.withLock { $0 = MetricSamplers.add { [weak self] in self?.sampleRequestCounts() } }
    }

    // MARK: Requests

    /// Submits `request`; what happens to a pending request of its identifier is
    /// `policy`'s call (by default it is kept). A request that finished (a one-shot done,
    /// or failed for good) is replaced under every policy. Durable when it returns.
    ///
    /// - Returns: what the submit did.
    /// - Throws: ``SchedulerError/Code/notRegistered`` for an identifier without a handler,
    ///   ``SchedulerError/Code/invalidRequest`` for a field out of range, or a store error.
    ///
    /// Called on the runtime's loop thread (in a handler, say), it throws
    /// ``SchedulerError/Code/blockingCallOnTheLoop`` instead of holding the loop: use the
    /// `async` form there.
    @discardableResult
    public func submit(_ request: ScheduledTaskRequest, ifExists policy: ExistingRequestPolicy = .keep)
        throws(SchedulerError) -> SubmitOutcome
    {
        try refuseOnTheLoop("submit(_:ifExists:)")
        return try submit(contentsOf: [request], ifExists: policy)[0]
    }

    /// Submits `requests` together, in one transaction: all of them are durable when it
    /// returns, or none is (the first invalid one is named). Much faster than one by one
    /// when a program sets up many requests.
    ///
    /// - Returns: what the submit did with each request, in order.
    ///
    /// Called on the runtime's loop thread (in a handler, say), it throws
    /// ``SchedulerError/Code/blockingCallOnTheLoop`` instead of holding the loop: use the
    /// `async` form there.
    @discardableResult
    public func submit(contentsOf requests: [ScheduledTaskRequest], ifExists policy: ExistingRequestPolicy = .keep)
        throws(SchedulerError) -> [SubmitOutcome]
    {
        try refuseOnTheLoop("submit(contentsOf:ifExists:)")
        try validate(batch: requests)
        let outcomes = try onQueue("submit(contentsOf:ifExists:)") { () async throws(SchedulerError) in
            try await self.submitting(requests, ifExists: policy)
        }
        cycleSoon()
        return outcomes
    }

    /// Checks `requests`, submitted together, before they go to the queue (off it: the
    /// checks read nothing the queue owns).
    func validate(batch requests: [ScheduledTaskRequest]) throws(SchedulerError) {
        var seen = Set<String>()
        for request in requests {
            try validate(request)
            guard seen.insert(request.identifier).inserted else {
                throw SchedulerError(
                    code: .invalidRequest, message: "'\(request.identifier)' is submitted twice in one batch")
            }
        }
    }

    /// Submits `requests`, checked (``validate(batch:)``), as `submit(contentsOf:ifExists:)`
    /// says. On the queue.
    func submitting(_ requests: [ScheduledTaskRequest], ifExists policy: ExistingRequestPolicy)
        async throws(SchedulerError) -> [SubmitOutcome]
    {
        var batch = ScheduleBatch()
        var outcomes: [SubmitOutcome] = []
        // What a link in the batch may wait on (kept only when one is there).
        var earlier: [String: ScheduledTaskRequest] = [:]
        let chained = requests.contains { !$0.prerequisites.isEmpty }
        var links: [String] = []
        var concluded: [String] = []
        for request in requests {
            let chain = chained ? try await initialChain(of: request, earlier: earlier) : nil
            if chained { earlier[request.identifier] = request }
            let (write, outcome) = try await prepare(request, policy: policy, chain: chain)
            if let write { batch.writes.append(write) }
            outcomes.append(outcome)
            switch chain {
            case .wait?: links.append(request.identifier)
            case .fail?, .cancel?: concluded.append(request.identifier)
            case .ready?, nil: break
            }
        }
        let found = try await commit(batch)
        for (index, request) in requests.enumerated() where outcomes[index] == .added {
            if found.kept.contains(request.identifier) {
                outcomes[index] = .kept
            } else if found.resubmitted.contains(request.identifier) {
                outcomes[index] = .resubmitted
            }
        }
        // Took effect: a replaced request's run in progress is told to stop; an updated
        // one's run ends under the new request.
        var replaced: [BackgroundTaskID] = []
        for (index, request) in requests.enumerated() {
            let identifier = request.identifier
            switch outcomes[index] {
            case .resubmitted where state.value.running[identifier]?.ending != nil:
                // Its end, recorded next, is the old request's: it leaves the new plan be.
                state.value.running[identifier]?.detached = true
            case .updated:
                state.value.running[identifier]?.stored.request = request
            case .replaced:
                guard state.value.running[identifier]?.detached == false else { continue }
                state.value.running[identifier]?.detached = true
                if let grant = state.value.running[identifier]?.grant { replaced.append(grant) }
            default: break
            }
        }
        for grant in replaced { runtime.expireBackgroundTask(grant) }
        // A prerequisite may have concluded elsewhere (another instance of a fleet)
        // between the read above and this commit: its links are decided again now.
        if !links.isEmpty || !concluded.isEmpty { await settleChains(links: links, concluded: concluded) }
        return outcomes
    }

    /// Cancels the request for `identifier`: no run starts for it any more; a run in
    /// progress is told to stop (its expiration handler). It stays, finished, as
    /// ``WorkInfo/State-swift.struct/cancelled`` in `workInfo(_:)` with its history until
    /// ``SchedulerConfiguration/historyRetention`` prunes it; submitting the identifier again
    /// starts afresh. A finished request is left as it ended.
    ///
    /// Called on the runtime's loop thread (in a handler, say), it throws
    /// ``SchedulerError/Code/blockingCallOnTheLoop`` instead of holding the loop: use the
    /// `async` form there.
    public func cancel(_ identifier: String) throws(SchedulerError) {
        try onQueue("cancel(_:)") { () async throws(SchedulerError) in try await self.cancelling(identifier) }
        cycleSoon()
    }

    /// Cancels the request for `identifier` (see `cancel(_:)`). On the queue.
    func cancelling(_ identifier: String) async throws(SchedulerError) {
        // An identifier no request could have is not looked up (a NUL is an error to a
        // PostgreSQL server): it is unknown.
        guard (try? ScheduleLimits.check(identifier: identifier)) != nil,
            try await fromStore({ () async throws(ScheduleStoreError) in try await store.request(identifier) }) != nil
        else {
            throw SchedulerError(code: .unknownIdentifier, message: "no request '\(identifier)'")
        }
        try await commit(ScheduleBatch(writes: [.cancel(identifier, at: wallClockNow)]))
        detachRuns { $0 == identifier }
        await settleChains(concluded: [identifier])
    }

    /// Cancels every pending request (see `cancel(_:)`).
    ///
    /// Called on the runtime's loop thread (in a handler, say), it throws
    /// ``SchedulerError/Code/blockingCallOnTheLoop`` instead of holding the loop: use the
    /// `async` form there.
    public func cancelAll() throws(SchedulerError) {
        try onQueue("cancelAll()") { () async throws(SchedulerError) in try await self.cancellingAll() }
        cycleSoon()
    }

    /// Cancels every pending request (see `cancelAll()`). On the queue.
    func cancellingAll() async throws(SchedulerError) {
        try await commit(ScheduleBatch(writes: [.cancelAll(at: wallClockNow)]))
        detachRuns { _ in true }
    }

    /// Cancels every pending request tagged `tag` (see ``ScheduledTaskRequest/tags``), as
    /// `cancel(_:)` cancels each, in one transaction; returns how many it cancelled.
    ///
    /// Called on the runtime's loop thread (in a handler, say), it throws
    /// ``SchedulerError/Code/blockingCallOnTheLoop`` instead of holding the loop: use the
    /// `async` form there.
    @discardableResult
    public func cancel(tag: String) throws(SchedulerError) -> Int {
        let count = try onQueue("cancel(tag:)") { () async throws(SchedulerError) in
            try await self.cancelling(tag: tag)
        }
        cycleSoon()
        return count
    }

    /// Cancels every pending request tagged `tag` (see `cancel(tag:)`). On the queue.
    func cancelling(tag: String) async throws(SchedulerError) -> Int {
        try ScheduleLimits.check(tag: tag, identifier: nil)
        let tagged = try await fromStore { () async throws(ScheduleStoreError) in
            try await store.pendingRequests(tagged: tag)
        }
        let identifiers = Set(tagged.map(\.request.identifier))
        guard !identifiers.isEmpty else { return 0 }
        let now = wallClockNow
        try await commit(ScheduleBatch(writes: identifiers.sorted().map { .cancel($0, at: now) }))
        detachRuns { identifiers.contains($0) }
        await settleChains(concluded: identifiers.sorted())
        return identifiers.count
    }

    /// Every request not finished, with its next planned time and what it waits for.
    ///
    /// Called on the runtime's loop thread, it logs the misuse and returns nothing rather
    /// than hold the loop: use the `async` form there.
    public func pendingRequests() -> [PendingRequest] {
        pending("pendingRequests()", tag: nil)
    }

    /// The requests not finished that are tagged `tag` (see ``ScheduledTaskRequest/tags``),
    /// in submission order, as `pendingRequests()` shows them.
    ///
    /// Called on the runtime's loop thread, it logs the misuse and returns nothing rather
    /// than hold the loop: use the `async` form there.
    public func pendingRequests(tag: String) -> [PendingRequest] {
        pending("pendingRequests(tag:)", tag: tag)
    }

    private func pending(_ call: String, tag: String?) -> [PendingRequest] {
        do {
            return try onQueue(call) { () async throws(SchedulerError) in try await self.pending(tagged: tag) }
        } catch {
            // A store that could not be read was logged as such where it was read.
            if error.code != .store, error.code != .storeInUse {
                logger.error("\(error.message); answered with no requests")
            }
            return []
        }
    }

    /// The requests not finished (tagged `tag`, if one is given), with their next planned
    /// times and what they wait for. On the queue.
    func pending(tagged tag: String?) async throws(SchedulerError) -> [PendingRequest] {
        let now = wallClockNow
        let stored: [StoredRequest]
        do {
            if let tag {
                stored = try await store.pendingRequests(tagged: tag)
            } else {
                stored = try await store.pendingRequests()
            }
        } catch {
            logger.error("cannot read the pending requests: \(error)")
            let code = SchedulerError.store(error).code
            throw SchedulerError(code: code, message: "cannot read the pending requests: \(error.message)")
        }
        return stored.map { stored in
            let running = state.value.running[stored.request.identifier]
            let current = running?.stored ?? stored
            return PendingRequest(
                request: current.request, nextRun: SchedulePlanner.dueTime(current.plan, current.request),
                attempt: current.plan.failedAttempts + 1, waitingFor: waitReason(current, now: now),
                holder: stored.holder, progress: running?.task.progress)
        }
    }

    /// How many requests are not finished (one count in the store; cheaper than
    /// `pendingRequests()` when there are many).
    ///
    /// Called on the runtime's loop thread (in a handler, say), it throws
    /// ``SchedulerError/Code/blockingCallOnTheLoop`` instead of holding the loop: use the
    /// `async` form there.
    public func pendingRequestCount() throws(SchedulerError) -> Int {
        try onQueue("pendingRequestCount()") { () async throws(SchedulerError) in
            try await self.counting()
        }
    }

    /// How many requests are not finished (see `pendingRequestCount()`). On the queue.
    func counting() async throws(SchedulerError) -> Int {
        try await fromStore { () async throws(ScheduleStoreError) in try await store.pendingCount() }
    }

    /// Starts a run of `identifier` now, whatever its planned time and requirements say
    /// (`overtimectl run`, or a test): an extra run that leaves a repeating request's grid
    /// as it is, or a one-shot's (or a retry's) run brought forward. Never a second run of
    /// one identifier at once.
    ///
    /// - Returns: the run's ID.
    /// - Throws: ``SchedulerError/Code/unknownIdentifier``, ``SchedulerError/Code/notStarted``,
    ///   ``SchedulerError/Code/alreadyRunning``, ``SchedulerError/Code/refused`` (the runtime
    ///   gives no grant: suspended or terminating) or a store error.
    ///
    /// Called on the runtime's loop thread (in a handler, say), it throws
    /// ``SchedulerError/Code/blockingCallOnTheLoop`` instead of holding the loop: use the
    /// `async` form there.
    @discardableResult
    public func runNow(_ identifier: String) throws(SchedulerError) -> Int64 {
        try onQueue("runNow(_:)") { () async throws(SchedulerError) in try await self.runningNow(identifier) }
    }

    /// Starts a run of `identifier` now (see `runNow(_:)`). On the queue.
    func runningNow(_ identifier: String) async throws(SchedulerError) -> Int64 {
        guard (try? ScheduleLimits.check(identifier: identifier)) != nil else {
            throw SchedulerError(code: .unknownIdentifier, message: "no request '\(identifier)'")
        }
        guard state.value.started, !state.value.abandoned else {
            throw SchedulerError(code: .notStarted, message: "the scheduler is not started")
        }
        guard state.value.running[identifier] == nil else {
            throw SchedulerError(code: .alreadyRunning, message: "'\(identifier)' is running")
        }
        let stored = try await fromStore { () async throws(ScheduleStoreError) in
            try await store.request(identifier)
        }
        guard let stored, !stored.plan.isFinished else {
            throw SchedulerError(
                code: .unknownIdentifier,
                message: stored == nil ? "no request '\(identifier)'" : "'\(identifier)' has finished")
        }
        if let waiting = stored.chain?.waitingOn.sorted().first {
            throw SchedulerError(
                code: .invalidRequest, message: "'\(identifier)' waits on its prerequisite '\(waiting)'",
                field: "prerequisites")
        }
        return try await startNow(stored)
    }

    /// Expires the run of `identifier` in progress (its expiration handler now), as if its
    /// time were up; `false` when none runs.
    package func expireRun(_ identifier: String) -> Bool {
        queue.sync {
            guard let run = state.value.running[identifier], run.ending == nil else { return false }
            runtime.expireBackgroundTask(run.grant)
            return true
        }
    }

    /// The attempts of `identifier`, newest first.
    ///
    /// Called on the runtime's loop thread (in a handler, say), it throws
    /// ``SchedulerError/Code/blockingCallOnTheLoop`` instead of holding the loop: use the
    /// `async` form there.
    public func history(_ identifier: String, limit: Int = 100) throws(SchedulerError) -> [RunRecord] {
        try onQueue("history(_:limit:)") { () async throws(SchedulerError) in
            try await self.readingHistory(identifier, limit: limit)
        }
    }

    /// The attempts of `identifier` (see `history(_:limit:)`). On the queue.
    func readingHistory(_ identifier: String, limit: Int) async throws(SchedulerError) -> [RunRecord] {
        guard (try? ScheduleLimits.check(identifier: identifier)) != nil else { return [] }
        return try await fromStore { () async throws(ScheduleStoreError) in
            try await store.history(identifier: identifier, limit: limit)
        }
    }

    /// Waits until the scheduler has acted on everything asked of it so far (for tests on
    /// virtual time: the clock's timers hand work to the scheduler's queue).
    package func waitUntilIdle() {
        for _ in 0..<4 {
            runtime.waitForQueuedRequests()
            queue.sync {}
            syncQueue.sync {}  // a sync hands the grants it settled back to the queue
            queue.sync {}
        }
    }

    /// Closes the store as if the process had ended here, for tests of what the next
    /// start finds: nothing more is started or recorded, runs in progress are left as they
    /// are (their records say running).
    package func abandon() {
        queue.sync {
            state.value.abandoned = true
            finishWatchers()
            state.value.timer?.cancel()
            conditions.stop()
            syncQueue.sync {}  // no sync asked for before runs on a closed store
            store.close()
            state.value.token?.cancel()
        }
    }
}
