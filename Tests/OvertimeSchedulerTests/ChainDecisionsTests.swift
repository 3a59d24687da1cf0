import Overtime
import Testing

@_spi(ScheduleStore) @testable import OvertimeScheduler

/// The rules of chains as transcripts: what a link becomes as its prerequisites conclude,
/// and how a prerequisite's stored state reads as an outcome.
@Suite("Chain decisions")
struct ChainDecisionsTests {
    private let link = ChainState(waitingOn: ["a", "b", "c"])

    @Test func aLinkWaitsUntilEveryPrerequisiteSucceededAndKeepsTheirOutputs() {
        var state = link
        let transcript: [([String: PrerequisiteOutcome], ChainAction)] = [
            ([:], .wait(link)),
            (["a": .succeeded(output: [1])], .wait(ChainState(waitingOn: ["b", "c"], handedOn: ["a": [1]]))),
            (["b": .succeeded(output: nil), "c": .pending], .wait(ChainState(waitingOn: ["c"], handedOn: ["a": [1]]))),
            (["c": .succeeded(output: [3])], .ready(ChainState(waitingOn: [], handedOn: ["a": [1], "c": [3]]))),
        ]
        for (outcomes, expected) in transcript {
            let action = ChainDecisions.decide(state, outcomes: outcomes)
            #expect(action == expected, "\(outcomes)")
            switch action {
            case .wait(let next), .ready(let next), .fail(let next), .cancel(let next): state = next
            }
        }
    }

    @Test func aFailureWinsOverACancellationAndNamesTheFirstInOrder() {
        let mixed: [String: PrerequisiteOutcome] = ["a": .cancelled, "b": .succeeded(output: [2]), "c": .failed]
        #expect(
            ChainDecisions.decide(link, outcomes: mixed) == .fail(ChainState(waitingOn: link.waitingOn, stoppedBy: "c"))
        )
        #expect(
            ChainDecisions.decide(link, outcomes: ["b": .cancelled, "c": .cancelled])
                == .cancel(ChainState(waitingOn: link.waitingOn, stoppedBy: "b")))
        #expect(
            ChainDecisions.decide(link, outcomes: ["a": .gone])
                == .fail(ChainState(waitingOn: link.waitingOn, stoppedBy: "a")), "gone: it can never succeed")
    }

    @Test func aPrerequisitesStoredStateReadsAsItsOutcome() {
        let now = WallClockInstant(secondsSinceEpoch: 1_800_000_000)
        func stored(finished: Bool = false, cancelled: Bool = false, stoppedBy: String? = nil, repeats: Bool = false)
            -> StoredRequest
        {
            var request = ScheduledTaskRequest(identifier: "p")
            if repeats { request.repetition = Repetition(every: .seconds(60)) }
            var stored = StoredRequest(
                request: request, plan: PlanState(anchor: now, isFinished: finished), submittedAt: now,
                currentRunID: nil, cancelledAt: cancelled ? now : nil)
            if let stoppedBy { stored.chain = ChainState(waitingOn: [stoppedBy], stoppedBy: stoppedBy) }
            return stored
        }
        func run(_ result: RunResult, _ output: [UInt8]? = nil) -> RunRecord {
            RunRecord(
                identifier: "p", runID: 1, attempt: 1, startedAt: now, endedAt: now, result: result, stopReason: nil,
                output: output)
        }
        #expect(ChainDecisions.outcome(of: nil, lastRun: nil) == .gone)
        #expect(ChainDecisions.outcome(of: stored(repeats: true), lastRun: nil) == .gone)
        #expect(ChainDecisions.outcome(of: stored(), lastRun: run(.failed)) == .pending, "a retry may still succeed")
        #expect(
            ChainDecisions.outcome(of: stored(finished: true), lastRun: run(.succeeded, [7])) == .succeeded(output: [7])
        )
        #expect(ChainDecisions.outcome(of: stored(finished: true), lastRun: run(.terminated)) == .failed)
        #expect(ChainDecisions.outcome(of: stored(finished: true, cancelled: true), lastRun: nil) == .cancelled)
        #expect(ChainDecisions.outcome(of: stored(finished: true, stoppedBy: "q"), lastRun: nil) == .failed)
        #expect(ChainDecisions.outcome(of: stored(finished: true), lastRun: nil) == .succeeded(output: nil))
    }

    @Test func aChainStateReadsBackFromItsBytesAndDamagedBytesAreRefused() {
        let state = ChainState(waitingOn: ["x", "ü\n"], handedOn: ["a": [0, 255], "b": []], stoppedBy: "x")
        #expect(ChainState(packed: state.packed) == state)
        #expect(ChainState(packed: ChainState(waitingOn: []).packed) == ChainState(waitingOn: []))
        for cut in [0, 1, 5, state.packed.count - 1] {
            #expect(ChainState(packed: state.packed.prefix(cut)) == nil, "cut at \(cut)")
        }
        #expect(ChainState(packed: [2] + state.packed.dropFirst()) == nil, "a newer version")
        #expect(ChainState(packed: state.packed + [0]) == nil, "bytes left over")
    }

    @Test func sqliteDetailsKeepALinksPrerequisitesAndStateBesideTheOtherColumns() throws {
        let now = WallClockInstant(secondsSinceEpoch: 1_800_000_000)
        var request = ScheduledTaskRequest(identifier: "link")
        request.tags = ["t"]
        request.input = [9, 8, 7]
        request.prerequisites = ["p,1", "q"]
        var stored = StoredRequest(request: request, plan: PlanState(anchor: now), submittedAt: now, currentRunID: nil)
        stored.chain = ChainState(waitingOn: ["q"], handedOn: ["p,1": [1, 2]])
        let packed = try #require(RequestDetails(RequestColumns(stored)).packed)
        #expect(packed[0] == 2, "no calendar, a chain section")
        let read = RequestDetails(packed: packed)
        #expect(read == RequestDetails(RequestColumns(stored)))
        #expect(read.input == [9, 8, 7] && read.tags == ",t,")

        var plain = request
        plain.prerequisites = []
        let old = try #require(
            RequestDetails(
                RequestColumns(
                    StoredRequest(request: plain, plan: PlanState(anchor: now), submittedAt: now, currentRunID: nil))
            ).packed)
        #expect(old[0] == 0 && RequestDetails(packed: old).input == [9, 8, 7], "without a chain: the layout as before")

        // A calendar that wakes the system: 1 | 4, which `plannedAheadOfClock` looks for.
        var waking = plain
        waking.repetition = Repetition(on: try CalendarSchedule("daily UTC"))
        waking.wakesSystem = true
        let calendar = try #require(
            RequestDetails(
                RequestColumns(
                    StoredRequest(request: waking, plan: PlanState(anchor: now), submittedAt: now, currentRunID: nil))
            ).packed)
        #expect(calendar[0] == 5 && RequestDetails(packed: calendar).wakesSystem)
    }
}
