// A serial queue of work on one thread of its own, asleep without a timeout while empty.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Closures run one after another, in order, on a thread of the queue's own: started on
/// first use, ended once the queue is released and drained.
///
/// Not a `DispatchQueue`: the first Dispatch queue a process uses starts libdispatch's
/// worker-pool monitor, which wakes the process once a second for as long as it lives,
/// so a daemon at rest would never be at rest. Also a `TaskExecutor`: a task that
/// prefers it runs its nonisolated code here rather than on Swift's global executor
/// (which is built on that same pool).
package final class SerialWorkQueue: TaskExecutor, Sendable {
    private let name: String
    private let shared = Locked(Pending())

    private struct Pending: Sendable {
        var work: [@Sendable () -> Void] = []
        var started = false
        var released = false
        /// The queue's thread, once it runs.
        var thread: pthread_t?
    }

    /// A queue whose thread is named `name` (at most 15 characters).
    package init(name: String) {
        self.name = name
    }

    deinit {
        shared.withLock { $0.released = true }
        shared.broadcast()
    }

    /// Runs `work` on the queue's thread after everything queued before it.
    package func async(_ work: @escaping @Sendable () -> Void) {
        let start = shared.withLock { pending in
            pending.work.append(work)
            defer { pending.started = true }
            return !pending.started
        }
        if start {
            let shared = self.shared
            spawnThread(name: name) { Self.run(shared) }
        } else {
            shared.broadcast()
        }
    }

    /// Runs `body` on the queue's thread after everything queued before it, and returns
    /// its result. Called on the queue's own thread (from work it runs), runs `body` at
    /// once rather than waiting for itself.
    package func sync<T>(_ body: () -> T) -> T {
        if isCurrent { return body() }
        return withoutActuallyEscaping(body) { body in
            let call = Call(body)
            async { call.run() }
            return call.wait()
        }
    }

    /// Runs `body` on the queue's thread after everything queued before it, and resumes the
    /// caller with its result: no thread waits for it.
    package func perform<T: Sendable, Failure: Error>(
        _ body: @escaping @Sendable () throws(Failure) -> T
    ) async throws(Failure) -> T {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, Failure>, Never>) in
            async {
                do throws(Failure) {
                    continuation.resume(returning: .success(try body()))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }

    /// Whether the caller runs on the queue's thread (for assertions: it takes the lock).
    package var isCurrent: Bool {
        shared.withLock { pending in pending.thread.map { pthread_equal($0, pthread_self()) != 0 } } ?? false
    }

    /// Runs a job of a task that prefers this executor.
    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }

    private static func run(_ shared: Locked<Pending>) {
        shared.withLock { $0.thread = pthread_self() }
        while true {
            let batch = shared.withLock(waitingUntil: { !$0.work.isEmpty || $0.released }) { pending, _ in
                defer { pending.work = [] }
                return pending.work
            }
            if batch.isEmpty { return }  // released, and everything queued has run
            for work in batch { work() }
        }
    }

    /// A ``sync(_:)`` call: its caller waits for the queue's thread to run it.
    private final class Call<T>: @unchecked Sendable {
        // Run and dropped by the queue's thread before `done` (the body must not outlive
        // the call: `withoutActuallyEscaping` checks); the result read by the caller after.
        private var body: (() -> T)?
        private var result: [T] = []
        private let done = Locked(false)

        init(_ body: @escaping () -> T) { self.body = body }

        func run() {
            if let body { result.append(body()) }
            body = nil
            done.withLock { $0 = true }
            done.broadcast()
        }

        func wait() -> T {
            done.withLock(waitingUntil: { $0 }) { _, _ in }
            return result[0]
        }
    }
}
