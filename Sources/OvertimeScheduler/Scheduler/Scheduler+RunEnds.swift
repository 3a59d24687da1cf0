// Runs ending: a handler's completion or the runtime's termination of a grant, noted for
// the next cycle to write.

import Overtime

extension Scheduler {
    /// A handler's completion on its way to the queue.
    struct Completion: Sendable {
        let identifier: String
        let runID: Int64
        let attempt: Int
        let success: Bool
        let expired: Bool
        /// When the handler completed.
        let at: WallClockInstant
    }

    /// The handler completed the task: called where it did (the loop thread, an async
    /// body's thread), and handed to the queue with the time it happened. Notes how the
    /// run ended; the next cycle writes it, the sync after puts it on disk, then its
    /// grant ends. Completions that come while the queue is busy go to it together, in
    /// one message, as a turn of the loop that completes many runs would otherwise wake
    /// the queue for each.
    func finish(_ identifier: String, runID: Int64, attempt: Int, success: Bool, expired: Bool) {
        let completion = Completion(
            identifier: identifier, runID: runID, attempt: attempt, success: success, expired: expired,
            at: wallClockNow)
        let first = completions.withLock { inbox in
            inbox.append(completion)
            return inbox.count == 1
        }
        guard first else { return }
        queue.async { [self] in
            let taken = completions.withLock { inbox in
                defer { inbox = [] }
                return inbox
            }
            for completion in taken { finished(completion) }
        }
    }

    /// A completion, on the queue.
    private func finished(_ completion: Completion) {
        let (runID, attempt) = (completion.runID, completion.attempt)
        let (success, expired) = (completion.success, completion.expired)
        end(completion.identifier, at: completion.at) { run in
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
        let ended = end(identifier, at: wallClockNow) { run in
            guard run.task === task else { return nil }
            return (.terminated, report.map { "\($0)" } ?? "terminated at its deadline", true)
        }
        guard !ended else { return }
        if state.value.running[identifier]?.task === task {
            // Completed, its end not yet written (the store is failing): no grant to end.
            state.value.running[identifier]?.grantEnded = true
        } else if let index = state.value.awaitingDisk.firstIndex(where: { $0.task === task }) {
            // Its end written, not yet on disk: the sync has no grant left to end.
            state.value.awaitingDisk[index].grantEnded = true
        }
    }

    /// Notes how the run of `identifier` ended, as `outcome` says of it (`nil`: not this
    /// run), unless its end is noted already; returns whether it noted it.
    @discardableResult
    private func end(
        _ identifier: String, at now: WallClockInstant,
        _ outcome: (ActiveRun) -> (result: RunResult, reason: String?, grantEnded: Bool)?
    ) -> Bool {
        guard !state.value.abandoned, let run = state.value.running[identifier], run.ending == nil,
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
            endedAt: now, result: result, stopReason: reason, output: run.task.output)
        state.value.running[identifier]?.ending = RunEnd(record: record, plan: stored, scope: stored.request.scope)
        state.value.running[identifier]?.grantEnded = grantEnded
        state.value.ended.append(identifier)
        // Ended: a lapsing claim no longer needs it stopped.
        openRuns.withLock { _ = $0.removeValue(forKey: identifier) }
        cycleSoon()
        return true
    }
}
