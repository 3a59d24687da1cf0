// The scheduler's decision cycle, on its queue: record the runs that ended, pick the due
// requests that may run, make both durable in one transaction, then start them.

import Overtime

extension Scheduler {
    /// A run about to start: its grant is open, its start not yet durable.
    struct Starting {
        let task: ScheduledTask
        let grant: BackgroundTaskID
        let handler: Handler
        let stored: StoredRequest
        let record: RunRecord
        let lateness: Duration?
    }

    /// Queues one cycle for however many changes come before it runs.
    func cycleSoon() {
        let queued = state.withLock { state in
            defer { state.cycleQueued = true }
            return state.cycleQueued
        }
        guard !queued else { return }
        queue.async { [self] in cycle() }
    }

    /// Records what ended, starts what is due (as many as the limits allow), and arms the
    /// timer for the next due time. Ends and starts share one transaction (group commit):
    /// a run's grant ends only once its end is durable, and its handler runs only once its
    /// start is.
    ///
    /// - Parameter conditionsAreFresh: the conditions were just read (no second read).
    func cycle(conditionsAreFresh: Bool = false) {
        state.withLock { $0.cycleQueued = false }
        guard state.withLock({ $0.started && !$0.abandoned && !$0.runtimeShutDown }) else { return }
        let now = wallClockNow
        var batch = ScheduleBatch()
        let (ending, running, refused, lastStart, backlogMark) = state.withLock { state in
            defer { state.ended = [] }
            return (
                state.ended.compactMap { identifier -> RunEnd? in
                    guard let run = state.running[identifier], let ending = run.ending else { return nil }
                    // Replaced or cancelled after it ended: only the attempt is recorded. Updated:
                    // the plan goes on under the new request.
                    guard !run.detached, var plan = ending.plan else {
                        return RunEnd(record: ending.record, plan: nil, scope: run.stored.request.scope)
                    }
                    plan.request = run.stored.request
                    return RunEnd(record: ending.record, plan: plan, scope: plan.request.scope)
                },
                state.running.count, state.refusal != nil || state.terminating, state.lastBacklogStart,
                state.backlogMark
            )
        }
        batch.ends = ending
        var wake: WallClockInstant?
        let capacity = configuration.maximumConcurrentRuns - (running - ending.count)
        // Spacing paces the backlog only (runs due before the scheduler started or the clock
        // stepped, and catch-up runs): one of it per spacing. Runs that fall due while it
        // runs — a queue of one-shots submitted due now — start as fast as capacity allows.
        let spacing = configuration.startSpacing
        var backlog = Backlog(before: backlogMark, allowance: capacity)
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
            let picked = pick(now: now, capacity: capacity, backlog: &backlog, conditionsAreFresh: conditionsAreFresh)
            starting = picked.starting
            unmet = picked.unmet
            claimed = picked.claimed
            if backlog.waiting, let next = backlog.nextAllowed { wake = next }
        } else {
            unmet = Set<Requirement>.unmetMask(by: state.withLock { $0.conditions }, state: runtime.state)
        }
        batch.starts = starting.map { ($0.record, $0.stored) }
        do throws(SchedulerError) {
            // Nothing to write and nothing claimed to release: no transaction.
            let written = try batch.isEmpty && !claimed ? CommitRefusals() : write(batch)
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
            state.withLock { $0.ended.append(contentsOf: ending.map(\.record.identifier)) }
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
        syncSoon()
        if !ending.isEmpty { cycleSoon() }  // their requests may be due again at once
        armForNextDue(after: now, unmet: unmet, wake: wake)
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
    private func pick(now: WallClockInstant, capacity: Int, backlog: inout Backlog, conditionsAreFresh: Bool) -> (
        starting: [Starting], unmet: Int64, moreDue: Bool, claimed: Bool
    ) {
        var current = state.withLock { $0.conditions }
        var fresh = conditionsAreFresh
        let lifecycle = runtime.state
        var unmet = Set<Requirement>.unmetMask(by: current, state: lifecycle)
        if !fresh, unmet & Requirement.polledMask != 0,
            (try? store.dueWaiting(at: now, on: unmet & Requirement.polledMask)) == true
        {
            // A due request waits on what only looking again shows (free space, power).
            current = conditions.read()
            state.withLock { $0.conditions = current }
            fresh = true
            unmet = Set<Requirement>.unmetMask(by: current, state: lifecycle)
        }
        var starting: [Starting] = []
        var chosen = Set<String>()
        var moreDue = false
        var claimed = false
        while starting.count < capacity {
            let skip = state.withLock { $0.unhandled }.union(chosen)
            // One more than may start: whether more are due tells when to look again.
            let limit = capacity - starting.count + skip.count + 1
            let rows: [StoredRequest]
            do {
                rows = try store.due(at: now, unmet: unmet, limit: limit)
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
                state.withLock { $0.conditions = current }
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
                    state.withLock { _ = $0.unhandled.insert(identifier) }
                    continue
                }
                guard let start = begin(stored, handler: handler, now: now) else {
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
                    try commit(ScheduleBatch(writes: caughtUp))
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
    private func begin(_ stored: StoredRequest, handler: Handler, now: WallClockInstant) -> Starting? {
        let identifier = stored.request.identifier
        let attempt = stored.plan.failedAttempts + 1
        var given = stored.currentRunID
        if given == nil {
            do {
                given = try store.newRunID()
            } catch {
                logger.error("cannot get a run ID: \(error)", metadata: ["task": "\(identifier)"])
                return nil
            }
        }
        let runID =
            given
            ?? state.withLock { state in
                state.lastRunID += 1
                return state.lastRunID
            }
        let due = SchedulePlanner.dueTime(stored.plan, stored.request)
        let planned = SchedulePlanner.plannedTime(stored.plan, stored.request)
        let task = ScheduledTask(
            identifier: identifier, runID: runID, attempt: attempt, dueTime: planned,
            attemptDueTime: attempt == 1 ? planned : due, logger: logger, metrics: metrics,
            claimCheck: { [store] in store.isClaimHeld(identifier) }
        ) {
            [weak self] success, expired in
            self?.finish(identifier, runID: runID, attempt: attempt, success: success, expired: expired)
        }
        let begun = runtime.begin(
            name: identifier, maximumDuration: stored.request.maximumDuration,
            callSite: CallSite(fileID: #fileID, line: #line), expirationHandler: { task.expire() },
            endHandler: { [weak self] reason, report in
                guard reason == .terminated, let self else { return }
                queue.async { self.terminated(identifier, task: task, report: report) }
            }, launching: true)
        guard case .success(let grant) = begun else {
            if case .failure(let refusal) = begun { state.withLock { $0.refusal = "\(refusal)" } }
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
            lateness: now >= due ? now - due : nil)
    }

    /// Starts a run of `stored` at once, durable on its own (``runNow(_:)``).
    func startNow(_ stored: StoredRequest) throws(SchedulerError) -> Int64 {
        let identifier = stored.request.identifier
        guard let handler = handler(for: identifier) else {
            throw SchedulerError(code: .notRegistered, message: "no handler is registered for '\(identifier)'")
        }
        let now = wallClockNow
        guard let start = begin(stored, handler: handler, now: now) else {
            let refusal = state.withLock { $0.refusal } ?? "refused"
            throw SchedulerError(code: .refused, message: "'\(identifier)': no grant: \(refusal)")
        }
        do throws(SchedulerError) {
            guard try commit(ScheduleBatch(starts: [(start.record, start.stored)])).starts.isEmpty else {
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
        let lapsed = state.withLock { state -> [(RunEnd, BackgroundTaskID)] in
            ending.compactMap { end in
                let identifier = end.record.identifier
                guard let run = state.running[identifier], run.claimLapsing, !run.grantEnded else { return nil }
                state.running[identifier]?.grantEnded = true
                return (end, run.grant)
            }
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

    // MARK: Putting written batches on disk

    /// Queues one sync of the store for however many batches are written before it runs.
    func syncSoon() {
        let queued = state.withLock { state in
            defer { state.syncQueued = true }
            return state.syncQueued
        }
        guard !queued else { return }
        syncQueue.async { [self] in sync() }
    }

    /// On the sync queue: one `fsync` for every batch written so far, then the grants of
    /// the runs whose ends it put on disk end. A failed sync is tried again a second later
    /// (on the runtime's clock); the grants stay open meanwhile.
    private func sync() {
        let covered = state.withLock { state in
            state.syncQueued = false
            return state.abandoned ? nil : state.written
        }
        guard let covered else { return }
        do {
            try store.sync()
        } catch {
            logger.error("cannot put the schedule on disk: \(error)")
            _ = runtime.schedule(after: .seconds(1)) { [weak self] in self?.syncSoon() }
            return
        }
        queue.async { [self] in
            let grants = state.withLock { state -> [BackgroundTaskID] in
                var grants: [BackgroundTaskID] = []
                state.awaitingDisk.removeAll { run in
                    guard run.batch <= covered else { return false }
                    if !run.grantEnded { grants.append(run.grant) }
                    return true
                }
                return grants
            }
            for grant in grants { runtime.endBackgroundTask(grant) }
        }
    }

    /// What happens once a batch is written: ended runs wait for the next sync to give up
    /// their grants, new runs start their handlers (all of them in one turn of the loop).
    private func finishCommitted(
        _ ended: [RunEnd], _ starting: [Starting], now: WallClockInstant, backlogStarted: Bool = false
    ) {
        state.withLock { state in
            for end in ended {
                guard let run = state.running.removeValue(forKey: end.record.identifier) else { continue }
                state.awaitingDisk.append(
                    AwaitingDisk(task: run.task, grant: run.grant, batch: state.written, grantEnded: run.grantEnded))
            }
            for start in starting {
                state.running[start.record.identifier] = ActiveRun(
                    task: start.task, grant: start.grant, startedAt: now, stored: start.stored)
            }
            if backlogStarted { state.lastBacklogStart = runtime.clock.now }
        }
        for end in ended {
            metrics.countRun(handler: handlerName(for: end.record.identifier), result: end.record.result)
        }
        guard !starting.isEmpty else { return }
        for start in starting {
            if let lateness = start.lateness {
                metrics.recordLateness(handler: handlerName(for: start.record.identifier), lateness)
            }
        }
        let handlerQueue = self.handlerQueue
        runtime.execute {
            for start in starting { Self.launch(start.handler, start.task, on: handlerQueue) }
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
    private func armForNextDue(after now: WallClockInstant, unmet: Int64, wake: WallClockInstant?) {
        var wake = wake
        var next: (identifier: String, at: WallClockInstant)?
        do {
            next = try store.nextDue(after: now, unmet: unmet)
            let polled = unmet & Requirement.polledMask
            if polled != 0, try store.dueWaiting(at: now, on: polled) {
                let recheck = now + configuration.conditionRecheckInterval
                wake = min(wake ?? recheck, recheck)
            }
        } catch {
            logger.error("cannot read the next due time: \(error)")
            wake = min(wake ?? now + .seconds(1), now + .seconds(1))
            showNextRun("waiting for the schedule store: \(error)")
            arm(state.withLock { $0.terminating } ? nil : wake)
            return
        }
        if let next { wake = min(wake ?? next.at, next.at) }
        showNextRun(next.map { "next run: \($0.identifier) at \($0.at)" })
        // Terminating: nothing more starts, so nothing to wake for.
        arm(state.withLock { $0.terminating } ? nil : wake)
    }

    // MARK: Runs ending

    /// The handler completed the task: called where it did (the loop thread, an async
    /// body's thread). Notes how the run ended; the next cycle writes it, the sync after
    /// puts it on disk, then its grant ends.
    func finish(_ identifier: String, runID: Int64, attempt: Int, success: Bool, expired: Bool) {
        end(identifier) { run in
            guard run.task.runID == runID, run.task.attempt == attempt else { return nil }
            if success { return (.succeeded, nil, false) }
            if let requirement = run.stoppedBy {
                return (.stopped, "requirement '\(requirement)' stopped holding", false)
            }
            if run.claimLapsing { return (.expired, "its claim on the store could not be renewed", false) }
            return expired ? (.expired, "the run's time was up", false) : (.failed, nil, false)
        }
    }

    /// The runtime terminated the run's grant at its deadline (on the queue).
    func terminated(_ identifier: String, task: ScheduledTask, report: TerminationReport?) {
        let ended = end(identifier) { run in
            guard run.task === task else { return nil }
            return (.terminated, report.map { "\($0)" } ?? "terminated at its deadline", true)
        }
        guard !ended else { return }
        state.withLock { state in
            if state.running[identifier]?.task === task {
                // Completed, its end not yet written (the store is failing): no grant to end.
                state.running[identifier]?.grantEnded = true
            } else if let index = state.awaitingDisk.firstIndex(where: { $0.task === task }) {
                // Its end written, not yet on disk: the sync has no grant left to end.
                state.awaitingDisk[index].grantEnded = true
            }
        }
    }

    /// Notes how the run of `identifier` ended, as `outcome` says of it (`nil`: not this
    /// run), unless its end is noted already; returns whether it noted it.
    @discardableResult
    private func end(
        _ identifier: String,
        _ outcome: (ActiveRun) -> (result: RunResult, reason: String?, grantEnded: Bool)?
    ) -> Bool {
        let now = wallClockNow
        let noted = state.withLock { state -> Bool in
            guard !state.abandoned, let run = state.running[identifier], run.ending == nil,
                let (result, reason, grantEnded) = outcome(run)
            else { return false }
            var stored = run.stored
            let planned: RunOutcome = result == .succeeded ? .succeeded : result == .stopped ? .stopped : .failed
            stored.plan = SchedulePlanner.ended(stored.plan, stored.request, outcome: planned, now: now)
            // No failed attempt left to retry: the run is over (done, or failed for good).
            if stored.plan.failedAttempts == 0 { stored.currentRunID = nil }
            stored.isRunning = false
            let record = RunRecord(
                identifier: identifier, runID: run.task.runID, attempt: run.task.attempt, startedAt: run.startedAt,
                endedAt: now, result: result, stopReason: reason)
            state.running[identifier]?.ending = RunEnd(record: record, plan: stored, scope: stored.request.scope)
            state.running[identifier]?.grantEnded = grantEnded
            state.ended.append(identifier)
            return true
        }
        if noted { cycleSoon() }
        return noted
    }

    // MARK: Re-planning

    /// Runs a crash interrupted: each is retried once, at once (same run ID, next attempt);
    /// interrupted twice in a row, it counts as a failed attempt.
    func retryInterruptedRuns() {
        let now = wallClockNow
        var batch = ScheduleBatch()
        for record in recovery.interruptedRuns {
            guard var stored = try? store.request(record.identifier), !stored.plan.isFinished else { continue }
            let earlier = (try? store.history(identifier: record.identifier, limit: 2)) ?? []
            let twice = earlier.contains {
                $0.runID == record.runID && $0.attempt == record.attempt - 1 && $0.result == .interrupted
            }
            stored.plan = SchedulePlanner.interrupted(
                stored.plan, stored.request, attempt: record.attempt, twice: twice, now: now)
            stored.currentRunID = record.runID
            logger.notice(
                "run interrupted by the end of the process: \(twice ? "counted as failed" : "retried now")",
                metadata: ["task": "\(record.identifier)", "run": "\(record.runID)", "attempt": "\(record.attempt)"])
            batch.writes.append(.save(stored))
        }
        do throws(SchedulerError) {
            try commit(batch)
        } catch {
            logger.error("cannot save the retries of interrupted runs: \(error)")
        }
    }

    /// Corrects the plans a step of the wall clock by `step` left wrong (`nil`: the step is
    /// not known, as at a start after the process was not running): waits for a length of
    /// time (retries, one-shots due on submit) keep what was left of them, and repeating
    /// requests planned for a window that now lies ahead are pulled back onto their grid
    /// (a run never waits longer than its interval and flex). Plans behind the clock catch
    /// up when they are picked.
    func correctPlansForTheClock(step: Duration?) {
        let now = wallClockNow
        let step = step ?? .zero
        do throws(SchedulerError) {
            let (waits, ahead) = try fromStore { () throws(ScheduleStoreError) in
                (try store.waitsForALength(after: min(now, now - step)), try store.plannedAheadOfClock(now))
            }
            let running = state.withLock { Set($0.running.keys) }
            var seen = Set<String>()
            let writes = (waits + ahead).compactMap { stored -> RequestWrite? in
                let identifier = stored.request.identifier
                guard !running.contains(identifier), seen.insert(identifier).inserted else { return nil }
                var moved = stored
                moved.plan = SchedulePlanner.clockStepped(stored.plan, stored.request, by: step, now: now)
                moved.plan = SchedulePlanner.catchUp(moved.plan, stored.request, now: now)
                return moved.plan == stored.plan ? nil : .save(moved)
            }
            if !writes.isEmpty {
                logger.info("the wall clock moved: \(writes.count) plans corrected")
                try commit(ScheduleBatch(writes: writes))
            }
        } catch {
            logger.error("cannot correct the plans for the wall clock: \(error)")
        }
    }

    /// The wall clock's reading less the monotonic clock's, which only a step changes
    /// (slewing aside); the store's clock where it reckons on its own.
    func wallClockOffset() -> Duration {
        let monotonic = Int64(clamping: runtime.clock.now.nanoseconds)
        return .nanoseconds(wallClockNow.nanosecondsSinceEpoch &- monotonic)
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

    /// One timer on the runtime's clock for the earliest due time, counted from the clock
    /// as it reads now: a cycle takes time (a fleet's database calls), and a wait counted
    /// from its start would wake that much late.
    func arm(_ due: WallClockInstant?) {
        let previous = state.withLock { state -> LoopTimer? in
            defer { state.timer = nil }
            return state.timer
        }
        previous?.cancel()
        guard let due else { return }
        let wait = max(due - wallClockNow, .zero)
        // Through cycleSoon: a cycle already queued (a run's end, a notification) serves
        // the timer too. Queued each, cycles that take longer than the time between due
        // runs piled up on the queue: every run waited behind them, and the queue went on
        // cycling for seconds after the last one.
        let timer = runtime.schedule(at: runtime.clock.now + wait) { [weak self] in self?.cycleSoon() }
        state.withLock { $0.timer = timer }
    }

    // MARK: Lifecycle, conditions, the wall clock

    /// On the queue.
    func lifecycleChanged() {
        state.withLock { $0.refusal = nil }
        stopRunsWhoseRequirementsFailed()
        cycle()
    }

    func conditionsChanged() {
        let read = conditions.read()
        let previous = state.withLock { state in
            defer { state.conditions = read }
            return state.conditions
        }
        if read != previous { logger.info("conditions changed: \(read)") }
        stopRunsWhoseRequirementsFailed()
        cycle(conditionsAreFresh: true)
    }

    /// Tells each run whose request needs something that no longer holds to stop (its
    /// expiration handler); its end is recorded as stopped and retried when they hold.
    private func stopRunsWhoseRequirementsFailed() {
        let lifecycle = runtime.state
        let stopping = state.withLock { state -> [ActiveRun] in
            var stopping: [ActiveRun] = []
            for (identifier, run) in state.running where run.stoppedBy == nil && !run.detached && run.ending == nil {
                guard let unmet = run.stored.request.requirements.firstUnmet(by: state.conditions, state: lifecycle)
                else { continue }
                state.running[identifier]?.stoppedBy = unmet
                var stopped = run
                stopped.stoppedBy = unmet
                stopping.append(stopped)
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

    /// On the loop thread, at the start of the first turn after the process was away
    /// longer than the store's stall threshold (paused, frozen, starved): the runs whose
    /// claims may have ended are told to stop now, before any callback of the turn — a
    /// handler's own timer among them — could act as their holder.
    func checkClaimsAfterStall(_ away: Duration) {
        let unsafe = store.claimsNoLongerSafe()
        guard !unsafe.isEmpty else { return }
        logger.warning(
            "the process was away for \(away): stopping the runs whose claims may have ended before anything else runs",
            metadata: ["tasks": "\(unsafe.sorted().joined(separator: ","))"])
        claimsLapsing(unsafe)
    }

    /// The store cannot renew the claims of these runs: each is told to stop (its
    /// expiration handler) before the claim ends and another instance may take the run.
    func claimsLapsing(_ identifiers: [String]) {
        let stopping = state.withLock { state -> [(String, BackgroundTaskID)] in
            identifiers.compactMap { identifier in
                guard let run = state.running[identifier], run.ending == nil, !run.claimLapsing else { return nil }
                state.running[identifier]?.claimLapsing = true
                return (identifier, run.grant)
            }
        }
        for (identifier, grant) in stopping {
            logger.warning(
                "stopping a run: its claim on the store could not be renewed", metadata: ["task": "\(identifier)"])
            runtime.expireBackgroundTask(grant)
        }
    }

    /// Termination waits for the grants open; new runs would keep it waiting until the
    /// budget's end, so none starts (they are due at the next start, caught up per policy).
    func stopStartingRuns() {
        queue.async { [self] in
            state.withLock { $0.terminating = true }
            arm(nil)
        }
    }

    func wallClockStepped() {
        queue.async { [self] in
            store.localWallClockStepped()
            let offset = wallClockOffset()
            let mark = wallClockNow
            let previous = state.withLock { state in
                defer {
                    state.wallClockOffset = offset
                    state.backlogMark = mark
                }
                return state.wallClockOffset
            }
            let step = previous.map { offset - $0 }
            logger.notice("the wall clock was set\(step.map { " (by \($0))" } ?? ""): re-planning every request")
            correctPlansForTheClock(step: step)
            cycle()
        }
    }

    func waitReason(_ stored: StoredRequest, state: State, now: WallClockInstant) -> PendingRequest.Reason {
        let identifier = stored.request.identifier
        if state.running[identifier] != nil || stored.isRunning { return .running }
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
