import Foundation
import OvertimeSupport
import OvertimeTestSupport
import OvertimeTesting
import Testing

@testable import Overtime
@_spi(ScheduleStore) @testable import OvertimeScheduler

/// What operators do to many requests at once through the control commands (`run-tag`,
/// `retry-failed`, `cancel-tag`), and the record of who did what that the scheduler keeps in
/// its store (`actions`); on virtual time, in memory and in a real SQLite file.
@Suite("Scheduler operator actions", .serialized, .timeLimit(.minutes(2)))
struct SchedulerOperatorActionsTests {
    private func oneShot(_ identifier: String, tags: Set<String>, in h: SchedulerHarness) -> ScheduledTaskRequest {
        var request = ScheduledTaskRequest(identifier: identifier)
        request.tags = tags
        request.retry.maximumAttempts = 1
        return request
    }

    private func answer(_ h: SchedulerHarness, _ command: String, _ arguments: [String]) -> String {
        SchedulerTestControl.answer(h, command, arguments) ?? "no answer"
    }

    @Test(arguments: [SchedulerHarness.Store.inMemory, .sqlite])
    func whatFailedForGoodIsRetriedByTagOrPrefixAndEachActionIsRecordedWithWhoDidIt(
        _ store: SchedulerHarness.Store
    ) async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(prefixes: ["report.", "other."], store: store)
            defer { h.finish() }
            h.script.withLock { $0 = { $0.identifier == "report.d" ? .succeed : .fail } }
            try h.current.start()
            try h.current.submit(oneShot("report.a", tags: ["t"], in: h))
            try h.current.submit(oneShot("report.b", tags: ["t"], in: h))
            try h.current.submit(oneShot("report.c", tags: [], in: h))
            try h.current.submit(oneShot("report.d", tags: ["t"], in: h))  // succeeds: not retried
            try h.current.submit(oneShot("other.x", tags: ["t"], in: h))
            var later = oneShot("report.later", tags: ["t"], in: h)  // pending: not retried
            later.earliestBegin = h.now + .seconds(3600)
            try h.current.submit(later)
            h.advance(by: .seconds(1))
            #expect(h.attempts.count == 5)

            #expect(
                answer(h, "retry-failed", ["tag=t", "prefix=report.", "by=alice"])
                    == "submitted again 2 requests that failed for good (tag t, prefix report.): due now")
            h.advance(by: .seconds(1))
            #expect(h.attempts.all.suffix(2).map(\.identifier).sorted() == ["report.a", "report.b"])
            #expect(
                answer(h, "retry-failed", ["by=bob"])
                    == "submitted again 4 requests that failed for good: due now", "every one, with no filter")
            h.advance(by: .seconds(1))
            #expect(h.attempts.count == 11)
            // A tag alone: those tagged, whatever their identifiers (not report.c, untagged,
            // nor report.d, which succeeded).
            #expect(
                answer(h, "retry-failed", ["tag=t", "by=carol"])
                    == "submitted again 3 requests that failed for good (tag t): due now")
            h.advance(by: .seconds(1))
            #expect(h.attempts.all.suffix(3).map(\.identifier).sorted() == ["other.x", "report.a", "report.b"])
            #expect(answer(h, "retry", ["other.x"]) == "submitted 'other.x' again: due now")

            let actions = answer(h, "actions", [])
            let lines = actions.split(separator: "\n").map(String.init)
            #expect(lines.count == 5, "a header and four actions: \(actions)")
            #expect(
                lines[1].contains("the control socket") && lines[1].contains("retry") && lines[1].contains("other.x"))
            #expect(lines[2].contains("carol") && lines[2].contains("tag t") && lines[2].contains(" 3 "))
            #expect(lines[3].contains("bob") && lines[3].contains("retry-failed") && lines[3].contains("every request"))
            #expect(
                lines[4].contains("alice") && lines[4].contains("tag t, prefix report.") && lines[4].contains(" 2 "))

            // Kept in the store: the next process reads them.
            try h.open(prefixes: ["report.", "other."])
            try h.current.start()
            #expect(answer(h, "actions", ["1"]).split(separator: "\n").count == 2, "the newest one")
            #expect(answer(h, "actions", []) == actions)
        }
    }

    @Test func aTagIsRunNowOrCancelledSayingWhatWasPassedOver() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(prefixes: ["batch."])
            defer { h.finish() }
            h.script.withLock { $0 = { _ in .hang } }
            try h.current.start()
            for name in ["batch.a", "batch.b"] {
                var request = oneShot(name, tags: ["n"], in: h)
                request.earliestBegin = h.now + .seconds(3600)
                try h.current.submit(request)
            }
            var link = oneShot("batch.link", tags: ["n"], in: h)
            link.prerequisites = ["batch.a"]
            try h.current.submit(link)
            #expect(
                answer(h, "run-tag", ["n", "by=carol"])
                    == "started 2 runs of requests tagged 'n'; passed over 1: 'batch.link' waits on its prerequisite"
                    + " 'batch.a'")
            h.settle()
            #expect(h.attempts.all.map(\.identifier).sorted() == ["batch.a", "batch.b"], "started at once")
            #expect(
                answer(h, "run-tag", ["n"])
                    == "started 0 runs of requests tagged 'n'; passed over 3: 'batch.a' is running; 'batch.b' is"
                    + " running; 'batch.link' waits on its prerequisite 'batch.a'")
            #expect(answer(h, "cancel-tag", ["n", "by=dave"]) == "cancelled 3 requests tagged 'n'")
            let actions = answer(h, "actions", [])
            #expect(
                actions.contains("dave") && actions.contains("cancel-tag") && actions.contains("carol"), "\(actions)")
            #expect(answer(h, "run-tag", ["absent"]) == "started 0 runs of requests tagged 'absent'")
        }
    }

    @Test func badArgumentsAreClearErrorsAndChangeNothing() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(prefixes: ["report."])
            defer { h.finish() }
            h.script.withLock { $0 = { _ in .fail } }
            try h.current.start()
            try h.current.submit(oneShot("report.a", tags: ["t"], in: h))
            h.advance(by: .seconds(1))
            let refusals: [(String, [String], String)] = [
                ("retry-failed", ["colour=red"], "unknown argument 'colour=red'"),
                ("retry-failed", ["tag"], "unknown argument 'tag'"),
                ("retry-failed", ["tag=a", "tag=b"], "'tag' given twice"),
                ("retry-failed", ["tag=a,b"], "tag"),
                ("retry-failed", ["by="], "by: a name of 1 to 256 bytes"),
                ("retry-failed", ["by=\(String(repeating: "x", count: 257))"], "by: a name of 1 to 256 bytes"),
                ("retry", ["report.a", "by=line\\nbreak"], "by: a name"),
                ("run-tag", [], "usage: run-tag TAG [by=NAME]"),
                ("cancel-tag", ["t", "extra"], "unknown argument 'extra'"),
            ]
            for (command, arguments, expected) in refusals {
                let said = answer(h, command, arguments)
                #expect(said.contains(expected), "\(command) \(arguments): \(said)")
            }
            #expect(answer(h, "actions", []) == "no actions recorded")
            #expect(h.attempts.count == 1, "nothing retried")
        }
    }
}
