// A serial queue of work on one thread of its own, asleep without a timeout while empty.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Closures run one after another, in order, on a thread of the queue's own: started on
/// first use, ended once the queue is released and drained.
///
/// Work may be asynchronous (``task(_:)``): it runs as a task on the queue's thread and,
/// while it awaits (a database's answer), the thread is free — it runs the task's own
/// continuations and the jobs of other tasks that prefer the queue — but no later work
/// starts until it ends. So work still has the queue to itself from its start to its end,
/// as synchronous work does, without a thread held while it waits.
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
        /// Work, in order; none starts while ``suspended``.
        var work: [@Sendable () -> Void] = []
        /// Jobs of tasks that prefer the queue (the continuations of asynchronous work among
        /// them): they run even while asynchronous work is suspended.
        var jobs: [@Sendable () -> Void] = []
        /// Asynchronous work has started and not ended.
        var suspended = false
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
        add { $0.work.append(work) }
    }

    /// Runs `work` as a task on the queue's thread after everything queued before it; nothing
    /// queued after it starts until it ends, its awaits included. Work it queues itself
    /// runs after it: it must not wait for that.
    package func task(_ work: @escaping @Sendable () async -> Void) {
        async {
            self.shared.withLock { $0.suspended = true }
            Task(executorPreference: self) {
                await work()
                self.shared.withLock { $0.suspended = false }
                self.shared.broadcast()
            }
        }
    }

    private func add(_ change: (inout Pending) -> Void) {
        let start = shared.withLock { pending in
            change(&pending)
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

    /// Runs `body` as ``task(_:)`` does and returns its result, the caller's thread waiting
    /// for it: never call it from the queue's own thread (the work would wait for itself).
    package func syncTask<T: Sendable, Failure: Error>(
        _ body: @escaping @Sendable () async throws(Failure) -> T
    ) throws(Failure) -> T {
        precondition(!isCurrent, "SerialWorkQueue.syncTask called on the queue's own thread")
        let result = Locked<[Result<T, Failure>]>([])
        task {
            let outcome: Result<T, Failure>
            do throws(Failure) {
                outcome = .success(try await body())
            } catch {
                outcome = .failure(error)
            }
            result.withLock { $0 = [outcome] }
            result.broadcast()
        }
        return try result.withLock(waitingUntil: { !$0.isEmpty }) { value, _ in value[0] }.get()
    }

    /// Runs `body` as ``task(_:)`` does, and resumes the caller with its result: no thread
    /// waits for it.
    package func performTask<T: Sendable, Failure: Error>(
        _ body: @escaping @Sendable () async throws(Failure) -> T
    ) async throws(Failure) -> T {
        let handoff = Handoff<T, Failure>()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            task {
                do throws(Failure) {
                    handoff.set(.success(try await body()))
                } catch {
                    handoff.set(.failure(error))
                }
                continuation.resume()
            }
        }
        return try handoff.result.get()
    }

    /// Runs `body` on the queue's thread after everything queued before it, and resumes the
    /// caller with its result: no thread waits for it.
    package func perform<T: Sendable, Failure: Error>(
        _ body: @escaping @Sendable () throws(Failure) -> T
    ) async throws(Failure) -> T {
        let handoff = Handoff<T, Failure>()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            async {
                do throws(Failure) {
                    handoff.set(.success(try body()))
                } catch {
                    handoff.set(.failure(error))
                }
                continuation.resume()
            }
        }
        return try handoff.result.get()
    }

    /// A result handed from the queue's thread to the caller under a lock, beside the
    /// continuation that resumes the caller. The continuation orders the two threads, but
    /// ThreadSanitizer does not always see it (a caller that had not yet suspended when
    /// resumed; swiftlang/swift#57803), and reported the caller's first reads of what the
    /// queue's thread had made (an inspector it opened) as races; it sees a lock.
    private final class Handoff<T: Sendable, Failure: Error>: Sendable {
        private let value = Locked<Result<T, Failure>?>(nil)

        func set(_ result: Result<T, Failure>) { value.withLock { $0 = result } }

        /// Set before the continuation resumes the caller, which alone reads it.
        var result: Result<T, Failure> {
            guard let result = value.withLock({ $0 }) else {
                preconditionFailure("SerialWorkQueue: a caller resumed before its result was set")
            }
            return result
        }
    }

    /// Whether the caller runs on the queue's thread (for assertions: it takes the lock).
    package var isCurrent: Bool {
        shared.withLock { pending in pending.thread.map { pthread_equal($0, pthread_self()) != 0 } } ?? false
    }

    /// Runs a job of a task that prefers this executor.
    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        add { $0.jobs.append { job.runSynchronously(on: self.asUnownedTaskExecutor()) } }
    }

    private static func run(_ shared: Locked<Pending>) {
        shared.withLock { $0.thread = pthread_self() }
        while true {
            let (jobs, batch): ([@Sendable () -> Void], [@Sendable () -> Void]) = shared.withLock(
                waitingUntil: { !$0.jobs.isEmpty || (!$0.suspended && !$0.work.isEmpty) || $0.released }
            ) { pending, _ in
                defer { pending.jobs = [] }
                guard !pending.suspended else { return (pending.jobs, []) }
                defer { pending.work = [] }
                return (pending.jobs, pending.work)
            }
            // Released (no work can come any more) and everything queued has run. Asynchronous
            // work under way keeps the queue (its task holds it), so it is never cut short.
            if jobs.isEmpty, batch.isEmpty { return }
            for job in jobs { job() }
            for (index, work) in batch.enumerated() {
                work()
                // Asynchronous work started: what follows waits for its end.
                let held = shared.withLock { pending in
                    guard pending.suspended else { return false }
                    pending.work.insert(contentsOf: batch[(index + 1)...], at: 0)
                    return true
                }
                if held { break }
            }
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
