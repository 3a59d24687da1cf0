import OvertimeTestSupport
import Testing

@testable import Overtime

@Suite("GrantDecisions: admission, expiry and termination as actions")
struct GrantDecisionsTests {
    typealias Action = GrantDecisions.Action

    private let decisions = GrantDecisions(leadTime: .seconds(2), terminationPolicy: .endTask)

    private func at(_ seconds: Double) -> MonotonicInstant {
        MonotonicInstant(nanoseconds: UInt64(seconds * 1e9))
    }

    private func budget(deadline: Double, expirationDone: Bool = false) -> DeadlineSchedule.Budget {
        DeadlineSchedule.Budget(
            deadline: at(deadline), expirationPoint: at(deadline - 2), expirationDone: expirationDone)
    }

    @Test func refusalsFollowTheStateThenTheTimeLeftThenTheMaximumDuration() {
        func refusal(_ state: LifecycleState, deadline: Double? = nil, now: Double = 10, maximum: Duration? = nil)
            -> BackgroundTaskRefusal?
        {
            decisions.refusal(
                GrantDecisions.View(state: state, budgetDeadline: deadline.map(at)), now: at(now),
                maximumDuration: maximum)
        }
        #expect(refusal(.active) == nil)
        #expect(refusal(.inactive, maximum: .seconds(3)) == nil)
        #expect(
            refusal(.active, maximum: .seconds(2))
                == .maximumDurationTooShort(requested: .seconds(2), leadTime: .seconds(2)))
        #expect(refusal(.suspended) == .suspended)
        #expect(refusal(.terminated, maximum: .seconds(1)) == .terminated)
        #expect(refusal(.background, deadline: 12.5) == nil)
        // At the expiration point exactly, only the lead time is left: refused.
        #expect(
            refusal(.background, deadline: 12)
                == .insufficientTimeRemaining(remaining: .seconds(2), leadTime: .seconds(2)))
        #expect(
            refusal(.background, deadline: 9)
                == .insufficientTimeRemaining(remaining: .zero, leadTime: .seconds(2)))
    }

    @Test func aGrantWithItsOwnDeadlineIsCheckedAtItsExpirationPointThenItsDeadline() {
        // Begun at 0 with a maximum duration of 10 s: deadline 10, expiration point 8.
        let deadline = at(10)
        var transcript: [[Action]] = []
        transcript.append(decisions.afterBegin(ownDeadline: deadline, budgetExpirationDone: false))
        transcript.append(decisions.atOwnCheck(ownDeadline: deadline, now: at(8)))
        transcript.append(decisions.atOwnCheck(ownDeadline: deadline, now: at(10)))
        #expect(
            transcript == [
                [.checkAgain(at: at(8))],
                [.expire(.grant), .checkAgain(at: deadline)],
                [.terminate(.grant)],
            ])
        // A late wake-up (the loop was busy) past the deadline terminates at once.
        #expect(decisions.atOwnCheck(ownDeadline: deadline, now: at(30)) == [.terminate(.grant)])
        // A check that comes early (the deadline moved later) waits again.
        #expect(decisions.atOwnCheck(ownDeadline: at(20), now: at(8)) == [.checkAgain(at: at(18))])
        #expect(decisions.atOwnCheck(ownDeadline: nil, now: at(8)) == [])
    }

    @Test func theBudgetExpiresEveryGrantOnceThenTerminatesWhatIsLeftAndSettles() {
        var current = budget(deadline: 30)
        #expect(decisions.atBudgetExpirationPoint(current, now: at(27.9)) == [])
        #expect(decisions.atBudgetExpirationPoint(current, now: at(28)) == [.markBudgetExpired, .expire(.all)])
        current.expirationDone = true
        #expect(decisions.atBudgetExpirationPoint(current, now: at(29)) == [])
        #expect(decisions.atBudgetDeadline(current, now: at(29.9)) == [])
        #expect(decisions.atBudgetDeadline(current, now: at(30)) == [.clearBudget, .terminate(.all), .settle])
        #expect(decisions.atBudgetDeadline(nil, now: at(30)) == [])
        #expect(decisions.atBudgetExpirationPoint(nil, now: at(30)) == [])
    }

    @Test func aGrantAppliedAfterTheBudgetExpiredIsAskedToStopAtOnce() {
        #expect(decisions.afterBegin(ownDeadline: nil, budgetExpirationDone: true) == [.expire(.grant)])
        #expect(
            decisions.afterBegin(ownDeadline: at(5), budgetExpirationDone: true)
                == [.expire(.grant), .checkAgain(at: at(3))])
        #expect(decisions.afterBegin(ownDeadline: nil, budgetExpirationDone: false) == [])
    }

    @Test func forcedExpiryMovesTheDeadlineToNowPlusLeadButNeverLater() {
        #expect(
            decisions.forcedExpiry(ownDeadline: nil, now: at(5))
                == [.setOwnDeadline(at(7)), .expire(.grant), .checkAgain(at: at(7))])
        #expect(
            decisions.forcedExpiry(ownDeadline: at(6), now: at(5))
                == [.setOwnDeadline(at(6)), .expire(.grant), .checkAgain(at: at(6))])
    }

    @Test func terminationExitsOnlyUnderTheExitPolicyAndOnlyWhenSomethingWasTerminated() {
        let exiting = GrantDecisions(leadTime: .seconds(2), terminationPolicy: .exitProcess(status: 3))
        #expect(decisions.afterTerminations(2) == [])
        #expect(exiting.afterTerminations(0) == [])
        #expect(exiting.afterTerminations(1) == [.exitProcess(status: 3)])
    }
}
