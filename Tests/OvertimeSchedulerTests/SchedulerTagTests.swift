import Foundation
import OvertimeControlProtocol
import OvertimeSupport
import OvertimeTestSupport
import OvertimeTesting
import Testing

@testable import Overtime
@_spi(ScheduleStore) @testable import OvertimeScheduler

/// Tags group requests: found and cancelled together, kept by the store across restarts,
/// checked at submission; on virtual time against a real SQLite file.
@Suite("Scheduler tags", .serialized, .timeLimit(.minutes(2)))
struct SchedulerTagTests {
    private func later(_ identifier: String, _ tags: Set<String>, in h: SchedulerHarness) -> ScheduledTaskRequest {
        var request = ScheduledTaskRequest(identifier: identifier)
        request.earliestBegin = h.now + .seconds(3600)
        request.tags = tags
        return request
    }

    @Test func requestsAreFoundAndCancelledByTagAndKeepTheirTagsAcrossARestart() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(prefixes: ["report."])
            defer { h.finish() }
            try h.current.start()
            try h.current.submit(later("report.a", ["nightly", "eu"], in: h))
            try h.current.submit(later("report.b", ["night"], in: h))  // a tag inside another is another tag
            try h.current.submit(later("report.c", ["nightly"], in: h))
            try h.current.submit(later("report.d", [], in: h))
            var lookalike = later("report.e", ["other"], in: h)  // the tag's pattern in its input only
            lookalike.input = Array("x,nightly,y".utf8)
            try h.current.submit(lookalike)
            try h.open(prefixes: ["report."])  // the next process reads them back
            try h.current.start()
            #expect(h.current.pendingRequests(tag: "nightly").map(\.request.identifier) == ["report.a", "report.c"])
            #expect(h.current.pendingRequests(tag: "night").map(\.request.identifier) == ["report.b"])
            #expect(h.current.pendingRequests(tag: "eu").first?.request.tags == ["nightly", "eu"])
            #expect(h.current.pendingRequests(tag: "absent").isEmpty)

            let table = SchedulerTestControl.answer(h, "schedule", ["nightly"]) ?? ""
            #expect(
                table.contains("report.a") && table.contains("eu,nightly") && !table.contains("report.b"), "\(table)")
            #expect(
                SchedulerTestControl.answer(h, "cancel-tag", ["nightly"]) == "cancelled 2 requests tagged 'nightly'")
            #expect(h.current.pendingRequests().map(\.request.identifier) == ["report.b", "report.d", "report.e"])
            #expect(try h.current.cancel(tag: "nightly") == 0, "nothing left with it")
            h.advance(by: .seconds(7200))
            #expect(
                Set(h.attempts.all.map(\.identifier)) == ["report.b", "report.d", "report.e"],
                "cancelled ones never run")
        }
    }

    @Test func aRunInProgressOfATaggedRequestIsToldToStopWhenItsTagIsCancelled() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(prefixes: ["report."])
            defer { h.finish() }
            h.script.withLock { $0 = { _ in .hang } }
            try h.current.start()
            var request = ScheduledTaskRequest(identifier: "report.now")
            request.tags = ["batch"]
            try h.current.submit(request)
            h.advance(by: .seconds(1))
            let task = try #require(h.hanging.all.first)
            let stopped = Locked(false)
            task.expirationHandler = {
                stopped.withLock { $0 = true }
                task.setTaskCompleted(success: false)
            }
            #expect(try h.current.cancel(tag: "batch") == 1)
            h.advance(by: .seconds(1))
            #expect(stopped.withLock { $0 }, "its expiration handler was called")
            #expect(h.current.pendingRequests().isEmpty)
            h.advance(by: .seconds(3600))
            #expect(h.attempts.count == 1, "not retried: the request is gone")
        }
    }

    @Test func badTagsAreClearErrorsAndNothingIsSubmitted() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(prefixes: ["report."])
            defer { h.finish() }
            try h.current.start()
            let bad: [Set<String>] = [
                ["a,b"], [""], [String(repeating: "x", count: 65)], ["line\nbreak"], Set((0..<17).map { "t\($0)" }),
            ]
            for tags in bad {
                do {
                    try h.current.submit(later("report.bad", tags, in: h))
                    Issue.record("\(tags) was accepted")
                } catch let error as SchedulerError {
                    #expect(error.code == .invalidRequest && error.field == "tags", "\(error)")
                } catch {
                    Issue.record("\(error)")
                }
            }
            #expect(h.current.pendingRequests().isEmpty)
            #expect(throws: SchedulerError.self) { try h.current.cancel(tag: "a,b") }
            let fine = Set([String(repeating: "é", count: 32), "ünïcode tag", "with space"])
            try h.current.submit(later("report.fine", fine, in: h))
            #expect(h.current.pendingRequests(tag: "ünïcode tag").first?.request.tags == fine)
        }
    }
}
