import Foundation
import Overtime
import OvertimeSupport
import OvertimeTestSupport
import OvertimeTesting
import Testing

@_spi(ScheduleStore) @testable import OvertimeScheduler

/// Chains: links due once their prerequisites succeeded, with their outputs; failures and
/// cancellations passed on; on virtual time against a real SQLite file.
@Suite("Scheduler chains", .serialized, .timeLimit(.minutes(2)))
struct SchedulerChainTests {
    /// A harness whose handler records each run's prerequisite outputs and sets its own
    /// output to theirs joined (sorted by identifier) plus its identifier.
    private final class Chain: Sendable {
        let h: SchedulerHarness
        let seen = Recorder<(String, [String: [UInt8]])>()
        let failing = Locked<Set<String>>([])

        init() throws {
            let seen = seen
            let failing = failing
            h = try SchedulerHarness(prefixes: ["link."])
            try h.open(prefixes: [])
            try h.current.register(prefix: "link.") { task in
                seen.append((task.identifier, task.prerequisiteOutputs))
                let handed = task.prerequisiteOutputs.sorted { $0.key < $1.key }.map {
                    String(decoding: $0.value, as: UTF8.self)
                }
                try? task.setOutput(Array((handed + [task.identifier]).joined(separator: "|").utf8))
                task.setTaskCompleted(success: !failing.withLock { $0.contains(task.identifier) })
            }
            try h.current.start()
        }

        func link(_ name: String, after prerequisites: Set<String> = [], attempts: Int = 1) -> ScheduledTaskRequest {
            var request = ScheduledTaskRequest(identifier: "link.\(name)")
            request.prerequisites = Set(prerequisites.map { "link.\($0)" })
            request.retry.maximumAttempts = attempts
            return request
        }

        func state(_ name: String) throws -> WorkInfo.State? { try h.current.workInfo("link.\(name)")?.state }
        var ran: [String] { seen.all.map(\.0) }
    }

    @Test func linksRunInOrderEachWithItsPrerequisitesOutputsAndAFanInWaitsForAll() async throws {
        try await onOwnThread {
            let c = try Chain()
            defer { c.h.finish() }
            var first = c.link("a")
            first.earliestBegin = c.h.now + .seconds(60)
            try c.h.current.submit(contentsOf: [
                first, c.link("b", after: ["a"]), c.link("c", after: ["b"]), c.link("d", after: ["a", "c"]),
            ])
            let blocked = try #require(try c.h.current.workInfo("link.b"))
            #expect(
                blocked.state == .blocked && blocked.waitingFor == .prerequisite("link.a") && blocked.nextRun == nil)
            #expect(try c.h.current.workInfo("link.d")?.waitingFor == .prerequisite("link.a"))
            #expect(SchedulerTestControl.answer(c.h, "work", ["link.c"])?.contains("prerequisite 'link.b'") == true)
            #expect(throws: SchedulerError.self) { try c.h.current.runNow("link.b") }
            c.h.advance(by: .seconds(59))
            #expect(c.ran.isEmpty)
            c.h.advance(by: .seconds(1))
            c.h.settle()
            #expect(c.ran == ["link.a", "link.b", "link.c", "link.d"], "each after its prerequisites, at once")
            let handed = Dictionary(uniqueKeysWithValues: c.seen.all.map { ($0.0, $0.1) })
            #expect(handed["link.a"] == [:])
            #expect(handed["link.b"] == ["link.a": Array("link.a".utf8)])
            #expect(handed["link.c"] == ["link.b": Array("link.a|link.b".utf8)])
            #expect(
                handed["link.d"] == ["link.a": Array("link.a".utf8), "link.c": Array("link.a|link.b|link.c".utf8)],
                "a fan-in gets every prerequisite's output")
            for name in ["a", "b", "c", "d"] { #expect(try c.state(name) == .succeeded) }
            #expect(try c.h.current.history("link.d").first?.output == Array("link.a|link.a|link.b|link.c|link.d".utf8))
            #expect(try c.h.current.workInfo("link.d")?.prerequisiteOutputs.count == 2)

            // Submitted after its prerequisite succeeded: due at once, with its output.
            try c.h.current.submit(c.link("late", after: ["c"]))
            c.h.settle()
            #expect(c.seen.all.last.map { $0.0 } == "link.late")
            #expect(c.seen.all.last?.1 == ["link.c": Array("link.a|link.b|link.c".utf8)])
        }
    }

    @Test func aFailedPrerequisiteFailsWhatWaitsOnItAndACancelledOneCancelsIt() async throws {
        try await onOwnThread {
            let c = try Chain()
            defer { c.h.finish() }
            c.failing.withLock { $0 = ["link.a"] }
            try c.h.current.submit(contentsOf: [
                c.link("a", attempts: 2), c.link("b", after: ["a"]), c.link("c", after: ["b"]),
                c.link("x", after: ["c"]),
            ])
            c.h.advance(by: .seconds(3600))
            #expect(c.ran == ["link.a", "link.a"], "only the failing link ran, its two attempts")
            #expect(try c.state("a") == .failed)
            for (name, stopper) in [("b", "link.a"), ("c", "link.b"), ("x", "link.c")] {
                let info = try #require(try c.h.current.workInfo("link.\(name)"))
                #expect(info.state == .failed && info.stoppedBy == stopper, "\(name): \(info.state)")
                #expect(try c.h.current.history("link.\(name)").isEmpty, "\(name) never ran")
            }
            #expect(SchedulerTestControl.answer(c.h, "work", ["link.b"])?.contains("stopped by") == true)
            // Waiting on one that failed already: failed at once.
            try c.h.current.submit(c.link("after-failure", after: ["a"]))
            #expect(try c.state("after-failure") == .failed)

            var later = c.link("p")
            later.earliestBegin = c.h.now + .seconds(3600)
            try c.h.current.submit(
                contentsOf: [later, c.link("q", after: ["p"]), c.link("r", after: ["q", "a2"])].dropLast())
            try c.h.current.cancel("link.p")
            let q = try c.h.current.workInfo("link.q")
            #expect(q?.state == .cancelled, "\(String(describing: q))")
            #expect(try c.h.current.workInfo("link.q")?.stoppedBy == "link.p")
            #expect(try c.h.current.workInfo("link.q")?.cancelledAt == c.h.now)
            c.h.advance(by: .seconds(7200))
            #expect(!c.ran.contains("link.p") && !c.ran.contains("link.q"))
            #expect(try c.h.current.pendingRequestCount() == 0)
        }
    }

    @Test func badChainsAreClearErrorsAndNothingIsSubmitted() async throws {
        try await onOwnThread {
            let c = try Chain()
            defer { c.h.finish() }
            var later = c.link("p")
            later.earliestBegin = c.h.now + .seconds(3600)
            try c.h.current.submit(contentsOf: [later, c.link("q", after: ["p"])])
            var repeating = c.link("tick")
            repeating.repetition = Repetition(every: .seconds(60))
            try c.h.current.submit(repeating)

            func refusal(_ requests: [ScheduledTaskRequest], policy: ExistingRequestPolicy = .keep) -> String? {
                do {
                    try c.h.current.submit(contentsOf: requests, ifExists: policy)
                    return nil
                } catch {
                    return error.field == "prerequisites" && error.code == .invalidRequest ? error.message : "\(error)"
                }
            }
            #expect(refusal([c.link("r", after: ["nowhere"])])?.contains("'link.nowhere' is not submitted") == true)
            #expect(refusal([c.link("r", after: ["r"])])?.contains("itself") == true)
            #expect(refusal([c.link("r", after: ["tick"])])?.contains("repeats") == true)
            var repeatingLink = c.link("r", after: ["p"])
            repeatingLink.repetition = Repetition(every: .seconds(60))
            #expect(refusal([repeatingLink])?.contains("one-shot") == true)
            var local = c.link("r", after: ["p"])
            local.scope = .perInstance
            #expect(refusal([local])?.contains("shared scope") == true)
            var many = c.link("r")
            many.prerequisites = Set((0...16).map { "link.\($0)" })
            #expect(refusal([many])?.contains("at most 16") == true)
            // p replaced to wait on q, which waits on p: round.
            #expect(refusal([c.link("p", after: ["q"])], policy: .replace)?.contains("cannot go round") == true)
            #expect(refusal([c.link("s", after: ["t"]), c.link("t", after: ["s"])])?.contains("not submitted") == true)
            #expect(
                c.h.current.pendingRequests().map(\.request.identifier).sorted() == [
                    "link.p", "link.q", "link.tick",
                ],
                "nothing of the refused batches was submitted")
            #expect(try c.h.current.workInfo("link.q")?.waitingFor == .prerequisite("link.p"), "p left as it was")
        }
    }

    /// The process ended between a prerequisite's end and its link's update: the link waits
    /// on a prerequisite that has finished. The next start decides it (and runs it, with
    /// the output), once.
    @Test func aLinkLeftWaitingOnAFinishedPrerequisiteIsDecidedAtTheNextStart() async throws {
        try await onOwnThread {
            // What the ended process left, written to its store before any scheduler starts.
            let h = try SchedulerHarness(prefixes: ["link."])
            defer { h.finish() }
            let now = h.now
            func link(_ name: String, after: String?) -> ScheduledTaskRequest {
                var request = ScheduledTaskRequest(identifier: "link.\(name)")
                request.prerequisites = after.map { ["link.\($0)"] } ?? []
                return request
            }
            let first = StoredRequest(
                request: link("a", after: nil), plan: PlanState(anchor: now, isFinished: true), submittedAt: now,
                currentRunID: 1)
            let record = RunRecord(
                identifier: "link.a", runID: 1, attempt: 1, startedAt: now, endedAt: now, result: .succeeded,
                stopReason: nil, output: Array("handed".utf8))
            var second = StoredRequest(
                request: link("b", after: "a"), plan: PlanState(anchor: now), submittedAt: now, currentRunID: nil)
            second.chain = ChainState(waitingOn: ["link.a"])
            var third = StoredRequest(
                request: link("c", after: "b"), plan: PlanState(anchor: now), submittedAt: now, currentRunID: nil)
            third.chain = ChainState(waitingOn: ["link.b"])
            var batch = ScheduleBatch()
            batch.writes = [.save(first), .save(second), .save(third)]
            batch.ends = [RunEnd(record: record, plan: first, scope: .shared)]
            _ = try await h.current.store.commit(batch, lastRunID: 1)

            try h.open(prefixes: [])
            let seen = Recorder<(String, [String: [UInt8]])>()
            try h.current.register(prefix: "link.") { task in
                seen.append((task.identifier, task.prerequisiteOutputs))
                task.setTaskCompleted(success: true)
            }
            try h.current.start()
            h.settle()
            #expect(seen.all.map(\.0) == ["link.b", "link.c"], "decided at the start, each once")
            #expect(seen.all.first?.1 == ["link.a": Array("handed".utf8)])
        }
    }
}
