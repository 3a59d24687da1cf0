// Operations on one connection: one at a time, each within its deadline, on the
// connection's event loop.

import NIOCore

/// The operations of one connection's user (the store, the inspector): each takes its
/// turn (``OperationTurns``), runs async on postgres-nio on the connection's event loop
/// (``EventLoopTaskExecutor``) and ends by its deadline (``OperationDeadline``).
final class ConnectionOperations: Sendable {
    let executor: EventLoopTaskExecutor
    let turns = OperationTurns()
    /// How long an operation may take, from connecting to its last answer.
    let timeout: Duration

    init(on loop: any EventLoop, timeout: Duration) {
        executor = EventLoopTaskExecutor(loop)
        self.timeout = timeout
    }

    var loop: any EventLoop { executor.loop }

    /// Runs `body` in its turn with a deadline (which each statement answered starts again),
    /// on the event loop; what failed because the deadline closed its connection throws
    /// ``Unanswered``.
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
                return try await OperationDeadline.$current.withValue(deadline) { try await body(deadline) }
            } catch {
                if deadline.hasLapsed { throw deadline.error }
                throw error
            }
        }
    }
}
