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
        let actions = try machine.handle(.background).get()
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
            _ = try machine.handle(.background).get()
            if suspend { _ = machine.settle(hasOpenGrants: false) }
            let actions = try machine.handle(.foreground).get()
            #expect(events(actions) == [.willEnterForeground, .didBecomeActive])
            #expect(actions.first == .enter(.inactive))
            #expect(actions.contains(.clearBudget))
            #expect(machine.state == .active)
        }
    }

    @Test func requestsForTheCurrentStateAreNoOps() throws {
        var machine = LifecycleMachine()
        #expect(throws: IgnoredRequest(.alreadyThere)) { try machine.handle(.foreground).get() }
        _ = try machine.handle(.background).get()
        #expect(throws: IgnoredRequest(.alreadyThere)) { try machine.handle(.background).get() }
        _ = machine.settle(hasOpenGrants: false)
        #expect(throws: IgnoredRequest(.alreadyThere)) { try machine.handle(.background).get() }
    }

    @Test func terminationFromActivePassesThroughBackground() throws {
        var machine = LifecycleMachine()
        let actions = try machine.handle(.termination).get()
        #expect(events(actions) == [.willResignActive, .didEnterBackground, .willTerminate])
        #expect(actions.contains(.startBudget))
        #expect(machine.settle(hasOpenGrants: true) == [])
        #expect(machine.settle(hasOpenGrants: false) == [.enter(.terminated), .clearBudget, .finishTermination])
    }

    @Test func terminationFromBackgroundKeepsTheRunningBudget() throws {
        var machine = LifecycleMachine()
        _ = try machine.handle(.background).get()
        let actions = try machine.handle(.termination).get()
        #expect(actions == [.emit(.willTerminate)])
    }

    @Test func terminationFromSuspendedStartsAFreshBudget() throws {
        var machine = LifecycleMachine()
        _ = try machine.handle(.background).get()
        _ = machine.settle(hasOpenGrants: false)
        let actions = try machine.handle(.termination).get()
        #expect(actions == [.enter(.background), .startBudget, .emit(.willTerminate)])
    }

    @Test func everyRequestIsIgnoredWhileTerminatingAndAfter() throws {
        var machine = LifecycleMachine()
        _ = try machine.handle(.termination).get()
        for request in [LifecycleRequest.background, .foreground, .termination] {
            #expect(throws: IgnoredRequest(.terminating)) { try machine.handle(request).get() }
        }
        _ = machine.settle(hasOpenGrants: false)
        #expect(machine.state == .terminated)
        #expect(throws: IgnoredRequest(.terminating)) { try machine.handle(.foreground).get() }
        #expect(machine.settle(hasOpenGrants: false) == [])
    }
}
