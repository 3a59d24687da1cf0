// Store operations take turns on the scheduler's connection: a transaction's statements
// never mix with another operation's.

import NIOConcurrencyHelpers

/// One store operation at a time, in the order they asked. An operation that waits for its
/// turn suspends (no thread waits), and nothing is locked while one runs: the turn is a
/// flag, handed on when the operation ends.
final class OperationTurns: Sendable {
    private let state = NIOLockedValueBox(State())

    private struct State: Sendable {
        var taken = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    /// Returns once it is the caller's turn; the caller calls ``end()`` when done.
    func begin() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLockedValue { state in
                if state.taken {
                    state.waiting.append(continuation)
                    return false
                }
                state.taken = true
                return true
            }
            if now { continuation.resume() }
        }
    }

    /// Hands the turn to the next operation waiting, if any.
    func end() {
        let next = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            guard !state.waiting.isEmpty else {
                state.taken = false
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}
