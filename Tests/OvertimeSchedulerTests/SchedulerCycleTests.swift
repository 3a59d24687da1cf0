import OvertimeSupport
import OvertimeTestSupport
import Testing

@testable import Overtime
@_spi(ScheduleStore) @testable import OvertimeScheduler

/// What a scheduler's cycle reads from its store, counted on virtual time.
@Suite("Scheduler: what a cycle reads", .serialized, .timeLimit(.minutes(2)))
struct SchedulerCycleTests {
    /// A cycle that records an end and starts runs in every slot queues no second cycle:
    /// nothing could start in it, and it would only read the next due time again (on a
    /// fleet's store a round trip per cycle, a third of a busy worker's statements).
    @Test func aCycleThatFillsEverySlotReadsTheNextDueTimeOnce() async throws {
        try await onOwnThread {
            let (h, store) = try SchedulerHarness.instrumented(prefixes: ["job."]) {
                $0.maximumConcurrentRuns = 2
            }
            defer { h.finish() }
            h.script.withLock { $0 = { _ in .hang } }
            try h.current.start()
            _ = try h.current.submit(contentsOf: (1...4).map { ScheduledTaskRequest(identifier: "job.\($0)") })
            h.settle()
            #expect(h.attempts.all.map(\.identifier) == ["job.1", "job.2"])

            store.nextDueReads.withLock { $0 = 0 }
            let first = try #require(h.hanging.all.first)
            first.setTaskCompleted(success: true)
            h.settle()
            #expect(h.attempts.all.map(\.identifier) == ["job.1", "job.2", "job.3"], "the freed slot filled")
            #expect(store.nextDueReads.withLock { $0 } == 1, "one cycle: the end recorded, job.3 started")
        }
    }
}
