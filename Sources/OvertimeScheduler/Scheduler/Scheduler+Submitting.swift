// Submitting and cancelling on the scheduler's queue: a request checked, what it does to
// the one stored under its identifier decided, the batch committed and put on disk.

import Overtime

extension Scheduler {
    /// Runs one store call, its error a ``SchedulerError``.
    func fromStore<T>(_ body: () async throws(ScheduleStoreError) -> T) async throws(SchedulerError) -> T {
        do {
            return try await body()
        } catch {
            throw .store(error)
        }
    }

    /// Commits `batch` and puts it on disk, naming the store in the error. Returns the
    /// starts another scheduler claimed first (a fleet's store).
    @discardableResult
    func commit(_ batch: ScheduleBatch) async throws(SchedulerError) -> CommitRefusals {
        guard !batch.isEmpty else { return CommitRefusals() }
        let refusals = try await write(batch)
        do {
            try store.sync()
        } catch {
            throw .store(error)
        }
        return refusals
    }

    /// Commits `batch`: a crash of the process cannot lose it, a power loss can until the
    /// next sync. Returns the starts another scheduler claimed first (a fleet's store).
    @discardableResult
    func write(_ batch: ScheduleBatch) async throws(SchedulerError) -> CommitRefusals {
        let refusals: CommitRefusals
        do {
            refusals = try await store.commit(batch, lastRunID: state.value.lastRunID)
        } catch {
            throw .store(error)
        }
        writtenBatches.add(1, ordering: .releasing)  // after the commit: a sync that reads it covers it
        return refusals
    }

    func validate(_ request: ScheduledTaskRequest) throws(SchedulerError) {
        try ScheduleLimits.check(identifier: request.identifier)
        guard handler(for: request.identifier) != nil else {
            throw SchedulerError(code: .notRegistered, message: "no handler is registered for '\(request.identifier)'")
        }
        if !request.requirements.isEmpty {
            let unknowable = conditions.unevaluable()
            if let requirement = request.requirements.sorted().first(where: { unknowable[$0] != nil }) {
                throw SchedulerError(
                    code: .requirementUnavailable,
                    message:
                        "'\(request.identifier)' requires '\(requirement)', which cannot be told here: \(unknowable[requirement]!)",
                    field: "requirements")
            }
        }
        let identifier = request.identifier
        guard request.tags.count <= ScheduleLimits.maximumTags else {
            throw SchedulerError(
                code: .invalidRequest,
                message: "'\(identifier)' has \(request.tags.count) tags; at most \(ScheduleLimits.maximumTags)",
                field: "tags")
        }
        for tag in request.tags.sorted() { try ScheduleLimits.check(tag: tag, identifier: identifier) }
        try validatePrerequisites(of: request)
        if request.wakesSystem, let reason = wakeAlarmUnavailableReason {
            throw SchedulerError(
                code: .wakeUnavailable,
                message: "'\(identifier)' asks to wake the system, which this process cannot: \(reason)",
                field: "wakesSystem")
        }
        try ScheduleLimits.check(dataOf: request.input.count, field: "input", identifier: identifier)
        let longest = ScheduleLimits.maximumDuration
        if let repetition = request.repetition, let calendar = repetition.calendar {
            try ScheduleLimits.check("repetition.flex", repetition.flex, in: .zero...longest, identifier: identifier)
            guard calendar.nextTime(after: max(wallClockNow, request.earliestBegin ?? wallClockNow)) != nil else {
                throw SchedulerError(
                    code: .invalidRequest,
                    message: "'\(identifier)': the calendar '\(calendar)' names no time after now: it would never run",
                    field: "repetition.calendar")
            }
        } else if let repetition = request.repetition {
            try ScheduleLimits.check(
                "repetition.interval", repetition.interval, in: ScheduleLimits.minimumInterval...longest,
                identifier: identifier)
            try ScheduleLimits.check(
                "repetition.flex", repetition.flex, in: .zero...repetition.interval, identifier: identifier)
        }
        try ScheduleLimits.check(
            "randomizedDelay", request.randomizedDelay, in: .zero...longest, identifier: identifier)
        let lead = runtime.configuration.expirationLeadTime
        try ScheduleLimits.check(
            "maximumDuration", request.maximumDuration, in: (lead + .nanoseconds(1))...max(longest, lead + .seconds(1)),
            identifier: identifier)
        try ScheduleLimits.check(
            "retry.initialDelay", request.retry.initialDelay, in: .zero...longest, identifier: identifier)
        try ScheduleLimits.check(
            "retry.maximumDelay", request.retry.maximumDelay, in: .zero...longest, identifier: identifier)
        guard (1...ScheduleLimits.maximumAttempts).contains(request.retry.maximumAttempts) else {
            throw SchedulerError(
                code: .invalidRequest,
                message:
                    "'\(identifier)': retry.maximumAttempts must be between 1 and \(ScheduleLimits.maximumAttempts), got \(request.retry.maximumAttempts)",
                field: "retry.maximumAttempts")
        }
    }

    /// The write `request` takes under `policy` (`nil`: it changes nothing) and what it
    /// does, its link of a chain as `chain` decided; a `.keep` write's outcome is the
    /// store's to tell (``CommitRefusals``), `.added` until then.
    func prepare(_ request: ScheduledTaskRequest, policy: ExistingRequestPolicy, chain: ChainAction? = nil)
        async throws(SchedulerError) -> (RequestWrite?, SubmitOutcome)
    {
        let now = wallClockNow
        let delay = Duration.nanoseconds(Int64.random(in: 0...max(0, request.randomizedDelay.saturatingNanoseconds)))
        var fresh = StoredRequest(
            request: request, plan: SchedulePlanner.initial(request, now: now, randomDelay: delay), submittedAt: now,
            currentRunID: nil)
        if let chain { fresh.take(chain, now: now) }
        let running = state.value.running[request.identifier]
        if let running, !running.detached, running.ending?.plan?.plan.isFinished == true {
            // Its handler completed a one-shot (done, or failed for good) whose end is not
            // yet written: finished already, so replaced under every policy. The identifier
            // stays busy until that end is recorded, which then touches no plan.
            var replacement = fresh
            replacement.isRunning = true
            return (.save(replacement), .resubmitted)
        }
        if policy.kind == .keep { return (.insertUnlessPending(fresh), .added) }
        var existing = running?.stored
        if existing == nil {
            existing = try await fromStore { () async throws(ScheduleStoreError) in
                try await store.request(request.identifier)
            }
        }
        guard let existing else { return (.save(fresh), .added) }
        // Finished, nothing running: no pending work to keep, update or replace.
        guard existing.isRunning || running != nil || !existing.plan.isFinished else {
            return (.save(fresh), .resubmitted)
        }
        if policy.kind == .replace {
            // A run in progress keeps the identifier busy until its end is recorded.
            var replacement = fresh
            replacement.isRunning = running != nil
            return (.save(replacement), .replaced)
        }
        if existing.request == request { return (nil, .kept) }
        var updated = existing
        updated.request = request
        updated.isRunning = running != nil
        if existing.request.prerequisites != request.prerequisites {
            // Other prerequisites: the link is decided afresh.
            updated.chain = fresh.chain
            updated.plan.isFinished = fresh.plan.isFinished
            updated.cancelledAt = fresh.cancelledAt
        }
        return (.save(updated), .updated)
    }

    /// Marks the runs of identifiers `matching` as detached (their requests are cancelled or
    /// replaced) and tells them to stop.
    func detachRuns(_ matching: (String) -> Bool) {
        var grants: [BackgroundTaskID] = []
        for (identifier, run) in state.value.running where matching(identifier) && !run.detached {
            state.value.running[identifier]?.detached = true
            if run.ending == nil { grants.append(run.grant) }
        }
        for grant in grants { runtime.expireBackgroundTask(grant) }
    }
}
