import Overtime
import OvertimeSchedulerTesting
import OvertimeSupport
import OvertimeTestSupport
import Testing

@_spi(ScheduleStore) @testable import OvertimeScheduler

/// The store-independent semantics (``SchedulerSemantics``) on the SQLite store and on the
/// in-memory schedule, on virtual time.
@Suite("Scheduler semantics on the SQLite store and in memory", .serialized, .timeLimit(.minutes(3)))
struct SchedulerSemanticsTests {
    final class Fixture: SchedulerSemanticsFixture, Sendable {
        let env: VirtualRuntime
        let folder = TemporaryDirectory("semantics")
        let store: SchedulerHarness.Store
        let schedule = InMemorySchedule()
        private let scheduler = Locked<Scheduler?>(nil)

        init(_ store: SchedulerHarness.Store) throws {
            self.store = store
            env = try VirtualRuntime(budget: .seconds(3600), lead: .seconds(5))
        }

        func makeScheduler(
            answer: @escaping @Sendable (ScheduledTask) -> Bool,
            afterCompletion: @escaping @Sendable (ScheduledTask) -> Void
        ) throws -> Scheduler {
            var configuration = SchedulerConfiguration(storePath: folder.path + "/schedule.db")
            if store == .inMemory { configuration.database = .inMemory(schedule) }
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

    /// One of ``SchedulerSemantics``' checks, named for the test's arguments.
    struct Check: Sendable, CustomStringConvertible {
        let description: String
        let run: @Sendable (Fixture) throws -> Void
    }

    static let checks: [Check] = [
        Check(
            description: "finishedWorkIsResubmittedUnderEveryPolicy",
            run: SchedulerSemantics.finishedWorkIsResubmittedUnderEveryPolicy),
        Check(
            description: "aCalendarRepetitionIsKeptAndRunsOnItsCalendar",
            run: SchedulerSemantics.aCalendarRepetitionIsKeptAndRunsOnItsCalendar),
        Check(
            description: "requestsAreFoundAndCancelledByTag", run: SchedulerSemantics.requestsAreFoundAndCancelledByTag),
        Check(
            description: "workInfoFollowsARequestAndCancellationsAreKept",
            run: SchedulerSemantics.workInfoFollowsARequestAndCancellationsAreKept),
        Check(
            description: "chainsHandOnOutputsAndPassOnFailuresAndCancellations",
            run: SchedulerSemantics.chainsHandOnOutputsAndPassOnFailuresAndCancellations),
        Check(
            description: "inputReachesTheRunAndItsOutputIsKept",
            run: SchedulerSemantics.inputReachesTheRunAndItsOutputIsKept),
        Check(description: "pendingWorkFollowsThePolicy", run: SchedulerSemantics.pendingWorkFollowsThePolicy),
        Check(
            description: "identifiersAreCheckedAgainstOneLimit",
            run: SchedulerSemantics.identifiersAreCheckedAgainstOneLimit),
        Check(
            description: "aOneShotSubmittedRightAfterItsHandlerCompletedRunsAgain",
            run: SchedulerSemantics.aOneShotSubmittedRightAfterItsHandlerCompletedRunsAgain),
    ]

    @Test(arguments: checks, [SchedulerHarness.Store.sqlite, .inMemory])
    func holds(_ check: Check, on store: SchedulerHarness.Store) async throws {
        try await onOwnThread { try check.run(Fixture(store)) }
    }
}
