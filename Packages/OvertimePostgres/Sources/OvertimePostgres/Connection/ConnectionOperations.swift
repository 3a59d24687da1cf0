// Operations on one connection: one at a time, each within its deadline, on the
// connection's event loop.

import Dispatch
import NIOConcurrencyHelpers
import NIOCore

/// The operations of one connection's user (the store, the inspector): each takes its
/// turn (``OperationTurns``), runs async on postgres-nio on the connection's event loop
/// (``EventLoopTaskExecutor``) and ends by its deadline (``OperationDeadline``).
final class ConnectionOperations: Sendable {
    let executor: EventLoopTaskExecutor
    let turns = OperationTurns()
    /// How long an operation may take, from connecting to its last answer.
    let timeout: Duration
    /// Says what a synchronous call made on the event loop itself is refused with.
    private let name: String

    init(on loop: any EventLoop, timeout: Duration, name: String) {
        executor = EventLoopTaskExecutor(loop)
        self.timeout = timeout
        self.name = name
    }

    var loop: any EventLoop { executor.loop }

    /// Runs `body` in its turn with a deadline, on the event loop; what failed because the
    /// deadline closed its connection throws ``Unanswered``.
    ///
    /// On the loop, not the caller's executor: each answer resumes the operation on the
    /// thread that read it. Resumed on Swift's shared pool instead, an operation waits for a
    /// free thread of it, and a pool kept busy by its program (blocking work, as tests do)
    /// made the deadline pass on answers that had come in time.
    func perform<T: Sendable>(_ body: (OperationDeadline) async throws -> T) async throws -> T {
        try await withTaskExecutorPreference(executor) {
            await turns.begin()
            defer { turns.end() }
            let deadline = OperationDeadline(on: loop, after: timeout)
            defer { deadline.end() }
            do {
                return try await body(deadline)
            } catch {
                if deadline.hasLapsed { throw deadline.error }
                throw error
            }
        }
    }

    /// The one wait, for the store's synchronous calls (the ``ScheduleStore`` contract; the
    /// inspector's reads are async and never come here): the calling thread — the
    /// scheduler's queue, never the runtime's loop — waits while `operation` runs on the
    /// event loop, which ends it by its deadline.
    func waitFor<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) throws -> T {
        // Waiting on the connection's own loop would wait for itself.
        guard !loop.inEventLoop else { throw OnTheEventLoop(name: name) }
        let answered = DispatchSemaphore(value: 0)
        let result = NIOLockedValueBox<Result<T, any Error>?>(nil)
        Task(executorPreference: executor) {
            let outcome: Result<T, any Error>
            do { outcome = .success(try await operation()) } catch { outcome = .failure(error) }
            result.withLockedValue { $0 = outcome }
            answered.signal()
        }
        answered.wait()
        return try result.withLockedValue { $0! }.get()
    }
}

/// A synchronous call made on the event loop its operation would run on.
struct OnTheEventLoop: Error, CustomStringConvertible {
    let name: String
    var description: String { "\(name) was called on its own event loop, which it would wait for" }
}
