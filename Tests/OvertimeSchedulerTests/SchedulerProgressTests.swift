import Foundation
import Overtime
import OvertimeSupport
import OvertimeTestSupport
import OvertimeTesting
import Testing

@_spi(ScheduleStore) @testable import OvertimeScheduler

/// A running handler's progress, as the schedule shows it.
@Suite("Scheduler run progress", .serialized, .timeLimit(.minutes(2)))
struct SchedulerProgressTests {
    @Test func aRunningHandlersProgressIsSeenInThePendingRequestsAndTheSchedule() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness()
            defer { h.finish() }
            h.script.withLock { $0 = { _ in .hang } }
            try h.current.start()
            try h.current.submit(ScheduledTaskRequest(identifier: "job"))
            h.settle()
            let task = try #require(h.hanging.all.first)
            #expect(h.current.pendingRequests().first?.progress == nil, "nothing reported yet")

            task.setProgress(0.5, message: "segment 3 of 6")
            let pending = try #require(h.current.pendingRequests().first)
            #expect(pending.progress == RunProgress(fraction: 0.5, message: "segment 3 of 6"))
            #expect(Scheduler.scheduleTable([pending]).contains("running (50 %: segment 3 of 6)"))

            task.setProgress(7)  // clamped
            #expect(task.progress?.fraction == 1 && task.progress?.message == nil)
            task.setProgress(.nan, message: "ignored")  // misuse: counted, the last report kept
            #expect(task.progress?.fraction == 1)
            #expect(h.env.logs.messages(at: .warning).contains { $0.message.contains("not a number") })
            task.setProgress(0.25, message: String(repeating: "é", count: 500))
            #expect(task.progress.map { $0.message!.utf8.count <= RunProgress.maximumMessageBytes } == true)

            task.setTaskCompleted(success: true)
            task.setProgress(0.9)  // after completion: nothing
            #expect(task.progress?.fraction == 0.25)
            h.settle()
            #expect(h.current.pendingRequests().isEmpty)
        }
    }
}
