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

    /// A scheduler on a SQLite store whose hourly `job` has started and hangs.
    private func hourlyHangingJob() throws -> SchedulerHarness {
        let h = try SchedulerHarness(store: .sqlite)
        h.script.withLock { $0 = { _ in .hang } }
        try h.current.start()
        var request = ScheduledTaskRequest(identifier: "job")
        request.repetition = Repetition(every: .seconds(3600))
        try h.current.submit(request)
        h.settle()
        return h
    }

    /// An inspector beside the daemon (a dashboard's Running page) reads a run's progress
    /// from the store: the first report at once, later ones at most once a second with the
    /// latest winning, and none once the run has ended, nor beside the request's next run.
    @Test func anInspectorReadsTheLatestProgressAtMostASecondLateAndOnlyWhileItsRunRuns() async throws {
        try await onOwnThread {
            let h = try hourlyHangingJob()
            defer { h.finish() }
            let inspector = try await ScheduleDatabase.sqlite(path: h.path).inspector()
            defer { inspector.close() }
            func shown() async throws -> RunProgress? {
                try await inspector.request("job", now: h.now)?.running?.progress
            }
            let task = try #require(h.hanging.all.first)
            #expect(try await inspector.request("job", now: h.now)?.running != nil)
            #expect(try await shown() == nil, "nothing reported yet")

            task.setProgress(0.1, message: "segment 1 of 10")
            h.settle()
            #expect(try await shown() == RunProgress(fraction: 0.1, message: "segment 1 of 10"), "the first at once")
            for segment in 2...5 { task.setProgress(Double(segment) / 10, message: "segment \(segment) of 10") }
            h.settle()
            #expect(try await shown()?.fraction == 0.1, "within the second: the store keeps the first")
            h.advance(by: .milliseconds(999))
            #expect(try await shown()?.fraction == 0.1)
            h.advance(by: .milliseconds(1))
            #expect(try await shown() == RunProgress(fraction: 0.5, message: "segment 5 of 10"), "then the latest")
            h.advance(by: .seconds(5))
            task.setProgress(0.6)
            h.settle()
            #expect(try await shown() == RunProgress(fraction: 0.6), "a second after the last write: at once")

            task.setTaskCompleted(success: true)
            h.settle()
            #expect(try await inspector.request("job", now: h.now)?.running == nil)
            h.advance(by: .seconds(3600))
            let next = try #require(h.hanging.all.last)
            #expect(next !== task)
            #expect(try await inspector.request("job", now: h.now)?.running?.runID == next.runID)
            #expect(try await shown() == nil, "the last run's progress is not the new run's")
            next.setTaskCompleted(success: true)
            h.settle()
        }
    }
}
