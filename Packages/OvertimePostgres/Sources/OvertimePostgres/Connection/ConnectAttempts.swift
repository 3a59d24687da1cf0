// When to connect again after the server took a connection and never answered it.

import Logging
import NIOConcurrencyHelpers
import NIOCore
import PostgresNIO

/// Whether an operation that needs a new connection may try to make one now.
///
/// A server that takes connections and never answers (stopped, frozen, behind a network
/// that drops its packets) costs each attempt its operation's whole deadline. Operations take
/// turns, so a call queued behind a few others waited a deadline for each of them: with a
/// fleet's database stopped, a handler's submit waited behind the scheduler's own reads
/// for ten seconds and more where its deadline was one. So, for
/// ``PostgresScheduleConfiguration/reconnectInterval`` after an attempt went unanswered,
/// operations that would connect fail at once instead, saying so; the first after it tries
/// again. A refused connection is answered at once, and is tried at each operation.
final class ConnectAttempts: Sendable {
    private let lastUnanswered = NIOLockedValueBox<NIODeadline?>(nil)
    private let interval: Duration
    private let timeout: Duration

    /// Attempts held back for `interval` after one that went unanswered for `timeout`.
    init(interval: Duration, timeout: Duration) {
        self.interval = interval
        self.timeout = timeout
    }

    /// A connection to the server `configuration` names, on `loop`, made within `deadline`
    /// (one made after it is closed), unless an unanswered attempt is more recent than the
    /// interval (then throws ``ConnectingHeldBack`` at once); notes whether this one went
    /// unanswered.
    func connect(
        within deadline: OperationDeadline, on loop: any EventLoop, configuration: PostgresConnection.Configuration,
        id: Int, logger: Logger
    ) async throws -> PostgresConnection {
        try checkMayConnect()
        do {
            let made = try await deadline.race(
                PostgresConnection.connect(on: loop, configuration: configuration, id: id, logger: logger),
                late: { late in late.close().whenComplete { _ in } })
            lastUnanswered.withLockedValue { $0 = nil }
            return made
        } catch {
            let unanswered = deadline.hasLapsed
            lastUnanswered.withLockedValue { $0 = unanswered ? .now() : nil }
            throw error
        }
    }

    private func checkMayConnect() throws {
        guard let last = lastUnanswered.withLockedValue({ $0 }) else { return }
        let since = NIODeadline.now() - last
        let wait = TimeAmount.nanoseconds(interval.nanosecondsClamped) - since
        guard wait > .zero else { return }
        throw ConnectingHeldBack(
            secondsAgo: Double(since.nanoseconds) / 1e9, timeout: PostgresScheduleStore.seconds(timeout),
            secondsToWait: Double(wait.nanoseconds) / 1e9)
    }
}

/// An operation that did not connect because the last attempt went unanswered a moment ago.
struct ConnectingHeldBack: Error, CustomStringConvertible {
    let secondsAgo: Double
    let timeout: Double
    let secondsToWait: Double

    var description: String {
        "a connection \(Self.rounded(secondsAgo)) s ago had no answer in \(timeout) s:"
            + " not connecting again for \(Self.rounded(secondsToWait)) s"
    }

    private static func rounded(_ seconds: Double) -> String {
        String(Double((seconds * 10).rounded()) / 10)
    }
}
