// The one deadline of a store operation: from connecting to the last answer, whatever the
// operation waits for.

import NIOConcurrencyHelpers
import NIOCore
import PostgresNIO

/// When an operation of the store must have ended, as a timer on the store's event loop:
/// when it fires, the connection in use is closed (its pending statement fails at once, and
/// the next operation connects again) and a connection still being made is given up.
///
/// One timer an operation, not one a statement, and cancelled when the operation ends: an
/// idle instance wakes at most once after its last operation (the loop's timer is not
/// re-armed on a cancel), never again until its next.
final class OperationDeadline: Sendable {
    private let state = NIOLockedValueBox(State())
    private let timeout: Duration

    private struct State: Sendable {
        var lapsed = false
        var ended = false
        var timer: Scheduled<Void>?
        var connection: PostgresConnection?
        /// Fails what the operation waits for besides a statement (a connection being made).
        var giveUp: (@Sendable () -> Void)?
    }

    /// A deadline `timeout` from now, on `loop`.
    init(on loop: any EventLoop, after timeout: Duration) {
        self.timeout = timeout
        let timer = loop.scheduleTask(in: .nanoseconds(timeout.nanosecondsClamped)) { [state] in
            let (connection, giveUp) = state.withLockedValue { state in
                guard !state.ended else { return (PostgresConnection?.none, (@Sendable () -> Void)?.none) }
                state.lapsed = true
                return (state.connection, state.giveUp)
            }
            giveUp?()
            connection?.close().whenComplete { _ in }
        }
        state.withLockedValue { $0.timer = timer }
    }

    /// Whether the deadline passed before the operation ended.
    var hasLapsed: Bool { state.withLockedValue { $0.lapsed } }

    /// The error an operation ended by the deadline throws.
    var error: Unanswered { Unanswered(seconds: PostgresScheduleStore.seconds(timeout)) }

    /// Closes `connection` if the deadline passes while the operation uses it.
    func watch(_ connection: PostgresConnection) {
        let lapsed = state.withLockedValue { state in
            state.connection = connection
            return state.lapsed
        }
        if lapsed { connection.close().whenComplete { _ in } }
    }

    /// Waits for `future` (a connection being made), until the deadline at most; what it
    /// brings after the deadline is handed to `late` (to be closed).
    func race<T: Sendable>(_ future: EventLoopFuture<T>, late: @escaping @Sendable (T) -> Void) async throws -> T {
        let promise = future.eventLoop.makePromise(of: T.self)
        let settled = NIOLockedValueBox(false)
        let error = self.error
        let first: @Sendable () -> Bool = {
            settled.withLockedValue { settled in
                defer { settled = true }
                return !settled
            }
        }
        let giveUp: @Sendable () -> Void = { if first() { promise.fail(error) } }
        future.whenComplete { result in
            if first() {
                promise.completeWith(result)
            } else if case .success(let value) = result {
                late(value)
            }
        }
        let lapsed = state.withLockedValue { state in
            state.giveUp = giveUp
            return state.lapsed
        }
        if lapsed { giveUp() }
        defer { state.withLockedValue { $0.giveUp = nil } }
        return try await promise.futureResult.get()
    }

    /// The operation ended: the timer is cancelled.
    func end() {
        let timer = state.withLockedValue { state in
            state.ended = true
            state.connection = nil
            return state.timer
        }
        timer?.cancel()
    }
}

/// A store operation that did not end within its deadline.
struct Unanswered: Error, CustomStringConvertible {
    let seconds: Double
    var description: String { "no answer in \(seconds) s" }
}
