// What the scheduler hears from outside its queue: the lifecycle, the conditions, a step of
// the wall clock, a fleet's claims lapsing, and why a pending request waits.

import Overtime

extension Scheduler {
    /// On the queue.
    func lifecycleChanged() async {
        state.value.refusal = nil
        stopRunsWhoseRequirementsFailed()
        await cycle()
    }

    func conditionsChanged() async {
        // A source may announce as it starts, before `start()`'s first reading: that
        // reading follows on this queue, and a change from nothing read is none to log.
        guard state.value.started else { return }
        let read = conditions.read()
        let previous = state.value.conditions
        state.value.conditions = read
        // Said where what holds changed; a new reason why something cannot be told (the
        // system bus found missing after "not read yet") changes no decision. A daemon's own
        // log may go to its spool: an info line here is an upload.
        if read.holdsAsBefore(previous) {
            if read != previous { logger.debug("conditions unchanged, reasons now: \(read.unknown)") }
        } else {
            logger.info("conditions changed: \(read)")
        }
        stopRunsWhoseRequirementsFailed()
        await cycle(conditionsAreFresh: true)
    }

    /// Tells each run whose request needs something that no longer holds to stop (its
    /// expiration handler); its end is recorded as stopped and retried when they hold.
    private func stopRunsWhoseRequirementsFailed() {
        let lifecycle = runtime.state
        let conditions = state.value.conditions
        var stopping: [ActiveRun] = []
        for (identifier, run) in state.value.running where run.stoppedBy == nil && !run.detached && run.ending == nil {
            guard let unmet = run.stored.request.requirements.firstUnmet(by: conditions, state: lifecycle) else {
                continue
            }
            state.value.running[identifier]?.stoppedBy = unmet
            var stopped = run
            stopped.stoppedBy = unmet
            stopping.append(stopped)
        }
        for run in stopping {
            logger.notice(
                "stopping a run: requirement '\(run.stoppedBy!)' stopped holding",
                metadata: ["task": "\(run.task.identifier)", "run": "\(run.task.runID)"])
            runtime.expireBackgroundTask(run.grant)
        }
    }

    /// On the loop thread, at the start of the first turn after the loop had no turn for
    /// longer than the store's stall threshold (the process paused, frozen or starved — or
    /// only at rest, which the loop cannot tell apart): the runs whose claims may have ended
    /// are told to stop now, before any callback of the turn — a handler's own timer among
    /// them — could act as their holder. Said while such a run's grant is open: a claim
    /// stays unsafe after its run ended until the end is recorded (its database unreachable),
    /// and is found again after each quiet spell, with nothing left to stop.
    func checkClaimsAfterStall(_ away: Duration) {
        let unsafe = store.claimsNoLongerSafe()
        guard !unsafe.isEmpty else { return }
        let open = openRuns.withLock { runs in unsafe.filter { runs[$0] != nil } }
        if !open.isEmpty {
            logger.warning(
                """
                no turn of the loop for \(away) (paused, starved or at rest): stopping the runs whose claims may \
                have ended before anything else runs
                """,
                metadata: ["tasks": "\(open.sorted().joined(separator: ","))"])
        }
        // Expired here even when another thread told them first: its expiry is a message
        // the loop reads after this turn's callbacks, and one of them may be the effect.
        claimsLapsing(unsafe, evenIfToldAlready: true)
    }

    /// The store cannot renew the claims of these runs: each is told to stop (its
    /// expiration handler) before the claim ends and another instance may take the run.
    /// From any thread: the loop's stall check cannot wait for the queue. The queue hears
    /// of it before the handlers do, so the runs' ends say why they stopped. A grant
    /// expires once however often it is told, and each run is said to stop once.
    func claimsLapsing(_ identifiers: [String], evenIfToldAlready: Bool = false) {
        let stopping = openRuns.withLock { runs in
            identifiers.compactMap { identifier -> (identifier: String, grant: BackgroundTaskID, news: Bool)? in
                guard let run = runs[identifier], evenIfToldAlready || !run.claimLapsing else { return nil }
                runs[identifier]?.claimLapsing = true
                return (identifier, run.grant, !run.claimLapsing)
            }
        }
        guard !stopping.isEmpty else { return }
        queue.async { [self] in
            for (identifier, grant, _) in stopping where state.value.running[identifier]?.grant == grant {
                state.value.running[identifier]?.claimLapsing = true
            }
        }
        for (identifier, grant, news) in stopping {
            if news {
                logger.warning(
                    "stopping a run: its claim on the store could not be renewed", metadata: ["task": "\(identifier)"])
            }
            runtime.expireBackgroundTask(grant)
        }
    }

    /// Termination waits for the grants open; new runs would keep it waiting until the
    /// budget's end, so none starts (they are due at the next start, caught up per policy).
    func stopStartingRuns() {
        queue.async { [self] in
            state.value.terminating = true
            arm(nil)
        }
    }

    func wallClockStepped() {
        queue.task { [self] in
            store.localWallClockStepped()
            let offset = wallClockOffset()
            let previous = state.value.wallClockOffset
            state.value.wallClockOffset = offset
            state.value.backlogMark = wallClockNow
            let step = previous.map { offset - $0 }
            logger.notice("the wall clock was set\(step.map { " (by \($0))" } ?? ""): re-planning every request")
            await correctPlansForTheClock(step: step)
            // A step is also how a resume from sleep shows: what the machine offers may have
            // changed meanwhile without an event (power, room), so it is read again.
            await conditionsChanged()
        }
    }

    /// On the queue.
    func waitReason(_ stored: StoredRequest, now: WallClockInstant) -> PendingRequest.Reason {
        let state = self.state.value
        let identifier = stored.request.identifier
        if state.running[identifier] != nil || stored.isRunning { return .running }
        if let waiting = stored.chain?.waitingOn.min() { return .prerequisite(waiting) }
        if let retry = stored.plan.retryAt, retry > now { return .retry(at: retry) }
        let due = SchedulePlanner.dueTime(stored.plan, stored.request)
        if due > now { return .plannedTime(due) }
        if let unmet = stored.request.requirements.firstUnmet(by: state.conditions, state: runtime.state) {
            if let reason = state.conditions.unknown[unmet] { return .requirementUnknown(unmet, because: reason) }
            return .requirement(unmet)
        }
        if state.terminating { return .runtimeRefused("the program is terminating") }
        if let refusal = state.refusal { return .runtimeRefused(refusal) }
        if state.running.count >= configuration.maximumConcurrentRuns { return .concurrencyLimit }
        return .startSpacing
    }
}
