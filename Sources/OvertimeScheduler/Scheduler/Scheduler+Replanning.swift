// Re-planning what the process missed: runs a crash interrupted, plans the wall clock went
// back past, and the one timer for the earliest due time.

import Overtime

extension Scheduler {
    /// Runs a crash interrupted: each is retried once, at once (same run ID, next attempt);
    /// interrupted twice in a row, it counts as a failed attempt.
    func retryInterruptedRuns() async {
        let now = wallClockNow
        var batch = ScheduleBatch()
        for record in recovery.interruptedRuns {
            guard var stored = try? await store.request(record.identifier), !stored.plan.isFinished else { continue }
            let earlier = (try? await store.history(identifier: record.identifier, limit: 2)) ?? []
            let twice = earlier.contains {
                $0.runID == record.runID && $0.attempt == record.attempt - 1 && $0.result == .interrupted
            }
            stored.interrupt(runID: record.runID, attempt: record.attempt, twice: twice, now: now)
            logger.notice(
                "run interrupted by the end of the process: \(twice ? "counted as failed" : "retried now")",
                metadata: ["task": "\(record.identifier)", "run": "\(record.runID)", "attempt": "\(record.attempt)"])
            batch.writes.append(.save(stored))
        }
        do throws(SchedulerError) {
            try await commit(batch)
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
    ///
    /// The plans are corrected against the time read after they were: a run that started
    /// while they were read (another instance's, in a fleet) moved its plan on at a time
    /// before that, so it is not taken for a plan ahead of the clock. Each is written only
    /// over the plan it was made from (``RequestWrite/replan(_:from:)``).
    func correctPlansForTheClock(step: Duration?) async {
        let before = wallClockNow
        let step = step ?? .zero
        do throws(SchedulerError) {
            let (waits, ahead) = try await fromStore { () async throws(ScheduleStoreError) in
                (
                    try await store.waitsForALength(after: min(before, before - step)),
                    try await store.plannedAheadOfClock(before)
                )
            }
            let now = wallClockNow
            let running = Set(state.value.running.keys)
            var seen = Set<String>()
            let writes = (waits + ahead).compactMap { stored -> RequestWrite? in
                let identifier = stored.request.identifier
                guard !stored.isRunning, !running.contains(identifier), seen.insert(identifier).inserted else {
                    return nil
                }
                var moved = stored
                moved.plan = SchedulePlanner.clockStepped(stored.plan, stored.request, by: step, now: now)
                moved.plan = SchedulePlanner.catchUp(moved.plan, stored.request, now: now)
                return moved.plan == stored.plan ? nil : .replan(moved, from: stored.plan)
            }
            if !writes.isEmpty {
                logger.info("the wall clock moved: \(writes.count) plans corrected")
                try await commit(ScheduleBatch(writes: writes))
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

    /// One timer on the runtime's clock for the earliest due time, counted from the clock
    /// as it reads now: a cycle takes time (a fleet's database calls), and a wait counted
    /// from its start would wake that much late.
    func arm(_ due: WallClockInstant?) {
        state.value.timer?.cancel()
        state.value.timer = nil
        guard let due else { return }
        let wait = max(due - wallClockNow, .zero)
        // Through cycleSoon: a cycle already queued (a run's end, a notification) serves
        // the timer too. Queued each, cycles that take longer than the time between due
        // runs piled up on the queue: every run waited behind them, and the queue went on
        // cycling for seconds after the last one.
        let timer = runtime.schedule(at: runtime.clock.now + wait) { [weak self] in self?.cycleSoon() }
        state.value.timer = timer
    }
}
