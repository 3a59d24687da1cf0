import Foundation
import NIOConcurrencyHelpers
import Overtime
import OvertimeScheduler
import PostgresTestServer
import Testing

/// The store-independent semantics (``SchedulerSemantics``) on the PostgreSQL store, on
/// real time: the database's clock decides what is due.
@Suite("Scheduler semantics on the PostgreSQL store", .serialized, .blocking)
struct PostgresSemanticsTests {
    final class Fixture: SchedulerSemanticsFixture, Sendable {
        let server: PostgresServer
        private let made = NIOLockedValueBox<[Scheduler]>([])

        init() throws {
            server = try PostgresServer()
        }

        func makeScheduler(
            answer: @escaping @Sendable (ScheduledTask) -> Bool,
            afterCompletion: @escaping @Sendable (ScheduledTask) -> Void
        ) throws -> Scheduler {
            let scheduler = try Scheduler(
                runtime: try PostgresSchedulerTests.runtime(),
                configuration: PostgresSchedulerTests.configuration(server))
            try scheduler.register(prefix: "semantics.") { task in
                task.setTaskCompleted(success: answer(task))
                afterCompletion(task)
            }
            try scheduler.start()
            made.withLockedValue { $0.append(scheduler) }
            return scheduler
        }

        func until(_ condition: () throws -> Bool) rethrows -> Bool {
            try PostgresSchedulerTests.eventually(60, condition)
        }

        func finish() {
            for scheduler in made.withLockedValue({ $0 }) { scheduler.runtime.requestTermination() }
            server.stop()
        }
    }

    @Test func finishedWorkIsResubmittedUnderEveryPolicy() throws {
        try SchedulerSemantics.finishedWorkIsResubmittedUnderEveryPolicy(Fixture())
    }

    @Test func aCalendarRepetitionIsKeptAndRunsOnItsCalendar() throws {
        try SchedulerSemantics.aCalendarRepetitionIsKeptAndRunsOnItsCalendar(Fixture())
    }

    @Test func requestsAreFoundAndCancelledByTag() throws {
        try SchedulerSemantics.requestsAreFoundAndCancelledByTag(Fixture())
    }

    @Test func workInfoFollowsARequestAndCancellationsAreKept() throws {
        try SchedulerSemantics.workInfoFollowsARequestAndCancellationsAreKept(Fixture())
    }

    @Test func chainsHandOnOutputsAndPassOnFailuresAndCancellations() throws {
        try SchedulerSemantics.chainsHandOnOutputsAndPassOnFailuresAndCancellations(Fixture())
    }

    @Test func inputReachesTheRunAndItsOutputIsKept() throws {
        try SchedulerSemantics.inputReachesTheRunAndItsOutputIsKept(Fixture())
    }

    @Test func pendingWorkFollowsThePolicy() throws {
        try SchedulerSemantics.pendingWorkFollowsThePolicy(Fixture())
    }

    @Test func identifiersAreCheckedAgainstOneLimit() throws {
        try SchedulerSemantics.identifiersAreCheckedAgainstOneLimit(Fixture())
    }

    @Test func aOneShotSubmittedRightAfterItsHandlerCompletedRunsAgain() throws {
        try SchedulerSemantics.aOneShotSubmittedRightAfterItsHandlerCompletedRunsAgain(Fixture())
    }
}
