import Foundation
import OvertimeControlProtocol
import OvertimeSupport
import OvertimeTestSupport
import OvertimeTesting
import Testing

@testable import Overtime
@_spi(ScheduleStore) @testable import OvertimeScheduler

/// Retrying what failed for good: submitted again as it was, due now, attempts counted
/// afresh, its history kept; anything else refused with the reason; on virtual time
/// against a real SQLite file.
@Suite("Scheduler retries of what failed for good", .serialized, .timeLimit(.minutes(2)))
struct SchedulerRetryTests {
    @Test func aRequestThatFailedForGoodRunsAgainWithEveryAttemptAndItsHistoryKept() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(prefixes: ["r."])
            defer { h.finish() }
            let failing = Locked(true)
            h.script.withLock { $0 = { _ in failing.withLock { $0 } ? .fail : .succeed } }
            try h.current.start()
            var request = ScheduledTaskRequest(identifier: "r.report")
            request.retry.maximumAttempts = 2
            request.retry.initialDelay = .seconds(30)
            request.tags = ["nightly"]
            request.input = Array("input".utf8)
            try h.current.submit(request)
            h.advance(by: .seconds(120))
            #expect(try h.current.workInfo("r.report")?.state == .failed)
            #expect(h.attempts.all.map(\.attempt) == [1, 2])

            failing.withLock { $0 = false }
            #expect(SchedulerTestControl.answer(h, "retry", ["r.report"]) == "submitted 'r.report' again: due now")
            h.advance(by: .seconds(1))
            let info = try #require(try h.current.workInfo("r.report"))
            #expect(info.state == .succeeded)
            #expect(info.request.tags == ["nightly"] && info.request.input == Array("input".utf8), "as it was")
            let attempts = h.attempts.all
            #expect(attempts.count == 3 && attempts[2].attempt == 1, "attempts counted afresh")
            #expect(attempts[2].runID != attempts[0].runID, "a new run")
            let history = try h.current.history("r.report")
            #expect(history.map(\.result) == [.succeeded, .failed, .failed], "the failures stay in its history")
        }
    }

    @Test func onlyWhatFailedForGoodIsRetriedAndTheRestIsRefusedSayingWhy() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(prefixes: ["r."])
            defer { h.finish() }
            h.script.withLock {
                $0 = { attempt in
                    attempt.identifier == "r.hang" ? .hang : attempt.identifier == "r.bad" ? .fail : .succeed
                }
            }
            try h.current.start()
            func oneShot(_ identifier: String, _ change: (inout ScheduledTaskRequest) -> Void = { _ in }) throws {
                var request = ScheduledTaskRequest(identifier: identifier)
                request.retry.maximumAttempts = 1
                change(&request)
                try h.current.submit(request)
            }
            try oneShot("r.done")
            try oneShot("r.bad")
            try oneShot("r.hang")
            try oneShot("r.later") { $0.earliestBegin = h.now + .seconds(3600) }
            try oneShot("r.gone") { $0.earliestBegin = h.now + .seconds(3600) }
            try oneShot("r.link") { $0.prerequisites = ["r.bad"] }
            try h.current.cancel("r.gone")
            h.advance(by: .seconds(5))
            #expect(try h.current.workInfo("r.link")?.state == .failed, "stopped by its prerequisite")
            for (identifier, reason) in [
                ("r.done", "succeeded"), ("r.hang", "is running"), ("r.later", "is pending"),
                ("r.gone", "was cancelled"), ("r.link", "was stopped by its prerequisite 'r.bad'"),
            ] {
                do {
                    try h.current.retry(identifier)
                    Issue.record("\(identifier) was retried")
                } catch let error as SchedulerError {
                    #expect(error.code == .invalidRequest && error.message.contains(reason), "\(identifier): \(error)")
                }
            }
            #expect(throws: SchedulerError.self) { try h.current.retry("r.absent") }
            #expect(SchedulerTestControl.answer(h, "retry", ["r.absent"])?.contains("no request 'r.absent'") == true)
            let before = h.attempts.all.count
            try h.current.retry("r.bad")
            h.advance(by: .seconds(1))
            #expect(h.attempts.all.count == before + 1, "r.bad ran again (and failed again)")
            #expect(try h.current.workInfo("r.bad")?.state == .failed)
        }
    }
}
