import Dispatch
import Logging
import Overtime

/// Deferred and periodic background work that survives restarts: what BGTaskScheduler and
/// WorkManager give mobile apps and systemd timers give units, for a program that embeds
/// an Overtime ``Runtime``.
///
/// ```swift
/// let scheduler = try Scheduler(runtime: runtime, configuration: .init(storePath: "/var/lib/app/schedule.db"))
/// try scheduler.register("com.example.refresh") { task in
///     refresh(run: task.runID) { ok in task.setTaskCompleted(success: ok) }
/// }
/// try scheduler.start()
/// var request = ScheduledTaskRequest(identifier: "com.example.refresh")
/// request.repetition = Repetition(every: .seconds(3600), flex: .seconds(600))
/// try scheduler.submit(request)              // kept if already there (the default policy)
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
///   ``SchedulerConfiguration/maximumConcurrentRuns`` in all; runs that fall due together
///   start ``SchedulerConfiguration/startSpacing`` apart.
///
/// Every member is safe from any thread. Handlers run on the runtime's loop thread.
/// Decisions and store writes happen on the scheduler's own serial queue, never on the loop.
public final class Scheduler: Sendable {
    /// The runtime whose grants the runs get.
    public let runtime: Runtime
    /// How it stores and starts runs.
    public let configuration: SchedulerConfiguration
    /// What opening the store found and repaired.
    public let recovery: StoreRecovery

    private let store: any ScheduleStore
    private let conditions: any ConditionSource
    private let queue = DispatchQueue(label: "overtime.scheduler")
    private let state = Locked(State())
    private var logger: Logger { configuration.logger }

    enum Handler: Sendable {
        case synchronous(@Sendable (ScheduledTask) -> Void)
        case asynchronous(@Sendable (ScheduledTask) async throws -> Void)
    }

    struct ActiveRun: Sendable {
        let task: ScheduledTask
        let grant: BackgroundTaskID
        let startedAt: WallClockInstant
        /// The request was replaced or cancelled while this run ran: its end touches no plan.
        var detached = false
        /// A requirement stopped holding: the run was told to stop.
        var stoppedBy: Requirement?
    }

    struct State: Sendable {
        var handlers: [String: Handler] = [:]
        var started = false
        var requests: [String: StoredRequest] = [:]
        var order: [String] = []
        var running: [String: ActiveRun] = [:]
        var timer: LoopTimer?
        var lastStart: WallClockInstant?
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
        /// A re-plan is queued: more reasons to re-plan join it.
        var replanQueued = false
    }

    /// Opens (creating) the store and recovers it. Nothing runs until ``start()``.
    ///
    /// - Throws: ``SchedulerError/Code/store`` when the store cannot be opened (a newer
    ///   schema among the reasons) or ``SchedulerError/Code/invalidRequest`` for a bad
    ///   configuration.
    public init(runtime: Runtime, configuration: SchedulerConfiguration) throws(SchedulerError) {
        guard configuration.maximumConcurrentRuns >= 1 else {
            throw SchedulerError(code: .invalidRequest, message: "maximumConcurrentRuns must be at least 1")
        }
        self.runtime = runtime
        self.configuration = configuration
        conditions =
            configuration.conditions
            ?? LinuxConditionSource(configuration: .init(storagePath: Self.folder(of: configuration.storePath)))
        do {
            let store = try SQLiteScheduleStore(
                path: configuration.storePath, now: runtime.clock.wallClockNow, logger: configuration.logger)
            self.store = store
            self.recovery = store.recovery
        } catch {
            throw .store(error)
        }
    }

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
        try register(identifier, .synchronous(handler))
    }

    /// Registers an async body for `identifier`, before ``start()``: returning completes
    /// the task successfully, throwing unsuccessfully; expiration cancels the body.
    public func register(
        _ identifier: String, body: @escaping @Sendable (ScheduledTask) async throws -> Void
    ) throws(SchedulerError) {
        try register(identifier, .asynchronous(body))
    }

    private func register(_ identifier: String, _ handler: Handler) throws(SchedulerError) {
        try state.withLock { state throws(SchedulerError) in
            guard !state.started else {
                throw SchedulerError(
                    code: .registeredAfterStart, message: "'\(identifier)' registered after start(); register first")
            }
            guard state.handlers[identifier] == nil else {
                throw SchedulerError(code: .alreadyRegistered, message: "'\(identifier)' is already registered")
            }
            state.handlers[identifier] = handler
        }
    }

    /// Loads the stored requests, re-plans them (catching up what was missed, retrying
    /// runs a crash interrupted) and starts running what is due.
    public func start() throws(SchedulerError) {
        let stored: [StoredRequest]
        do {
            stored = try store.requests()
        } catch {
            throw .store(error)
        }
        try state.withLock { state throws(SchedulerError) in
            guard !state.started else {
                throw SchedulerError(code: .alreadyStarted, message: "start() was called before")
            }
            state.started = true
            for request in stored {
                state.requests[request.request.identifier] = request
                state.order.append(request.request.identifier)
            }
        }
        let token = runtime.observe { [weak self] event in
            guard let self else { return }
            switch event {
            case .willTerminate: stopStartingRuns()
            case .didEnterBackground:
                // Decided before the observer returns: a run due now begins its grant
                // before the program could suspend with none open.
                queue.sync { lifecycleChanged() }
            case .didBecomeActive, .willEnterForeground:
                queue.async { self.lifecycleChanged() }
            default: break
            }
        }
        conditions.start(runtime: runtime) { [weak self] in
            guard let self else { return }
            queue.async { self.conditionsChanged() }
        }
        state.withLock { $0.token = token }
        addControlCommands()
        let context = runtime.driverContext
        runtime.execute { [weak self] in
            context.onWallClockStep { [weak self] in self?.wallClockStepped() }
            context.addStatusPart { [weak self] in self?.state.withLock { $0.nextRun } }
        }
        queue.async { [self] in
            let read = conditions.read()
            state.withLock { $0.conditions = read }
            retryInterruptedRuns()
            replan(conditionsAreFresh: true)
        }
    }

    // MARK: Requests

    /// Submits `request`; what happens to an existing request of its identifier is
    /// `policy`'s call (by default it is kept). Durable when it returns.
    ///
    /// - Throws: ``SchedulerError/Code/notRegistered`` for an identifier without a handler,
    ///   ``SchedulerError/Code/invalidRequest`` for a field out of range, or a store error.
    public func submit(_ request: ScheduledTaskRequest, ifExists policy: ExistingRequestPolicy = .keep)
        throws(SchedulerError)
    {
        try validate(request)
        let result: Result<Void, SchedulerError> = queue.sync {
            do throws(SchedulerError) {
                try apply(request, policy: policy)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try result.get()
        replanSoon()
    }

    /// Submits `requests` together, in one transaction: all of them are durable when it
    /// returns, or none is (the first invalid one is named). Much faster than one by one
    /// when a program sets up many requests.
    public func submit(contentsOf requests: [ScheduledTaskRequest], ifExists policy: ExistingRequestPolicy = .keep)
        throws(SchedulerError)
    {
        var seen = Set<String>()
        for request in requests {
            try validate(request)
            guard seen.insert(request.identifier).inserted else {
                throw SchedulerError(
                    code: .invalidRequest, message: "'\(request.identifier)' is submitted twice in one batch")
            }
        }
        let result: Result<Void, SchedulerError> = queue.sync {
            let prepared = requests.compactMap { prepare($0, policy: policy) }
            do throws(ScheduleStoreError) {
                try store.saveAll(prepared.map(\.stored))
            } catch {
                return .failure(.store(error))
            }
            for change in prepared { adopt(change, policy: policy) }
            return .success(())
        }
        try result.get()
        replanSoon()
    }

    /// Removes the request for `identifier`: no run starts for it any more; a run in
    /// progress is told to stop (its expiration handler). Its history stays.
    public func cancel(_ identifier: String) throws(SchedulerError) {
        let result: Result<Void, SchedulerError> = queue.sync {
            guard state.withLock({ $0.requests[identifier] }) != nil else {
                return .failure(SchedulerError(code: .unknownIdentifier, message: "no request '\(identifier)'"))
            }
            do throws(ScheduleStoreError) {
                try store.delete(identifier: identifier)
            } catch {
                return .failure(.store(error))
            }
            forget(identifier)
            return .success(())
        }
        try result.get()
        replanSoon()
    }

    /// Removes every request (see ``cancel(_:)``).
    public func cancelAll() throws(SchedulerError) {
        let result: Result<Void, SchedulerError> = queue.sync {
            do throws(ScheduleStoreError) {
                try store.deleteAll()
            } catch {
                return .failure(.store(error))
            }
            for identifier in state.withLock({ $0.order }) { forget(identifier) }
            return .success(())
        }
        try result.get()
        replanSoon()
    }

    /// Every request not finished, with its next planned time and what it waits for.
    public func pendingRequests() -> [PendingRequest] {
        queue.sync {
            let now = runtime.clock.wallClockNow
            return state.withLock { state in
                state.order.compactMap { identifier -> PendingRequest? in
                    guard let stored = state.requests[identifier], !stored.plan.isFinished else { return nil }
                    return PendingRequest(
                        request: stored.request, nextRun: SchedulePlanner.dueTime(stored.plan, stored.request),
                        attempt: stored.plan.failedAttempts + 1,
                        waitingFor: waitReason(identifier, stored, state: state, now: now))
                }
            }
        }
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
    @discardableResult
    public func runNow(_ identifier: String) throws(SchedulerError) -> Int64 {
        let result: Result<Int64, SchedulerError> = queue.sync {
            let (known, started, running, abandoned) = state.withLock {
                (
                    $0.requests[identifier].map { !$0.plan.isFinished }, $0.started, $0.running[identifier] != nil,
                    $0.abandoned
                )
            }
            guard started, !abandoned else {
                return .failure(SchedulerError(code: .notStarted, message: "the scheduler is not started"))
            }
            guard known == true else {
                return .failure(
                    SchedulerError(
                        code: .unknownIdentifier,
                        message: known == nil ? "no request '\(identifier)'" : "'\(identifier)' has finished"))
            }
            guard !running else {
                return .failure(SchedulerError(code: .alreadyRunning, message: "'\(identifier)' is running"))
            }
            return startRun(identifier, now: runtime.clock.wallClockNow)
        }
        return try result.get()
    }

    /// Expires the run of `identifier` in progress (its expiration handler now), as if its
    /// time were up; `false` when none runs.
    package func expireRun(_ identifier: String) -> Bool {
        queue.sync {
            guard let run = state.withLock({ $0.running[identifier] }) else { return false }
            runtime.expireBackgroundTask(run.grant)
            return true
        }
    }

    /// The attempts of `identifier`, newest first.
    public func history(_ identifier: String, limit: Int = 100) throws(SchedulerError) -> [RunRecord] {
        do {
            return try store.history(identifier: identifier, limit: limit)
        } catch {
            throw .store(error)
        }
    }

    /// Waits until the scheduler has acted on everything asked of it so far (for tests on
    /// virtual time: the clock's timers hand work to the scheduler's queue).
    package func waitUntilIdle() {
        for _ in 0..<4 {
            runtime.waitForQueuedRequests()
            queue.sync {}
        }
    }

    /// Closes the store as if the process had ended here, for tests of what the next
    /// start finds: nothing more is started or recorded, runs in progress are left as they
    /// are (their records say running).
    package func abandon() {
        queue.sync {
            let timer = state.withLock { state -> LoopTimer? in
                state.abandoned = true
                return state.timer
            }
            timer?.cancel()
            conditions.stop()
            store.close()
            state.withLock { $0.token }?.cancel()
        }
    }

    // MARK: Deciding (on the queue)

    private func validate(_ request: ScheduledTaskRequest) throws(SchedulerError) {
        guard state.withLock({ $0.handlers[request.identifier] }) != nil else {
            throw SchedulerError(code: .notRegistered, message: "no handler is registered for '\(request.identifier)'")
        }
        func invalid(_ message: String) -> SchedulerError {
            SchedulerError(code: .invalidRequest, message: "'\(request.identifier)': \(message)")
        }
        if let repetition = request.repetition {
            if repetition.interval <= .zero { throw invalid("the repetition interval must be positive") }
            if repetition.flex < .zero || repetition.flex > repetition.interval {
                throw invalid("the flex must be between zero and the interval")
            }
        }
        if request.randomizedDelay < .zero { throw invalid("the randomized delay must not be negative") }
        if request.maximumDuration <= runtime.configuration.expirationLeadTime {
            throw invalid("the maximum duration must be longer than the runtime's expiration lead time")
        }
        if request.retry.maximumAttempts < 1 { throw invalid("maximumAttempts must be at least 1") }
    }

    /// A request to store, and whether one of its identifier existed.
    private struct Change {
        let stored: StoredRequest
        let replacesExisting: Bool
    }

    private func apply(_ request: ScheduledTaskRequest, policy: ExistingRequestPolicy) throws(SchedulerError) {
        guard let change = prepare(request, policy: policy) else { return }
        do {
            try store.save(change.stored)
        } catch {
            throw .store(error)
        }
        adopt(change, policy: policy)
    }

    /// What submitting `request` stores under `policy`; `nil` when nothing changes.
    private func prepare(_ request: ScheduledTaskRequest, policy: ExistingRequestPolicy) -> Change? {
        let now = runtime.clock.wallClockNow
        let existing = state.withLock { $0.requests[request.identifier] }
        var stored: StoredRequest
        switch (existing, policy.kind) {
        case (.some, .keep):
            return nil
        case (.some(let old), .update):
            stored = old
            stored.request = request
        default:
            let delay = Duration.nanoseconds(
                Int64.random(in: 0...max(0, request.randomizedDelay.saturatingNanoseconds)))
            stored = StoredRequest(
                request: request, plan: SchedulePlanner.initial(request, now: now, randomDelay: delay),
                submittedAt: now,
                currentRunID: nil)
        }
        return Change(stored: stored, replacesExisting: existing != nil)
    }

    /// Takes a stored change into effect: a replaced request's run in progress is expired.
    private func adopt(_ change: Change, policy: ExistingRequestPolicy) {
        let request = change.stored.request
        let running = state.withLock { state -> ActiveRun? in
            if state.requests[request.identifier] == nil { state.order.append(request.identifier) }
            state.requests[request.identifier] = change.stored
            guard change.replacesExisting, policy.kind == .replace, var run = state.running[request.identifier] else {
                return nil
            }
            run.detached = true
            state.running[request.identifier] = run
            return run
        }
        if let running { runtime.expireBackgroundTask(running.grant) }
    }

    private func forget(_ identifier: String) {
        let running = state.withLock { state -> ActiveRun? in
            state.requests[identifier] = nil
            state.order.removeAll { $0 == identifier }
            guard var run = state.running[identifier] else { return nil }
            run.detached = true
            state.running[identifier] = run
            return run
        }
        if let running { runtime.expireBackgroundTask(running.grant) }
    }

    /// Runs a crash interrupted: each is retried once, at once (same run ID, next attempt);
    /// interrupted twice in a row, it counts as a failed attempt.
    private func retryInterruptedRuns() {
        let now = runtime.clock.wallClockNow
        for record in recovery.interruptedRuns {
            guard var stored = state.withLock({ $0.requests[record.identifier] }), !stored.plan.isFinished else {
                continue
            }
            let earlier = (try? store.history(identifier: record.identifier, limit: 2)) ?? []
            let twice = earlier.contains {
                $0.runID == record.runID && $0.attempt == record.attempt - 1 && $0.result == .interrupted
            }
            if twice {
                stored.plan = SchedulePlanner.ended(stored.plan, stored.request, outcome: .failed, now: now)
            } else {
                stored.plan.failedAttempts = record.attempt
                stored.plan.retryAt = now
            }
            stored.currentRunID = record.runID
            logger.notice(
                "run interrupted by the end of the process: \(twice ? "counted as failed" : "retried now")",
                metadata: ["task": "\(record.identifier)", "run": "\(record.runID)", "attempt": "\(record.attempt)"])
            save(stored)
        }
    }

    /// Queues one re-plan for however many changes come before it runs.
    private func replanSoon() {
        let queued = state.withLock { state in
            defer { state.replanQueued = true }
            return state.replanQueued
        }
        guard !queued else { return }
        queue.async { [self] in replan() }
    }

    /// Decides what runs now and when to look again.
    ///
    /// - Parameter conditionsAreFresh: the conditions were just read (no second read).
    private func replan(conditionsAreFresh: Bool = false) {
        state.withLock { $0.replanQueued = false }
        guard state.withLock({ $0.started && !$0.abandoned }) else { return }
        let now = runtime.clock.wallClockNow
        var startable: [String] = []
        var earliest: WallClockInstant?
        var current = state.withLock { $0.conditions }
        var conditionsRead = conditionsAreFresh
        var waitsOnPolledCondition = false
        var nextIdentifier: String?
        let lifecycle = runtime.state
        for identifier in state.withLock({ $0.order }) {
            guard var stored = state.withLock({ $0.running[identifier] == nil ? $0.requests[identifier] : nil }) else {
                continue
            }
            let caughtUp = SchedulePlanner.catchUp(stored.plan, stored.request, now: now)
            if caughtUp != stored.plan {
                stored.plan = caughtUp
                save(stored)
            }
            switch SchedulePlanner.next(stored.plan, stored.request, now: now) {
            case .finished: continue
            case .waitUntil(let due):
                if earliest.map({ due < $0 }) ?? true { nextIdentifier = identifier }
                earliest = min(earliest ?? due, due)
            case .run:
                let requirements = stored.request.requirements
                if !conditionsRead, requirements.contains(where: \.isSystemCondition) {
                    // Read afresh before a run that needs the machine: free space and power
                    // change without an event.
                    current = conditions.read()
                    state.withLock { $0.conditions = current }
                    conditionsRead = true
                }
                if let unmet = requirements.firstUnmet(by: current, state: lifecycle) {
                    if unmet.isPolled { waitsOnPolledCondition = true }
                    continue
                }
                startable.append(identifier)
            }
        }
        showNextRun(nextIdentifier.flatMap { identifier in earliest.map { "next run: \(identifier) at \($0)" } })
        if waitsOnPolledCondition {
            let recheck = now + configuration.conditionRecheckInterval
            earliest = min(earliest ?? recheck, recheck)
        }
        let (capacity, lastStart, refused) = state.withLock {
            (configuration.maximumConcurrentRuns - $0.running.count, $0.lastStart, $0.refusal != nil || $0.terminating)
        }
        if !startable.isEmpty, capacity > 0, !refused {
            let spacing = configuration.startSpacing
            if spacing > .zero, let lastStart, now - lastStart < spacing {
                earliest = min(earliest ?? lastStart + spacing, lastStart + spacing)
            } else {
                let batch = spacing > .zero ? 1 : capacity
                for identifier in startable.prefix(batch) { startRun(identifier, now: now) }
                if startable.count > batch, spacing > .zero { earliest = min(earliest ?? now + spacing, now + spacing) }
            }
        }
        arm(earliest, now: now)
    }

    /// Updates the status line's part when it changed.
    private func showNextRun(_ text: String?) {
        let changed = state.withLock { state in
            defer { state.nextRun = text }
            return state.nextRun != text
        }
        guard changed else { return }
        let context = runtime.driverContext
        runtime.execute { context.statusChanged() }
    }

    /// One timer on the runtime's clock for the earliest due time.
    private func arm(_ due: WallClockInstant?, now: WallClockInstant) {
        let previous = state.withLock { state -> LoopTimer? in
            defer { state.timer = nil }
            return state.timer
        }
        previous?.cancel()
        guard let due else { return }
        let clock = runtime.clock
        let monotonicNow = clock.now
        let wait = max(due - now, .zero)
        let timer = runtime.schedule(at: monotonicNow + wait) { [weak self] in
            guard let self else { return }
            queue.async { self.replan() }
        }
        state.withLock { $0.timer = timer }
    }

    @discardableResult
    private func startRun(_ identifier: String, now: WallClockInstant) -> Result<Int64, SchedulerError> {
        guard var stored = state.withLock({ $0.requests[identifier] }),
            let handler = state.withLock({ $0.handlers[identifier] })
        else { return .failure(SchedulerError(code: .unknownIdentifier, message: "no request '\(identifier)'")) }
        let attempt = stored.plan.failedAttempts + 1
        let runID: Int64
        do throws(ScheduleStoreError) {
            if let current = stored.currentRunID {
                runID = current
            } else {
                runID = try store.nextRunID()
            }
        } catch {
            logger.error("cannot start a run: \(error)", metadata: ["task": "\(identifier)"])
            return .failure(.store(error))
        }
        let task = ScheduledTask(identifier: identifier, runID: runID, attempt: attempt, logger: logger) {
            [weak self] success, expired in
            guard let self else { return }
            queue.async { self.finish(identifier, runID: runID, attempt: attempt, success: success, expired: expired) }
        }
        let begun = runtime.begin(
            name: identifier, maximumDuration: stored.request.maximumDuration,
            callSite: CallSite(fileID: #fileID, line: #line), expirationHandler: { task.expire() },
            endHandler: { [weak self] reason, report in
                guard reason == .terminated, let self else { return }
                queue.async { self.terminated(identifier, task: task, report: report) }
            })
        let grant: BackgroundTaskID
        switch begun {
        case .success(let id):
            grant = id
        case .failure(let refusal):
            state.withLock { $0.refusal = "\(refusal)" }
            return .failure(SchedulerError(code: .refused, message: "'\(identifier)': no grant: \(refusal)"))
        }
        let due = SchedulePlanner.dueTime(stored.plan, stored.request)
        if now >= due { SchedulerMetrics.recordLateness(identifier, now - due) }
        stored.plan = SchedulePlanner.started(stored.plan, stored.request, now: now)
        stored.currentRunID = runID
        let record = RunRecord(
            identifier: identifier, runID: runID, attempt: attempt, startedAt: now, endedAt: nil, result: .running,
            stopReason: nil)
        do {
            try store.recordStart(record, plan: stored)
        } catch {
            // Not durable: do not run it (it would not be in the history after a crash).
            logger.error("cannot record a run's start: \(error)", metadata: ["task": "\(identifier)"])
            runtime.endBackgroundTask(grant)
            return .failure(.store(error))
        }
        state.withLock { state in
            state.requests[identifier] = stored
            state.running[identifier] = ActiveRun(task: task, grant: grant, startedAt: now)
            state.lastStart = now
        }
        runtime.execute {
            switch handler {
            case .synchronous(let body):
                body(task)
            case .asynchronous(let body):
                let work = Task {
                    do {
                        try await body(task)
                        task.setTaskCompleted(success: !Task.isCancelled)
                    } catch {
                        task.setTaskCompleted(success: false)
                    }
                }
                task.expirationHandler = { work.cancel() }
            }
        }
        return .success(runID)
    }

    private func finish(_ identifier: String, runID: Int64, attempt: Int, success: Bool, expired: Bool) {
        guard let run = state.withLock({ $0.running[identifier] }), run.task.runID == runID, run.task.attempt == attempt
        else { return }
        let result: RunResult
        let reason: String?
        if success {
            (result, reason) = (.succeeded, nil)
        } else if let requirement = run.stoppedBy {
            (result, reason) = (.stopped, "requirement '\(requirement)' stopped holding")
        } else if expired {
            (result, reason) = (.expired, "the run's time was up")
        } else {
            (result, reason) = (.failed, nil)
        }
        end(identifier, run: run, result: result, reason: reason)
        runtime.endBackgroundTask(run.grant)
    }

    private func terminated(_ identifier: String, task: ScheduledTask, report: TerminationReport?) {
        guard let run = state.withLock({ $0.running[identifier] }), run.task === task else { return }
        end(identifier, run: run, result: .terminated, reason: report.map { "\($0)" } ?? "terminated at its deadline")
    }

    private func end(_ identifier: String, run: ActiveRun, result: RunResult, reason: String?) {
        guard !state.withLock({ $0.abandoned }) else { return }
        let now = runtime.clock.wallClockNow
        var stored = state.withLock { $0.requests[identifier] }
        if !run.detached, var plan = stored {
            let outcome: RunOutcome = result == .succeeded ? .succeeded : result == .stopped ? .stopped : .failed
            plan.plan = SchedulePlanner.ended(plan.plan, plan.request, outcome: outcome, now: now)
            if plan.plan.failedAttempts == 0 { plan.currentRunID = nil }  // the run is over (done, or failed for good)
            stored = plan
        }
        let record = RunRecord(
            identifier: identifier, runID: run.task.runID, attempt: run.task.attempt, startedAt: run.startedAt,
            endedAt: now, result: result, stopReason: reason)
        do {
            // A run of a request cancelled or replaced meanwhile is recorded; no plan moves.
            try store.recordEnd(record, plan: run.detached ? nil : stored)
        } catch {
            logger.error("cannot record a run's end: \(error)", metadata: ["task": "\(identifier)"])
        }
        SchedulerMetrics.countRun(identifier, result: result)
        state.withLock { state in
            state.running[identifier] = nil
            if !run.detached, let stored { state.requests[identifier] = stored }
        }
        replanSoon()
    }

    private func save(_ stored: StoredRequest) {
        do {
            try store.save(stored)
        } catch {
            logger.error("cannot save a plan: \(error)", metadata: ["task": "\(stored.request.identifier)"])
        }
        state.withLock { $0.requests[stored.request.identifier] = stored }
    }

    /// On the queue.
    private func lifecycleChanged() {
        state.withLock { $0.refusal = nil }
        stopRunsWhoseRequirementsFailed()
        replan()
    }

    private func conditionsChanged() {
        let read = conditions.read()
        let previous = state.withLock { state in
            defer { state.conditions = read }
            return state.conditions
        }
        if read != previous { logger.info("conditions changed: \(read)") }
        stopRunsWhoseRequirementsFailed()
        replan(conditionsAreFresh: true)
    }

    /// Tells each run whose request needs something that no longer holds to stop (its
    /// expiration handler); its end is recorded as stopped and retried when they hold.
    private func stopRunsWhoseRequirementsFailed() {
        let lifecycle = runtime.state
        let stopping = state.withLock { state -> [ActiveRun] in
            var stopping: [ActiveRun] = []
            for (identifier, run) in state.running where run.stoppedBy == nil && !run.detached {
                guard let request = state.requests[identifier]?.request,
                    let unmet = request.requirements.firstUnmet(by: state.conditions, state: lifecycle)
                else { continue }
                var run = run
                run.stoppedBy = unmet
                state.running[identifier] = run
                stopping.append(run)
            }
            return stopping
        }
        for run in stopping {
            logger.notice(
                "stopping a run: requirement '\(run.stoppedBy!)' stopped holding",
                metadata: ["task": "\(run.task.identifier)", "run": "\(run.task.runID)"])
            runtime.expireBackgroundTask(run.grant)
        }
    }

    /// Termination waits for the grants open; new runs would keep it waiting until the
    /// budget's end, so none starts (they are due at the next start, caught up per policy).
    private func stopStartingRuns() {
        queue.async { [self] in
            state.withLock { $0.terminating = true }
            arm(nil, now: runtime.clock.wallClockNow)
        }
    }

    private func wallClockStepped() {
        queue.async { [self] in
            logger.notice("the wall clock was set: re-planning every request")
            replan()
        }
    }

    private func waitReason(
        _ identifier: String, _ stored: StoredRequest, state: State, now: WallClockInstant
    ) -> PendingRequest.Reason {
        if state.running[identifier] != nil { return .running }
        if let retry = stored.plan.retryAt, retry > now { return .retry(at: retry) }
        let due = SchedulePlanner.dueTime(stored.plan, stored.request)
        if due > now { return .plannedTime(due) }
        if let unmet = stored.request.requirements.firstUnmet(by: state.conditions, state: runtime.state) {
            return .requirement(unmet)
        }
        if state.terminating { return .runtimeRefused("the program is terminating") }
        if let refusal = state.refusal { return .runtimeRefused(refusal) }
        if state.running.count >= configuration.maximumConcurrentRuns { return .concurrencyLimit }
        return .startSpacing
    }
}

/// A request not finished, as ``Scheduler/pendingRequests()`` shows it: why it has not
/// run yet.
public struct PendingRequest: Sendable, Hashable {
    /// Why a request waits.
    public enum Reason: Sendable, Hashable, CustomStringConvertible {
        /// A run is in progress.
        case running
        /// Its next planned time (the start of its flex window, never before its earliest begin).
        case plannedTime(WallClockInstant)
        /// A failed attempt's retry, after its backoff.
        case retry(at: WallClockInstant)
        /// The most runs at once are running.
        case concurrencyLimit
        /// Due with others: started one after another, ``SchedulerConfiguration/startSpacing`` apart.
        case startSpacing
        /// The runtime refused a grant (suspended or terminating): until the lifecycle changes.
        case runtimeRefused(String)
        /// A requirement does not hold (the first unmet one).
        case requirement(Requirement)

        /// A sentence, as `overtimectl` prints it.
        public var description: String {
            switch self {
            case .running: "running"
            case .plannedTime(let time): "earliest begin at \(time)"
            case .retry(let time): "retry at \(time)"
            case .concurrencyLimit: "the concurrency limit"
            case .startSpacing: "runs due together start one after another"
            case .runtimeRefused(let reason): "no grant: \(reason)"
            case .requirement(let requirement): "requirement '\(requirement)'"
            }
        }
    }

    /// The request.
    public let request: ScheduledTaskRequest
    /// When its next run may start.
    public let nextRun: WallClockInstant
    /// The attempt that run will be (1 unless retrying).
    public let attempt: Int
    /// What it waits for.
    public let waitingFor: Reason
}
