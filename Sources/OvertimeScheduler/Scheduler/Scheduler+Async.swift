// The scheduler's operations as `async` functions, and the refusal of their synchronous
// forms on the runtime's loop thread. The work runs on the scheduler's own queue and the
// caller resumes from there: a handler on the loop that submits more work (the
// "resubmit in the handler" pattern) never holds the loop while the store answers.

import Overtime

extension Scheduler {
    /// Runs `body` on the scheduler's queue after what is queued there, and resumes the
    /// caller from that queue with its result: no thread waits for it.
    func onQueue<T: Sendable>(
        resuming body: @escaping @Sendable () throws(SchedulerError) -> T
    ) async throws(SchedulerError) -> T {
        try await queue.perform(body)
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
        try await onQueue { () throws(SchedulerError) in try self.submit(request, ifExists: policy) }
    }

    /// Submits `requests` together in one transaction, as
    /// `submit(contentsOf:ifExists:)` does, without holding the
    /// caller's thread.
    @discardableResult
    public func submit(contentsOf requests: [ScheduledTaskRequest], ifExists policy: ExistingRequestPolicy = .keep)
        async throws(SchedulerError) -> [SubmitOutcome]
    {
        try await onQueue { () throws(SchedulerError) in try self.submit(contentsOf: requests, ifExists: policy) }
    }

    /// Cancels the request for `identifier`, as the synchronous `cancel(_:)` does, without
    /// holding the caller's thread.
    public func cancel(_ identifier: String) async throws(SchedulerError) {
        try await onQueue { () throws(SchedulerError) in try self.cancel(identifier) }
    }

    /// Cancels every pending request, as the synchronous `cancelAll()` does, without holding the
    /// caller's thread.
    public func cancelAll() async throws(SchedulerError) {
        try await onQueue { () throws(SchedulerError) in try self.cancelAll() }
    }

    /// Cancels every pending request tagged `tag`, as the synchronous `cancel(tag:)` does,
    /// without holding the caller's thread; returns how many it cancelled.
    @discardableResult
    public func cancel(tag: String) async throws(SchedulerError) -> Int {
        try await onQueue { () throws(SchedulerError) in try self.cancel(tag: tag) }
    }

    /// Every request not finished, as the synchronous `pendingRequests()` returns them, without
    /// holding the caller's thread.
    public func pendingRequests() async -> [PendingRequest] {
        (try? await onQueue { () throws(SchedulerError) in self.pendingRequests() }) ?? []
    }

    /// The requests not finished that are tagged `tag`, as the synchronous `pendingRequests(tag:)`
    /// returns them, without holding the caller's thread.
    public func pendingRequests(tag: String) async -> [PendingRequest] {
        (try? await onQueue { () throws(SchedulerError) in self.pendingRequests(tag: tag) }) ?? []
    }

    /// How many requests are not finished, as the synchronous `pendingRequestCount()` counts them,
    /// without holding the caller's thread.
    public func pendingRequestCount() async throws(SchedulerError) -> Int {
        try await onQueue { () throws(SchedulerError) in try self.pendingRequestCount() }
    }

    /// Starts a run of `identifier` now, as the synchronous `runNow(_:)` does, without holding
    /// the caller's thread; returns the run's ID.
    @discardableResult
    public func runNow(_ identifier: String) async throws(SchedulerError) -> Int64 {
        try await onQueue { () throws(SchedulerError) in try self.runNow(identifier) }
    }

    /// Submits again the request of `identifier` that failed for good, as
    /// `retry(_:)` does, without holding the caller's thread.
    @discardableResult
    public func retry(_ identifier: String) async throws(SchedulerError) -> SubmitOutcome {
        try await onQueue { () throws(SchedulerError) in try self.retry(identifier) }
    }

    /// Where the request of `identifier` stands, as the synchronous `workInfo(_:)` tells it,
    /// without holding the caller's thread.
    public func workInfo(_ identifier: String) async throws(SchedulerError) -> WorkInfo? {
        try await onQueue { () throws(SchedulerError) in try self.workInfo(identifier) }
    }

    /// The attempts of `identifier`, newest first, as the synchronous `history(_:limit:)`
    /// reads them, without holding the caller's thread.
    public func history(_ identifier: String, limit: Int = 100) async throws(SchedulerError) -> [RunRecord] {
        try await onQueue { () throws(SchedulerError) in try self.history(identifier, limit: limit) }
    }
}
