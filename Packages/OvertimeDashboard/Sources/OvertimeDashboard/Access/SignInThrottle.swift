// Guessing tokens, slowed for everyone at once: a wrong sign-in is answered only after the
// ones before it, each a pause apart, so the whole world guesses a few times a second
// however many connections it opens. A right token never waits.

import NIOConcurrencyHelpers

/// When the next wrong sign-in may be answered.
final class SignInThrottle: Sendable {
    /// The pause between two answers to wrong tokens.
    static let pause: Duration = .milliseconds(250)
    /// The most wrong sign-ins waiting for their answer; past it they are refused at once
    /// (429), so that a flood holds no memory and no connections.
    static let mostWaiting = 16

    private let nextAnswer = NIOLockedValueBox(ContinuousClock.Instant.now)

    /// Waits for this wrong sign-in's turn; false when too many are waiting already.
    func waitForTurn() async -> Bool {
        guard let turn = reserveTurn(at: .now) else { return false }
        try? await Task.sleep(until: turn, clock: .continuous)
        return true
    }

    /// The turn of a wrong sign-in made at `now`: a pause after the last one given, or nil
    /// (none given) when that is more than ``mostWaiting`` pauses away.
    func reserveTurn(at now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        nextAnswer.withLockedValue { next in
            let turn = max(now, next) + Self.pause
            guard turn - now <= Self.pause * Self.mostWaiting else { return nil }
            next = turn
            return turn
        }
    }
}
