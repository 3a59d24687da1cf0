import Testing

@testable import OvertimeDashboard

/// Wrong sign-ins, answered a pause apart for every client together.
@Suite("Sign-in throttle")
struct SignInThrottleTests {
    @Test func wrongSignInsAtOnceAreAnsweredAPauseApartAndAFloodIsRefused() {
        let throttle = SignInThrottle()
        let start = ContinuousClock.now
        let turns = (0..<20).map { _ in throttle.reserveTurn(at: start) }
        let given = turns.compactMap { $0 }
        #expect(given.count == SignInThrottle.mostWaiting, "\(turns)")
        #expect(given == (1...SignInThrottle.mostWaiting).map { start + SignInThrottle.pause * $0 })
        // Half way through, the half answered have given their places back.
        let pause = SignInThrottle.pause
        let halfway = start + pause * (SignInThrottle.mostWaiting / 2)
        let more = (0..<20).compactMap { _ in throttle.reserveTurn(at: halfway) }
        #expect(more.count == SignInThrottle.mostWaiting / 2)
        #expect(more.first == start + pause * (SignInThrottle.mostWaiting + 1))
        // Once all were answered, a wrong token waits one pause again.
        let drained = start + pause * (SignInThrottle.mostWaiting * 2)
        #expect(throttle.reserveTurn(at: drained) == drained + pause)
    }
}
