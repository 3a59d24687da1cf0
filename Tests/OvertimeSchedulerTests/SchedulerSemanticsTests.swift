import Overtime
import OvertimeSupport
import OvertimeTestSupport
import Testing

@_spi(ScheduleStore) @testable import OvertimeScheduler

/// The store-independent semantics (``SchedulerSemantics``) on the SQLite store, on
/// virtual time.
@Suite("Scheduler semantics on the SQLite store", .serialized, .timeLimit(.minutes(3)))
struct SchedulerSemanticsTests {
    final class Fixture: SchedulerSemanticsFixture, Sendable {
        let env: VirtualRuntime
        let folder = TemporaryDirectory("semantics")
        private let scheduler = Locked<Scheduler?>(nil)

        init() throws {
            env = try VirtualRuntime(budget: .seconds(3600), lead: .seconds(5))
        }

        func makeScheduler(
            answer: @escaping @Sendable (ScheduledTask) -> Bool,
            afterCompletion: @escaping @Sendable (ScheduledTask) -> Void
        ) throws -> Scheduler {
            var configuration = SchedulerConfiguration(storePath: folder.path + "/schedule.db")
            configuration.startSpacing = .zero
            configuration.logger = env.logs.logger
            let made = try Scheduler(runtime: env.runtime, configuration: configuration)
            try made.register(prefix: "semantics.") { task in
                task.setTaskCompleted(success: answer(task))
                afterCompletion(task)
            }
            try made.start()
            made.waitUntilIdle()
            scheduler.withLock { $0 = made }
            return made
        }

        func until(_ condition: () throws -> Bool) rethrows -> Bool {
            guard let scheduler = scheduler.withLock({ $0 }) else { return try condition() }
            for _ in 0..<600 {
                scheduler.waitUntilIdle()
                if try condition() { return true }
                env.clock.advance(by: .seconds(1))
            }
            return try condition()
        }

        func finish() {
            scheduler.withLock { $0 }?.abandon()
            env.shutDown()
            folder.remove()
        }
    }

    @Test func finishedWorkIsResubmittedUnderEveryPolicy() async throws {
        try await onOwnThread { try SchedulerSemantics.finishedWorkIsResubmittedUnderEveryPolicy(Fixture()) }
    }

    @Test func aCalendarRepetitionIsKeptAndRunsOnItsCalendar() async throws {
        try await onOwnThread { try SchedulerSemantics.aCalendarRepetitionIsKeptAndRunsOnItsCalendar(Fixture()) }
    }

    @Test func requestsAreFoundAndCancelledByTag() async throws {
        try await onOwnThread { try SchedulerSemantics.requestsAreFoundAndCancelledByTag(Fixture()) }
    }

    @Test func workInfoFollowsARequestAndCancellationsAreKept() async throws {
        try await onOwnThread { try SchedulerSemantics.workInfoFollowsARequestAndCancellationsAreKept(Fixture()) }
    }

    @Test func chainsHandOnOutputsAndPassOnFailuresAndCancellations() async throws {
        try await onOwnThread { try SchedulerSemantics.chainsHandOnOutputsAndPassOnFailuresAndCancellations(Fixture()) }
    }

    @Test func inputReachesTheRunAndItsOutputIsKept() async throws {
        try await onOwnThread { try SchedulerSemantics.inputReachesTheRunAndItsOutputIsKept(Fixture()) }
    }

    @Test func pendingWorkFollowsThePolicy() async throws {
        try await onOwnThread { try SchedulerSemantics.pendingWorkFollowsThePolicy(Fixture()) }
    }

    @Test func identifiersAreCheckedAgainstOneLimit() async throws {
        try await onOwnThread { try SchedulerSemantics.identifiersAreCheckedAgainstOneLimit(Fixture()) }
    }

    @Test func aOneShotSubmittedRightAfterItsHandlerCompletedRunsAgain() async throws {
        try await onOwnThread {
            try SchedulerSemantics.aOneShotSubmittedRightAfterItsHandlerCompletedRunsAgain(Fixture())
        }
    }
}
