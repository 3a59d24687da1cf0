// The scheduler's operations as `async` functions, and the refusal of their synchronous
// forms on the runtime's loop thread. The work runs on the scheduler's own queue and the
// caller resumes from there: a handler on the loop that submits more work (the
// "resubmit in the handler" pattern) never holds the loop while the store answers.

import Overtime

extension Scheduler {
    /// Runs `body` as work of the scheduler's queue (a task: it may await the store, and
    /// nothing else starts on the queue meanwhile), and resumes the caller from that queue
    /// with its result: no thread waits for it.
    func onQueue<T: Sendable>(
        resuming body: @escaping @Sendable () async throws(SchedulerError) -> T
    ) async throws(SchedulerError) -> T {
        try await queue.performTask(body)
    }

    /// Runs `body` as ``onQueue(resuming:)`` does for a synchronous form, named `call`,
    /// its caller's thread waiting: refused on the runtime's loop thread, and on the
    /// queue's own (where the work would wait for itself).
    func onQueue<T: Sendable>(
        _ call: String, _ body: @escaping @Sendable () async throws(SchedulerError) -> T
    ) throws(SchedulerError) -> T {
        try refuseOnTheLoop(call)
        guard !queue.isCurrent else {
            throw SchedulerError(
                code: .blockingCallOnTheLoop,
                message: "Scheduler.\(call) was called on the scheduler's own queue, where it would wait for itself")
        }
        return try queue.syncTask(body)
    }

    /// Refuses a synchronous call made on the runtime's loop thread, which it would hold
    /// until the scheduler's queue and the store answered (seconds, with a fleet's database
    /// stopped): the misuse SwiftNIO's `EventLoopFuture.wait()` refuses on its loop.
    func refuseOnTheLoop(_ call: String) throws(SchedulerError) {
        guard runtime.isOnLoopThread else { return }
        throw SchedulerError(
            code: .blockingCallOnTheLoop,
            message:
                "Scheduler.\(call) was called on the runtime's loop thread, which it would hold until the store answers: use `try await scheduler.\(call)`"
        )
    }

    /// Submits `request`, as the synchronous `submit(_:ifExists:)` does, without holding
    /// the caller's thread: the form to use in a handler. Durable when it returns.
    ///
    /// ```swift
    /// try scheduler.register("com.example.import") { (task: ScheduledTask) async throws in
    ///     let batch = try await importNextBatch()
    ///     // More work found: submitted without holding the loop or this body's thread.
    ///     try await scheduler.submit(ScheduledTaskRequest(identifier: "com.example.index.\(batch)"))
    /// }
    /// ```
    @discardableResult
    public func submit(_ request: ScheduledTaskRequest, ifExists policy: ExistingRequestPolicy = .keep)
        async throws(SchedulerError) -> SubmitOutcome
    {
        try await submit(contentsOf: [request], ifExists: policy)[0]
    }

    /// Submits `requests` together in one transaction, as
    /// `submit(contentsOf:ifExists:)` does, without holding the
    /// caller's thread.
    @discardableResult
    public func submit(contentsOf requests: [ScheduledTaskRequest], ifExists policy: ExistingRequestPolicy = .keep)
        async throws(SchedulerError) -> [SubmitOutcome]
    {
        try validate(batch: requests)
        let outcomes = try await onQueue(resuming: { () async throws(SchedulerError) in
            try await self.submitting(requests, ifExists: policy)
        })
        cycleSoon()
        return outcomes
    }

    /// Cancels the request for `identifier`, as the synchronous `cancel(_:)` does, without
    /// holding the caller's thread.
    public func cancel(_ identifier: String) async throws(SchedulerError) {
        try await onQueue(resuming: { () async throws(SchedulerError) in try await self.cancelling(identifier) })
        cycleSoon()
    }

    /// Cancels every pending request, as the synchronous `cancelAll()` does, without holding the
    /// caller's thread.
    public func cancelAll() async throws(SchedulerError) {
        try await onQueue(resuming: { () async throws(SchedulerError) in try await self.cancellingAll() })
        cycleSoon()
    }

    /// Cancels every pending request tagged `tag`, as the synchronous `cancel(tag:)` does,
    /// without holding the caller's thread; returns how many it cancelled.
    @discardableResult
    public func cancel(tag: String) async throws(SchedulerError) -> Int {
        let count = try await onQueue(resuming: { () async throws(SchedulerError) in
            try await self.cancelling(tag: tag)
        })
        cycleSoon()
        return count
    }

    /// Every request not finished, as the synchronous `pendingRequests()` returns them, without
    /// holding the caller's thread.
    public func pendingRequests() async -> [PendingRequest] {
        (try? await onQueue(resuming: { () async throws(SchedulerError) in try await self.pending(tagged: nil) })) ?? []
    }

    /// The requests not finished that are tagged `tag`, as the synchronous `pendingRequests(tag:)`
    /// returns them, without holding the caller's thread.
    public func pendingRequests(tag: String) async -> [PendingRequest] {
        (try? await onQueue(resuming: { () async throws(SchedulerError) in try await self.pending(tagged: tag) })) ?? []
    }

    /// How many requests are not finished, as the synchronous `pendingRequestCount()` counts them,
    /// without holding the caller's thread.
    public func pendingRequestCount() async throws(SchedulerError) -> Int {
        try await onQueue(resuming: { () async throws(SchedulerError) in
            try await self.counting()
        })
    }

    /// Starts a run of `identifier` now, as the synchronous `runNow(_:)` does, without holding
    /// the caller's thread; returns the run's ID.
    @discardableResult
    public func runNow(_ identifier: String) async throws(SchedulerError) -> Int64 {
        try await onQueue(resuming: { () async throws(SchedulerError) in try await self.runningNow(identifier) })
    }

    /// Submits again the request of `identifier` that failed for good, as
    /// `retry(_:)` does, without holding the caller's thread.
    @discardableResult
    public func retry(_ identifier: String) async throws(SchedulerError) -> SubmitOutcome {
        let outcome = try await onQueue(resuming: { () async throws(SchedulerError) in
            try await self.retrying(identifier)
        })
        cycleSoon()
        return outcome
    }

    /// Where the request of `identifier` stands, as the synchronous `workInfo(_:)` tells it,
    /// without holding the caller's thread.
    public func workInfo(_ identifier: String) async throws(SchedulerError) -> WorkInfo? {
        try await onQueue(resuming: { () async throws(SchedulerError) in
            try await self.currentWorkInfo(identifier)
        })
    }

    /// The attempts of `identifier`, newest first, as the synchronous `history(_:limit:)`
    /// reads them, without holding the caller's thread.
    public func history(_ identifier: String, limit: Int = 100) async throws(SchedulerError) -> [RunRecord] {
        try await onQueue(resuming: { () async throws(SchedulerError) in
            try await self.readingHistory(identifier, limit: limit)
        })
    }
}
