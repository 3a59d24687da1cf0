// The deadline of a store operation: from connecting to the last answer, each answer of
// the server giving it the whole time again, whatever the operation waits for.

import NIOConcurrencyHelpers
import NIOCore
import PostgresNIO

/// When an operation of the store must have had its next answer, as a timer on the store's
/// event loop: when it fires, the connection in use is closed (its pending statement fails
/// at once, and the next operation connects again) and a connection still being made is
/// given up.
///
/// Each statement answered starts it again (``answered()``): what it bounds is a server that
/// stopped answering, not the size of the work. One deadline of the whole operation failed
/// a submission of 20,000 requests on a loaded machine whose server answered each of its
/// statements (4.3 s for the insert after 2.0 s for the delete, under ThreadSanitizer with
/// both cores busy), while a server stopped is still found within one timeout of its last
/// answer.
///
/// One timer an operation at a time, not one a statement, and cancelled when the operation
/// ends: an idle instance wakes at most once after its last operation (the loop's timer is
/// not re-armed on a cancel), never again until its next.
final class OperationDeadline: Sendable {
    /// The deadline of the operation this task runs (``ConnectionOperations/perform(_:)``),
    /// for the statements to say they were answered.
    @TaskLocal static var current: OperationDeadline?

    private let state = NIOLockedValueBox(State())
    private let timeout: Duration
    private let loop: any EventLoop

    private struct State: Sendable {
        var lapsed = false
        var ended = false
        /// Which arming of the timer is the current one: an earlier one that fires anyway
        /// (its cancel came too late) does nothing.
        var generation = 0
        var timer: Scheduled<Void>?
        var connection: PostgresConnection?
        /// Fails what the operation waits for besides a statement (a connection being made).
        var giveUp: (@Sendable () -> Void)?
    }

    /// A deadline `timeout` from now, on `loop`.
    init(on loop: any EventLoop, after timeout: Duration) {
        self.timeout = timeout
        self.loop = loop
        let timer = arm(generation: 0)
        state.withLockedValue { $0.timer = timer }
    }

    /// The timer of arming `generation`: `timeout` from now, it gives up on the operation
    /// unless it ended or was answered since.
    private func arm(generation: Int) -> Scheduled<Void> {
        loop.scheduleTask(in: .nanoseconds(timeout.nanosecondsClamped)) { [state] in
            let (connection, giveUp) = state.withLockedValue { state in
                guard !state.ended, state.generation == generation else {
                    return (PostgresConnection?.none, (@Sendable () -> Void)?.none)
                }
                state.lapsed = true
                return (state.connection, state.giveUp)
            }
            giveUp?()
            connection?.close().whenComplete { _ in }
        }
    }

    /// The server answered a statement: the operation has the whole timeout again for its
    /// next answer (and the program's own work on this one). Nothing once it lapsed or ended.
    func answered() {
        let generation: Int? = state.withLockedValue { state in
            guard !state.lapsed, !state.ended else { return nil }
            state.generation += 1
            return state.generation
        }
        guard let generation else { return }
        let timer = arm(generation: generation)
        let replaced: Scheduled<Void>? = state.withLockedValue { state in
            guard !state.ended, state.generation == generation else { return timer }
            defer { state.timer = timer }
            return state.timer
        }
        replaced?.cancel()
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
