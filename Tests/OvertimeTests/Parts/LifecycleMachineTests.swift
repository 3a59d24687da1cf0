import OvertimeTestSupport
import Testing

@testable import Overtime

@Suite("LifecycleMachine: transitions as actions")
struct LifecycleMachineTests {
    typealias Action = LifecycleMachine.Action

    private func events(_ actions: [Action]) -> [LifecycleEvent] {
        actions.compactMap { if case .emit(let event) = $0 { event } else { nil } }
    }

    @Test func backgroundFromActiveEmitsResignThenEnterAndStartsBudgetBeforeTheEvent() throws {
        var machine = LifecycleMachine()
        let actions = try machine.handle(.background, now: .zero).get()
        #expect(
            actions == [
                .enter(.inactive), .emit(.willResignActive), .enter(.background), .startBudget,
                .emit(.didEnterBackground),
            ])
        #expect(machine.settle(hasOpenGrants: true) == [])
        #expect(machine.settle(hasOpenGrants: false) == [.enter(.suspended), .clearBudget, .emit(.didSuspend)])
        #expect(machine.state == .suspended)
    }

    @Test func foregroundFromBackgroundAndFromSuspended() throws {
        for suspend in [false, true] {
            var machine = LifecycleMachine()
            _ = try machine.handle(.background, now: .zero).get()
            if suspend { _ = machine.settle(hasOpenGrants: false) }
            let actions = try machine.handle(.foreground, now: .zero).get()
            #expect(events(actions) == [.willEnterForeground, .didBecomeActive])
            #expect(actions.first == .enter(.inactive))
            #expect(actions.contains(.clearBudget))
            #expect(machine.state == .active)
        }
    }

    @Test func requestsForTheCurrentStateAreNoOps() throws {
        var machine = LifecycleMachine()
        #expect(throws: IgnoredRequest(.alreadyThere)) { try machine.handle(.foreground, now: .zero).get() }
        _ = try machine.handle(.background, now: .zero).get()
        #expect(throws: IgnoredRequest(.alreadyThere)) { try machine.handle(.background, now: .zero).get() }
        _ = machine.settle(hasOpenGrants: false)
        #expect(throws: IgnoredRequest(.alreadyThere)) { try machine.handle(.background, now: .zero).get() }
    }

    @Test func terminationFromActivePassesThroughBackground() throws {
        var machine = LifecycleMachine()
        let actions = try machine.handle(.termination, now: .zero).get()
        #expect(events(actions) == [.willResignActive, .didEnterBackground, .willTerminate])
        #expect(actions.contains(.startBudget))
        #expect(machine.settle(hasOpenGrants: true) == [])
        #expect(machine.settle(hasOpenGrants: false) == [.enter(.terminated), .clearBudget, .finishTermination])
    }

    @Test func terminationFromBackgroundKeepsTheRunningBudget() throws {
        var machine = LifecycleMachine()
        _ = try machine.handle(.background, now: .zero).get()
        let actions = try machine.handle(.termination, now: .zero).get()
        #expect(actions == [.emit(.willTerminate)])
    }

    @Test func terminationFromSuspendedStartsAFreshBudget() throws {
        var machine = LifecycleMachine()
        _ = try machine.handle(.background, now: .zero).get()
        _ = machine.settle(hasOpenGrants: false)
        let actions = try machine.handle(.termination, now: .zero).get()
        #expect(actions == [.enter(.background), .startBudget, .emit(.willTerminate)])
    }

    @Test func everyRequestIsIgnoredWhileTerminatingAndAfter() throws {
        var machine = LifecycleMachine()
        _ = try machine.handle(.termination, now: .zero).get()
        for request in [LifecycleRequest.background, .foreground, .termination] {
            #expect(throws: IgnoredRequest(.terminating)) {
                try machine.handle(request, now: MonotonicInstant.zero + .seconds(5)).get()
            }
        }
        _ = machine.settle(hasOpenGrants: false)
        #expect(machine.state == .terminated)
        #expect(throws: IgnoredRequest(.terminating)) { try machine.handle(.foreground, now: .zero).get() }
        #expect(machine.settle(hasOpenGrants: false) == [])
    }

    /// A repeat within the grace of the first request is the same request, whoever asked
    /// first; after it, an operator's request expires every grant and the program's own is
    /// ignored. The grace counts from the first request, not from the last repeat.
    @Test(arguments: [LifecycleRequest.termination, .terminationFromOutside])
    func aRepeatedTerminationWithinTheGraceOfTheFirstIsTheSameRequest(first: LifecycleRequest) throws {
        var machine = LifecycleMachine(repeatedTerminationGrace: .seconds(1))
        let start = MonotonicInstant(nanoseconds: 1_000_000_000)
        _ = try machine.handle(first, now: start).get()
        #expect(machine.terminationRequestedAt == start)
        for repeatAt in [Duration.milliseconds(300), .milliseconds(999)] {
            #expect(throws: IgnoredRequest(.sameTermination)) {
                try machine.handle(.terminationFromOutside, now: start + repeatAt).get()
            }
            #expect(throws: IgnoredRequest(.sameTermination)) {
                try machine.handle(.termination, now: start + repeatAt).get()
            }
        }
        #expect(machine.terminationRequestedAt == start, "repeats do not move the first request")
        #expect(throws: IgnoredRequest(.terminating)) {
            try machine.handle(.termination, now: start + .seconds(1)).get()
        }
        #expect(try machine.handle(.terminationFromOutside, now: start + .seconds(1)).get() == [.expireAllGrants])
        #expect(try machine.handle(.terminationFromOutside, now: start + .seconds(9)).get() == [.expireAllGrants])
        _ = machine.settle(hasOpenGrants: false)
        #expect(throws: IgnoredRequest(.terminating)) {
            try machine.handle(.terminationFromOutside, now: start + .seconds(10)).get()
        }
    }

    /// A memory warning reaches observers at once; more inside the interval become one at
    /// its end, however many come; after it, the next is at once again; terminated
    /// programs hear none. The state never changes.
    @Test func memoryWarningsAreDeliveredAtMostOncePerIntervalAndNoneIsLost() throws {
        let second = Duration.seconds(1)
        var machine = LifecycleMachine(memoryWarningInterval: .seconds(10))
        let start = MonotonicInstant.zero
        var transcript: [[Action]] = []
        transcript.append(machine.memoryWarning(now: start))
        transcript.append(machine.memoryWarning(now: start + second * 3))
        transcript.append(machine.memoryWarning(now: start + second * 4))
        transcript.append(machine.memoryWarningDue(now: start + second * 10))
        transcript.append(machine.memoryWarningDue(now: start + second * 10))  // a stale timer
        transcript.append(machine.memoryWarning(now: start + second * 25))
        _ = try machine.handle(.background, now: start + second * 26).get()
        transcript.append(machine.memoryWarning(now: start + second * 30))
        #expect(
            transcript == [
                [.emit(.didReceiveMemoryWarning)],
                [.scheduleMemoryWarning(at: start + second * 10)],
                [],
                [.emit(.didReceiveMemoryWarning)],
                [],
                [.emit(.didReceiveMemoryWarning)],
                [.scheduleMemoryWarning(at: start + second * 35)],
            ])
        #expect(machine.state == .background)
        _ = try machine.handle(.termination, now: start + second * 31).get()
        #expect(machine.settle(hasOpenGrants: false).contains(.finishTermination))
        #expect(machine.memoryWarningDue(now: start + second * 35) == [])
        #expect(machine.memoryWarning(now: start + second * 50) == [])
    }
}
