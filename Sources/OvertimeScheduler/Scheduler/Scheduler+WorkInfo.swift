// Where one request stands, as a query and as a sequence of its changes.

import Overtime

extension Scheduler {
    /// A consumer of ``workInfoUpdates(_:)``, and what it was last given.
    struct WorkWatcher: Sendable {
        let continuation: AsyncStream<WorkInfo>.Continuation
        var last: WorkInfo?
    }

    /// Where the request of `identifier` stands — enqueued, blocked (on what), running,
    /// succeeded, failed for good or cancelled — with its attempts, next time, newest
    /// attempt and progress; `nil` when no request has the identifier (never submitted, or
    /// finished and pruned by ``SchedulerConfiguration/historyRetention``).
    ///
    /// - Throws: a store error.
    ///
    /// Called on the runtime's loop thread (in a handler, say), it throws
    /// ``SchedulerError/Code/blockingCallOnTheLoop`` instead of holding the loop: use the
    /// `async` form there.
    public func workInfo(_ identifier: String) throws(SchedulerError) -> WorkInfo? {
        try onQueue("workInfo(_:)") { () async throws(SchedulerError) in
            try await self.currentWorkInfo(identifier)
        }
    }

    /// The work info of `identifier` now, then again each time it changes (a submit, a
    /// run's start, progress and end, a requirement or the lifecycle holding it, a
    /// cancellation, another instance's change in a fleet), as WorkManager's
    /// `getWorkInfoByIdFlow`:
    ///
    /// ```swift
    /// for await info in scheduler.workInfoUpdates("com.example.export") {
    ///     show(info.state, info.progress)
    ///     if info.state.isFinished { break }
    /// }
    /// ```
    ///
    /// Nothing is yielded while no request has the identifier; the sequence goes on after
    /// the request finishes (it may be submitted again) until the loop over it ends (or its
    /// task is cancelled), or the runtime shuts down. A consumer that falls more than 100
    /// changes behind misses the oldest of them: the newest always arrives.
    public func workInfoUpdates(_ identifier: String) -> WorkInfoUpdates {
        let (stream, continuation) = AsyncStream.makeStream(
            of: WorkInfo.self, bufferingPolicy: .bufferingNewest(Self.workInfoBuffer))
        guard (try? ScheduleLimits.check(identifier: identifier)) != nil else {
            continuation.finish()
            return WorkInfoUpdates(stream: stream, registration: WorkInfoUpdates.Registration {})
        }
        let id = watcherIDs.add(1, ordering: .relaxed).newValue
        let release: @Sendable () -> Void = { [weak self] in
            guard let self else { return }
            queue.async { self.removeWatcher(identifier, id) }
        }
        continuation.onTermination = { _ in release() }
        queue.task { [self] in
            guard !state.value.abandoned, !runtimeShutDown.withLock({ $0 }) else { return continuation.finish() }
            state.value.watchers[identifier, default: [:]][id] = WorkWatcher(continuation: continuation)
            watching.add(1, ordering: .relaxed)
            await refreshWatchers(of: [identifier])
        }
        return WorkInfoUpdates(stream: stream, registration: WorkInfoUpdates.Registration(release))
    }

    /// How many changes a consumer of ``workInfoUpdates(_:)`` may fall behind.
    static let workInfoBuffer = 100

    /// The work info of `identifier` as the store and the runs here have it.
    func currentWorkInfo(_ identifier: String) async throws(SchedulerError) -> WorkInfo? {
        // An identifier no request could have is not looked up (a NUL is an error to a
        // PostgreSQL server): none has it.
        guard (try? ScheduleLimits.check(identifier: identifier)) != nil else { return nil }
        let (stored, history) = try await fromStore { () async throws(ScheduleStoreError) in
            (try await store.request(identifier), try await store.history(identifier: identifier, limit: 2))
        }
        guard let stored else { return nil }
        let running = state.value.running[identifier]
        let current = running.map { $0.detached ? stored : $0.stored } ?? stored
        return WorkInfo(
            stored, running: running, lastRun: history.first { $0.result != .running },
            waitingFor: waitReason(current, now: wallClockNow))
    }

    /// Gives the consumers watching `identifiers` (`nil`: all) their request's work info
    /// when it changed. On the queue; costs nothing while nobody watches.
    func refreshWatchers(of identifiers: [String]? = nil) async {
        guard !state.value.watchers.isEmpty else { return }
        for identifier in identifiers ?? Array(state.value.watchers.keys) {
            guard let watchers = state.value.watchers[identifier] else { continue }
            let info: WorkInfo?
            do {
                info = try await currentWorkInfo(identifier)
            } catch {
                logger.error("cannot read the work info of '\(identifier)': \(error)")
                continue
            }
            guard let info else { continue }
            for (id, watcher) in watchers where watcher.last != info {
                if case .terminated = watcher.continuation.yield(info) {
                    // Its consumer is gone.
                    removeWatcher(identifier, id)
                } else {
                    state.value.watchers[identifier]?[id]?.last = info
                }
            }
        }
    }

    /// A run here reported progress: its watchers hear of it, and the store records it
    /// (``ProgressRecording``) — asked once per report the store has not taken yet, so that a
    /// handler reporting in a tight loop queues one write, not one per report.
    func progressReported(_ identifier: String, runID: Int64, _ progress: RunProgress, recordingDue: Bool) {
        metrics.recordProgress(handler: handlerName(for: identifier), progress.fraction)
        let watched = watching.load(ordering: .relaxed) > 0
        guard watched || recordingDue else { return }
        queue.task { [self] in
            if recordingDue { await recordProgress(identifier, runID: runID) }
            if watched { await refreshWatchers(of: [identifier]) }
        }
    }

    /// Ends every consumer's sequence (the runtime shut down, or the scheduler was let go).
    func finishWatchers() {
        for watchers in state.value.watchers.values {
            for watcher in watchers.values { watcher.continuation.finish() }
        }
        watching.subtract(state.value.watchers.values.reduce(0) { $0 + $1.count }, ordering: .relaxed)
        state.value.watchers = [:]
    }

    private func removeWatcher(_ identifier: String, _ id: Int) {
        guard let watcher = state.value.watchers[identifier]?.removeValue(forKey: id) else { return }
        watcher.continuation.finish()
        watching.subtract(1, ordering: .relaxed)
        if state.value.watchers[identifier]?.isEmpty == true { state.value.watchers[identifier] = nil }
    }
}
