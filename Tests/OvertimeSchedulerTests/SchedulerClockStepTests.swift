import Overtime
import OvertimeSchedulerTesting
import OvertimeTestSupport
import OvertimeTesting
import Testing

@_spi(ScheduleStore) @testable import OvertimeScheduler

/// Waits that stand for a length of time (a retry's backoff, a one-shot due on submit) do
/// not grow or shrink with a step of the wall clock, whether the step happens while the
/// scheduler runs or while the process is not running.
@Suite("Scheduler waits across wall-clock steps", .serialized, .timeLimit(.minutes(3)))
struct SchedulerClockStepTests {
    private static let threeHoursBack = Duration.seconds(-3 * 3600)

    private func retrying(after delay: Duration) -> ScheduledTaskRequest {
        var request = ScheduledTaskRequest(identifier: "job")
        request.retry.initialDelay = delay
        request.retry.maximumAttempts = 5
        return request
    }

    /// A 30 s retry, 10 s into its wait when the clock goes back or forward three hours,
    /// runs 20 s later either way.
    @Test(arguments: [-3 * 3600, 3 * 3600])
    func aRetryKeepsWhatWasLeftOfItsBackoff(stepSeconds: Int) async throws {
        try await onOwnThread {
            let h = try SchedulerHarness()
            defer { h.finish() }
            h.script.withLock { $0 = { attempt in attempt.attempt == 1 ? .fail : .succeed } }
            try h.current.start()
            try h.current.submit(retrying(after: .seconds(30)))
            h.settle()
            #expect(h.attempts.count == 1)
            h.advance(by: .seconds(10))
            h.clock.stepWallClock(by: .seconds(stepSeconds))
            h.settle()
            let stepped = h.now
            h.advance(by: .seconds(19))
            #expect(h.attempts.count == 1, "never before its backoff is over")
            h.advance(by: .seconds(1))
            #expect(h.attempts.count == 2, "the retry came after the 30 s it was owed")
            #expect(h.attempts.all.last?.at == stepped + .seconds(20))
        }
    }

    /// A one-shot due now that waits for the network runs when the network returns, though
    /// the clock went back three hours meanwhile.
    @Test func aDueOneShotWaitingForTheNetworkRunsWhenItReturnsAfterAStepBack() async throws {
        try await onOwnThread {
            let network = ManualConditionSource(SystemConditions(networkAvailable: false))
            let h = try SchedulerHarness(configure: { $0.conditions = network })
            defer { h.finish() }
            try h.current.start()
            var request = ScheduledTaskRequest(identifier: "job")
            request.requirements = [.network]
            try h.current.submit(request)
            h.advance(by: .seconds(60))
            #expect(h.attempts.count == 0)
            h.clock.stepWallClock(by: Self.threeHoursBack)
            h.settle()
            #expect(h.current.pendingRequests().first?.waitingFor == .requirement(.network))
            network.update { $0.networkAvailable = true }
            h.settle()
            #expect(h.attempts.all.map(\.at) == [h.now], "ran the moment the network came back")
        }
    }

    /// A one-shot submitted due now waits for a free slot; the clock goes back three hours
    /// meanwhile; it starts when the slot frees, not three hours later.
    @Test func aDueOneShotIsStillDueAfterAStepBack() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(identifiers: ["long", "job"]) {
                $0.maximumConcurrentRuns = 1
                $0.startSpacing = .milliseconds(500)
            }
            defer { h.finish() }
            h.script.withLock { $0 = { attempt in attempt.identifier == "long" ? .hang : .succeed } }
            try h.current.start()
            try h.current.submit(ScheduledTaskRequest(identifier: "long"))
            h.settle()
            try h.current.submit(ScheduledTaskRequest(identifier: "job"))
            h.advance(by: .seconds(60))
            #expect(h.attempts.all.map(\.identifier) == ["long"])
            h.clock.stepWallClock(by: Self.threeHoursBack)
            h.settle()
            h.hanging.all.first?.setTaskCompleted(success: true)
            h.settle()
            let freed = h.now
            h.advance(by: .seconds(1))
            #expect(h.attempts.all.map(\.identifier) == ["long", "job"], "due still")
            #expect(h.attempts.all.last?.at == freed)
        }
    }

    /// The clock goes back three hours while the process is not running: at the next start
    /// a 30 s retry waits no longer than 30 s, a one-shot with a 60 s random delay no longer
    /// than 60 s.
    @Test func aStepBackWhileStoppedHoldsNoWaitLongerThanItsLength() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(identifiers: ["job", "spread"])
            defer { h.finish() }
            h.script.withLock {
                $0 = { attempt in attempt.identifier == "job" && attempt.attempt == 1 ? .fail : .succeed }
            }
            try h.current.start()
            try h.current.submit(retrying(after: .seconds(30)))
            var spread = ScheduledTaskRequest(identifier: "spread")
            spread.randomizedDelay = .seconds(60)
            try h.current.submit(spread)
            h.settle()
            #expect(h.attempts.all.first?.identifier == "job")
            h.clock.stepWallClock(by: Self.threeHoursBack)
            try h.open(identifiers: ["job", "spread"])  // the previous process ends first
            try h.current.start()
            h.advance(by: .seconds(61))
            #expect(h.current.pendingRequests().isEmpty, "nothing waits for the size of the step")
            #expect(h.attempts.all.filter { $0.identifier == "job" }.count == 2)
        }
    }
}
