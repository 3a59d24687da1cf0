// The scheduler's decision cycle, on its queue: record the runs that ended, pick the due
// requests that may run, make both durable in one transaction, then start them.

import Overtime
import OvertimeSupport
import Tracing

extension Scheduler {
    /// A run about to start: its grant is open, its start not yet durable.
    struct Starting {
        let task: ScheduledTask
        let grant: BackgroundTaskID
        let handler: Handler
        let stored: StoredRequest
        let record: RunRecord
        let lateness: Duration?
        /// `overtime.scheduled_run`, with a tracer: the run's grant and its handler's work
        /// are its children.
        let span: (any Span)?
    }

    /// Queues one cycle for however many changes come before it runs. From any thread.
    func cycleSoon() {
        let queued = cycleQueued.withLock { queued in
            defer { queued = true }
            return queued
        }
        guard !queued else { return }
        queue.task { [self] in await cycle() }
    }

    /// Records what ended, starts what is due (as many as the limits allow), and arms the
    /// timer for the next due time. Ends and starts share one transaction (group commit):
    /// a run's grant ends only once its end is durable, and its handler runs only once its
    /// start is.
    ///
    /// - Parameter conditionsAreFresh: the conditions were just read (no second read).
    func cycle(conditionsAreFresh: Bool = false) async {
        cycleQueued.withLock { $0 = false }
        guard state.value.started, !state.value.abandoned, !runtimeShutDown.withLock({ $0 }) else { return }
        let now = wallClockNow
        var batch = ScheduleBatch()
        let ending = state.value.ended.compactMap { identifier -> RunEnd? in
            guard let run = state.value.running[identifier], let ending = run.ending else { return nil }
            // Replaced or cancelled after it ended: only the attempt is recorded. Updated:
            // the plan goes on under the new request.
            guard !run.detached, var plan = ending.plan else {
                return RunEnd(record: ending.record, plan: nil, scope: run.stored.request.scope)
            }
            plan.request = run.stored.request
            return RunEnd(record: ending.record, plan: plan, scope: plan.request.scope)
        }
        state.value.ended = []
        let running = state.value.running.count
        let refused = state.value.refusal != nil || state.value.terminating
        let lastStart = state.value.lastBacklogStart
        batch.ends = ending
        var wake: WallClockInstant?
        let capacity = configuration.maximumConcurrentRuns - (running - ending.count)
        // Spacing paces the backlog only (runs due before the scheduler started or the clock
        // stepped, and catch-up runs): one of it per spacing. Runs that fall due while it
        // runs — a queue of one-shots submitted due now — start as fast as capacity allows.
        let spacing = configuration.startSpacing
        var backlog = Backlog(before: state.value.backlogMark, allowance: capacity)
        if spacing > .zero {
            let sinceLastStart = lastStart.map { runtime.clock.now - $0 }
            if let sinceLastStart, sinceLastStart < spacing {
                backlog.allowance = 0
                backlog.nextAllowed = now + (spacing - sinceLastStart)
            } else {
                backlog.allowance = 1
                backlog.nextAllowed = now + spacing
            }
        }
        var unmet: Int64 = 0
        var starting: [Starting] = []
        var claimed = false
        if capacity > 0, !refused {
            let picked = await pick(
                now: now, capacity: capacity, backlog: &backlog, conditionsAreFresh: conditionsAreFresh)
            starting = picked.starting
            unmet = picked.unmet
            claimed = picked.claimed
            if backlog.waiting, let next = backlog.nextAllowed { wake = next }
        } else {
            unmet = Set<Requirement>.unmetMask(by: state.value.conditions, state: runtime.state)
        }
        batch.starts = starting.map { ($0.record, $0.stored) }
        for start in starting { batch.lateness[start.record.identifier] = start.lateness }
        do throws(SchedulerError) {
            // Nothing to write and nothing claimed to release: no transaction.
            let written = try await batch.isEmpty && !claimed ? CommitRefusals() : write(batch)
            reportSuperseded(written.superseded, among: ending)
            let refused = written.starts
            if !refused.isEmpty {
                // Another instance claimed them first: no handler runs here.
                let lost = starting.filter { refused.contains($0.record.identifier) }
                starting.removeAll { refused.contains($0.record.identifier) }
                for start in lost { runtime.endBackgroundTask(start.grant) }
            }
        } catch {
            // Nothing of it is written: the new runs do not run; the ended ones keep their
            // grants and are recorded by the next cycle.
            logger.error("cannot record runs: \(error)")
            state.value.ended.append(contentsOf: ending.map(\.record.identifier))
            for start in starting { runtime.endBackgroundTask(start.grant) }
            endGrantsOfRunsWhoseClaimsLapsed(ending)
            arm(now + .seconds(1))
            return
        }
        if configuration.waitsForDiskBeforeStarting, !starting.isEmpty {
            do {
                try store.sync()
            } catch {
                // Written, so a crash of the process cannot lose it; the next sync retries.
                logger.error("cannot put run starts on disk: \(error)")
            }
        }
        finishCommitted(ending, starting, now: now, backlogStarted: backlog.started)
        let concluded = ending.compactMap { $0.plan?.plan.isFinished == true ? $0.record.identifier : nil }
        if !concluded.isEmpty { await settleChains(concluded: concluded) }
        if !ending.isEmpty || state.value.lastPruned == nil { await pruneHistoryIfDue(now: now) }
        syncSoon()
        // Their requests may be due again at once (a retry, a repetition's next time), which
        // the claim above, made before the commit, could not see. A cycle that filled every
        // slot has no room for them: the next end queues a cycle, and one queued now would only
        // read the next due time again (on a fleet's store, a round trip per cycle).
        if !ending.isEmpty, starting.count < capacity { cycleSoon() }
        await armForNextDue(after: now, unmet: unmet, wake: wake)
        await refreshWatchers()
    }

    /// How many runs of the backlog may start in this cycle (see ``cycle(conditionsAreFresh:)``).
    struct Backlog {
        /// Runs due before this time are the backlog (`nil`: none is).
        let before: WallClockInstant?
        /// Backlog runs that may still start in this cycle.
        var allowance: Int
        /// When the next backlog run may start, if one waits.
        var nextAllowed: WallClockInstant?
        /// A backlog run is due but may not start yet.
        var waiting = false
        /// A backlog run started in this cycle (spacing counts from it).
        var started = false

        init(before: WallClockInstant?, allowance: Int) {
            self.before = before
            self.allowance = allowance
        }

        /// Whether a run of `stored` (its plan caught up) belongs to the backlog.
        func contains(_ stored: StoredRequest) -> Bool {
            if stored.plan.owed > 0 { return true }
            guard let before else { return false }
            return SchedulePlanner.dueTime(stored.plan, stored.request) < before
        }
    }

    /// The due requests that may start now, their grants begun, at most `capacity`, of
    /// the backlog at most its allowance.
    ///
    /// - Returns: also whether the store returned any due request (a shared store's claims,
    ///   which the next commit releases when they do not start).
    private func pick(now: WallClockInstant, capacity: Int, backlog: inout Backlog, conditionsAreFresh: Bool) async -> (
        starting: [Starting], unmet: Int64, moreDue: Bool, claimed: Bool
    ) {
        var current = state.value.conditions
        var fresh = conditionsAreFresh
        let lifecycle = runtime.state
        var unmet = Set<Requirement>.unmetMask(by: current, state: lifecycle)
        if !fresh, unmet & Requirement.polledMask != 0,
            (try? await store.dueWaiting(at: now, on: unmet & Requirement.polledMask)) == true
        {
            // A due request waits on what only looking again shows (free space, power).
            current = conditions.read()
            state.value.conditions = current
            fresh = true
            unmet = Set<Requirement>.unmetMask(by: current, state: lifecycle)
        }
        var starting: [Starting] = []
        var chosen = Set<String>()
        var moreDue = false
        var claimed = false
        while starting.count < capacity {
            let skip = state.value.unhandled.union(chosen)
            // As many as may start, and the ones to skip (a shared store returns its own
            // claims again). Not one more: on a fleet's store a row claimed and not started is
            // released at the commit, which wakes every other instance for a cycle.
            let limit = capacity - starting.count + skip.count
            let rows: [StoredRequest]
            do {
                rows = try await store.due(at: now, unmet: unmet, limit: limit)
            } catch {
                logger.error("cannot read due requests: \(error)")
                break
            }
            if !rows.isEmpty { claimed = true }
            let candidates = rows.filter { !skip.contains($0.request.identifier) }
            if candidates.isEmpty { break }
            if !fresh, candidates.contains(where: { $0.request.requirements.contains(where: \.isSystemCondition) }) {
                // Read afresh before a run that needs the machine: free space and power
                // change without an event.
                current = conditions.read()
                state.value.conditions = current
                fresh = true
                let now = Set<Requirement>.unmetMask(by: current, state: lifecycle)
                if now != unmet {
                    unmet = now
                    continue
                }
            }
            var caughtUp: [RequestWrite] = []
            var refused = false
            for var stored in candidates {
                guard starting.count < capacity else {
                    moreDue = true
                    break
                }
                let identifier = stored.request.identifier
                let plan = SchedulePlanner.catchUp(stored.plan, stored.request, now: now)
                if plan != stored.plan {
                    stored.plan = plan
                    guard case .run = SchedulePlanner.next(plan, stored.request, now: now) else {
                        caughtUp.append(.save(stored))  // nothing owed: waits for its next time
                        continue
                    }
                }
                if backlog.contains(stored) {
                    // Due in order: the runs behind a backlog run that must wait wait too.
                    guard backlog.allowance > 0 else {
                        backlog.waiting = true
                        moreDue = true
                        break
                    }
                }
                guard let handler = handler(for: identifier) else {
                    logger.warning("a due request has no handler in this program", metadata: ["task": "\(identifier)"])
                    state.value.unhandled.insert(identifier)
                    continue
                }
                guard let start = await begin(stored, handler: handler, now: now) else {
                    refused = true
                    break
                }
                if backlog.contains(stored) {
                    backlog.allowance -= 1
                    backlog.started = true
                }
                starting.append(start)
                chosen.insert(identifier)
            }
            if !caughtUp.isEmpty {
                do throws(SchedulerError) {
                    try await commit(ScheduleBatch(writes: caughtUp))
                } catch {
                    logger.error("cannot save a plan: \(error)")
                    break
                }
                continue
            }
            if refused || moreDue || rows.count < limit { break }
        }
        return (starting, unmet, moreDue, claimed)
    }

    /// Begins the grant of a run of `stored` at `now`; `nil` when the runtime refuses
    /// (terminating) or a shared store gives no run ID. A run due while the program is
    /// suspended resumes it into the background for the run (a background launch).
    private func begin(_ stored: StoredRequest, handler: Handler, now: WallClockInstant) async -> Starting? {
        let identifier = stored.request.identifier
        let attempt = stored.plan.failedAttempts + 1
        var given = stored.currentRunID
        if given == nil {
            do {
                given = try await store.newRunID()
            } catch {
                logger.error("cannot get a run ID: \(error)", metadata: ["task": "\(identifier)"])
                return nil
            }
        }
        let runID: Int64
        if let given {
            runID = given
        } else {
            state.value.lastRunID += 1
            runID = state.value.lastRunID
        }
        let due = SchedulePlanner.dueTime(stored.plan, stored.request)
        let planned = SchedulePlanner.plannedTime(stored.plan, stored.request)
        let task = ScheduledTask(
            identifier: identifier, runID: runID, attempt: attempt, dueTime: planned,
            attemptDueTime: attempt == 1 ? planned : due, input: stored.request.input,
            prerequisiteOutputs: stored.chain?.handedOn ?? [:], logger: logger,
            metrics: metrics,
            claimCheck: { [store] in store.isClaimHeld(identifier) }
        ) { [weak self] report in
            switch report {
            case .completed(let success, let expired):
                self?.finish(identifier, runID: runID, attempt: attempt, success: success, expired: expired)
            case .progress(let progress, let recordingDue):
                self?.progressReported(identifier, runID: runID, progress, recordingDue: recordingDue)
            }
        }
        let span = runtime.tracing.map { tracing in
            RunSpan.start(
                tracing.tracer, stored, runID: runID, attempt: attempt, handler: handlerName(for: identifier),
                instance: store.holderName)
        }
        let begun = RunSpan.within(span) {
            runtime.begin(
                name: identifier, maximumDuration: stored.request.maximumDuration,
                callSite: CallSite(fileID: #fileID, line: #line), expirationHandler: { task.expire() },
                endHandler: { [weak self] reason, report in
                    guard reason == .terminated, let self else { return }
                    queue.async { self.terminated(identifier, task: task, report: report) }
                }, launching: true)
        }
        guard case .success(let grant) = begun else {
            if case .failure(let refusal) = begun { state.value.refusal = "\(refusal)" }
            if let span { RunSpan.refused(span, "\(begun)") }
            return nil
        }
        var started = stored
        started.plan = SchedulePlanner.started(stored.plan, stored.request, now: now)
        started.currentRunID = runID
        started.isRunning = true
        let record = RunRecord(
            identifier: identifier, runID: runID, attempt: attempt, startedAt: now, endedAt: nil, result: .running,
            stopReason: nil)
        return Starting(
            task: task, grant: grant, handler: handler, stored: started, record: record,
            lateness: now >= due ? now - due : nil, span: span)
    }

    /// Starts a run of `stored` at once, durable on its own (`runNow(_:)`).
    func startNow(_ stored: StoredRequest) async throws(SchedulerError) -> Int64 {
        let identifier = stored.request.identifier
        guard let handler = handler(for: identifier) else {
            throw SchedulerError(code: .notRegistered, message: "no handler is registered for '\(identifier)'")
        }
        let now = wallClockNow
        guard let start = await begin(stored, handler: handler, now: now) else {
            let refusal = state.value.refusal ?? "refused"
            throw SchedulerError(code: .refused, message: "'\(identifier)': no grant: \(refusal)")
        }
        do throws(SchedulerError) {
            guard try await commit(ScheduleBatch(starts: [(start.record, start.stored)])).starts.isEmpty else {
                runtime.endBackgroundTask(start.grant)
                throw SchedulerError(code: .alreadyRunning, message: "'\(identifier)' is running elsewhere")
            }
        } catch {
            runtime.endBackgroundTask(start.grant)
            throw error
        }
        finishCommitted([], [start], now: now)
        return start.record.runID
    }

    /// Ends that came after another instance took their runs over (this process was
    /// paused or cut off longer than the claim): the effect may have happened twice.
    private func reportSuperseded(_ superseded: Set<String>, among ending: [RunEnd]) {
        for end in ending where superseded.contains(end.record.identifier) {
            metrics.countSuperseded(handler: handlerName(for: end.record.identifier))
            logger.warning(
                """
                a run ended (\(end.record.result)) after its claim had been taken over by another instance: its end \
                does not count and is recorded as superseded; an effect it had may have happened twice (check \
                ScheduledTask.isClaimHeld before effects that must happen once)
                """,
                metadata: [
                    "task": "\(end.record.identifier)", "run": "\(end.record.runID)",
                    "attempt": "\(end.record.attempt)",
                ])
        }
    }

    /// Runs stopped because their claims could not be renewed, and completed by their
    /// handlers, whose ends cannot be written (the store unreachable): their grants end now,
    /// with what happened said. Held open, they would keep the program from suspending
    /// until their deadlines, then be reported as handlers that did not end them; and their
    /// claims are lost anyway — another instance takes the runs over as interrupted. (Their
    /// ends are still written when the store comes back, if their claims were not taken.)
    private func endGrantsOfRunsWhoseClaimsLapsed(_ ending: [RunEnd]) {
        let lapsed = ending.compactMap { end -> (RunEnd, BackgroundTaskID)? in
            let identifier = end.record.identifier
            guard let run = state.value.running[identifier], run.claimLapsing, !run.grantEnded else { return nil }
            state.value.running[identifier]?.grantEnded = true
            return (end, run.grant)
        }
        for (end, grant) in lapsed {
            logger.warning(
                """
                a run stopped because its claim could not be renewed ended (\(end.record.result)), but its end \
                cannot be recorded while the schedule store is unreachable; another instance may take the run over
                """,
                metadata: ["task": "\(end.record.identifier)", "run": "\(end.record.runID)"])
            runtime.endBackgroundTask(grant)
        }
    }

    /// What happens once a batch is written: ended runs wait for the next sync to give up
    /// their grants, new runs start their handlers (all of them in one turn of the loop).
    private func finishCommitted(
        _ ended: [RunEnd], _ starting: [Starting], now: WallClockInstant, backlogStarted: Bool = false
    ) {
        for end in ended {
            guard let run = state.value.running.removeValue(forKey: end.record.identifier) else { continue }
            if let span = run.span { RunSpan.end(span, end.record) }
            state.value.awaitingDisk.append(
                AwaitingDisk(
                    task: run.task, grant: run.grant, batch: writtenBatches.load(ordering: .relaxed),
                    grantEnded: run.grantEnded))
        }
        for start in starting {
            state.value.running[start.record.identifier] = ActiveRun(
                task: start.task, grant: start.grant, startedAt: now, stored: start.stored, span: start.span)
        }
        if !starting.isEmpty {
            openRuns.withLock { runs in
                for start in starting { runs[start.record.identifier] = OpenRun(grant: start.grant) }
            }
        }
        if backlogStarted { state.value.lastBacklogStart = runtime.clock.now }
        for end in ended {
            let handler = handlerName(for: end.record.identifier)
            metrics.countRun(handler: handler, result: end.record.result)
            // A failure (an expiration, a termination) that leaves no retry: failed for good.
            if end.record.result.isFailure, end.plan?.plan.failedAttempts == 0 {
                metrics.countFailedForGood(handler: handler)
            }
        }
        guard !starting.isEmpty else { return }
        for start in starting {
            if let lateness = start.lateness {
                metrics.recordLateness(handler: handlerName(for: start.record.identifier), lateness)
            }
        }
        let handlerQueue = self.handlerQueue
        runtime.execute {
            for start in starting {
                // The handler's own spans, and its async body's, are the run's children.
                RunSpan.within(start.span) {
                    Self.launch(start.handler, start.task, on: handlerQueue)
                }
            }
        }
    }

    private static func launch(_ handler: Handler, _ task: ScheduledTask, on handlerQueue: SerialWorkQueue) {
        switch handler {
        case .synchronous(let body):
            body(task)
        case .asynchronous(let body):
            let work = Task(executorPreference: handlerQueue) {
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

    /// Arms the timer for the earliest next start after `now` (or `wake`, if sooner), and
    /// for a look at polled conditions while a due request waits on one.
    private func armForNextDue(after now: WallClockInstant, unmet: Int64, wake: WallClockInstant?) async {
        var wake = wake
        var next: (identifier: String, at: WallClockInstant)?
        do {
            next = try await store.nextDue(after: now, unmet: unmet)
            let polled = unmet & Requirement.polledMask
            if polled != 0, try await store.dueWaiting(at: now, on: polled) {
                let recheck = now + configuration.conditionRecheckInterval
                wake = min(wake ?? recheck, recheck)
            }
        } catch {
            logger.error("cannot read the next due time: \(error)")
            wake = min(wake ?? now + .seconds(1), now + .seconds(1))
            showNextRun("waiting for the schedule store: \(error)")
            arm(state.value.terminating ? nil : wake)
            return
        }
        if let next { wake = min(wake ?? next.at, next.at) }
        showNextRun(next.map { "next run: \($0.identifier) at \($0.at)" })
        // Terminating: nothing more starts, so nothing to wake for.
        arm(state.value.terminating ? nil : wake)
        await setWakeAlarm(after: now)
    }

    /// Keeps the wake alarm at the earliest next run of the requests that wake the system
    /// (none: disarmed). A time already past is not set: the run is due now, and the
    /// system awake.
    private func setWakeAlarm(after now: WallClockInstant) async {
        let time: WallClockInstant?
        do {
            time = state.value.terminating ? nil : try await store.nextWakingStart().map { max($0, now) }
        } catch {
            logger.error("cannot read the next run that wakes the system: \(error)")
            return
        }
        guard time != state.value.wakeAlarm else { return }
        state.value.wakeAlarm = time
        let context = runtime.driverContext
        let logger = logger
        runtime.execute {
            if let problem = context.setWakeAlarm(at: time) {
                logger.error("cannot set the alarm that wakes the system: \(problem)")
            }
        }
    }

    /// Deletes what ``SchedulerConfiguration/historyRetention`` no longer keeps: at the
    /// first cycle, then at most once per its check interval, after commits that recorded
    /// ends (what adds to the history). A failure is logged and tried at the next chance.
    private func pruneHistoryIfDue(now: WallClockInstant) async {
        let retention = configuration.historyRetention
        guard retention.maximumAge != nil || retention.maximumAttemptsPerRequest != nil else { return }
        if let last = state.value.lastPruned, now < last + retention.checkInterval, now >= last { return }
        state.value.lastPruned = now
        do {
            let deleted = try await store.pruneHistory(
                endedBefore: retention.maximumAge.map { now - $0 },
                keepingPerIdentifier: retention.maximumAttemptsPerRequest)
            if deleted > 0 { logger.info("history: deleted \(deleted) attempts older or more than \(retention) keeps") }
        } catch {
            logger.error("cannot prune the history: \(error)")
        }
    }

    /// Updates the status line's part when it changed.
    private func showNextRun(_ text: String?) {
        guard state.value.nextRun != text else { return }
        state.value.nextRun = text
        statusPart.withLock { $0 = text }
        let context = runtime.driverContext
        runtime.execute { context.statusChanged() }
    }
}
