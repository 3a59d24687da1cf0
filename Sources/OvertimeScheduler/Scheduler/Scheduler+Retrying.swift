// Retrying what failed for good: a one-shot whose every attempt failed, submitted again as
// it was — a new schedule from now, its attempts counted afresh, its history kept.

import Overtime

extension Scheduler {
    /// Submits again the request of `identifier` that failed for good: its last run failed
    /// (or expired, or was terminated) with no retry left. It is due now, with every attempt
    /// its retry policy allows; its earlier attempts stay in its history. What an operator
    /// does after fixing what made it fail (WorkManager: enqueuing the work again).
    ///
    /// - Returns: what the submit did (`.submitted`, or what it found if another submit
    ///   of the identifier came first).
    /// - Throws: ``SchedulerError/Code/unknownIdentifier`` when no request has the
    ///   identifier, ``SchedulerError/Code/invalidRequest`` when it has not failed for good
    ///   (pending, running, succeeded, cancelled, or stopped by a prerequisite — retry
    ///   that one), or a store error.
    ///
    /// Called on the runtime's loop thread (in a handler, say), it throws
    /// ``SchedulerError/Code/blockingCallOnTheLoop`` instead of holding the loop: use the
    /// `async` form there.
    @discardableResult
    public func retry(_ identifier: String) throws(SchedulerError) -> SubmitOutcome {
        let outcome = try onQueue("retry(_:)") { () async throws(SchedulerError) in
            try await self.retrying(identifier)
        }
        cycleSoon()
        return outcome
    }

    /// Submits again the request of `identifier` that failed for good (see `retry(_:)`). On
    /// the queue.
    func retrying(_ identifier: String) async throws(SchedulerError) -> SubmitOutcome {
        guard (try? ScheduleLimits.check(identifier: identifier)) != nil,
            let stored = try await fromStore({ () async throws(ScheduleStoreError) in
                try await store.request(identifier)
            })
        else {
            throw SchedulerError(code: .unknownIdentifier, message: "no request '\(identifier)'")
        }
        let last = try await fromStore { () async throws(ScheduleStoreError) in
            try await store.history(identifier: identifier, limit: 1)
        }
        if let reason = Self.notFailedForGood(stored, lastRun: last.first) {
            throw SchedulerError(
                code: .invalidRequest, message: "'\(identifier)' \(reason): only what failed for good is retried")
        }
        // Its handler may be gone, or its calendar name no time any more.
        try validate(batch: [stored.request])
        return try await submitting([stored.request], ifExists: .keep)[0]
    }

    /// Why `stored` is not a request that failed for good, or `nil` when it is.
    static func notFailedForGood(_ stored: StoredRequest, lastRun: RunRecord?) -> String? {
        if stored.cancelledAt != nil { return "was cancelled" }
        if !stored.plan.isFinished { return stored.isRunning ? "is running" : "is pending" }
        if let prerequisite = stored.chain?.stoppedBy { return "was stopped by its prerequisite '\(prerequisite)'" }
        guard let lastRun, lastRun.result.isFailure else { return "succeeded" }
        return nil
    }
}
