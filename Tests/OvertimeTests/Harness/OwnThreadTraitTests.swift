// The test harness's own promise: a suite marked `.onOwnThread` keeps its blocking bodies
// off the threads every other test shares.
import Foundation
import OvertimeTestSupport
import Testing

@Suite("Blocking test bodies run on threads of their own", .onOwnThread)
struct OwnThreadTraitTests {
    @Test func aSynchronousBodyRunsOnAThreadOfItsOwn() {
        #expect(runsOnOwnThread())
    }

    @Test(arguments: [1, 2, 3])
    func eachCaseOfAParameterizedTestDoesToo(case: Int) async throws {
        #expect(runsOnOwnThread(), "case \(`case`)")
        try await Task.sleep(for: .milliseconds(1))
        #expect(runsOnOwnThread(), "case \(`case`), after a suspension")
    }
}

@Suite("Unmarked test bodies run on the shared threads")
struct SharedThreadTests {
    @Test func anUnmarkedBodyDoesNot() {
        #expect(!runsOnOwnThread())
    }
}

@Suite("Briefly blocking test bodies run on threads of their own too", .blocksBriefly)
struct BlocksBrieflyTraitTests {
    @Test func aSynchronousBodyRunsOnAThreadOfItsOwn() {
        #expect(runsOnOwnThread())
    }

    @Test(arguments: [1, 2])
    func eachCaseRunsOnAThreadOfItsOwnAcrossASuspension(case: Int) async throws {
        try await Task.sleep(for: .milliseconds(1))
        #expect(runsOnOwnThread(), "case \(`case`), after a suspension")
    }
}

/// `.onOwnThread(runningAtMost:)` limits the body, not the test: Swift Testing's `.timeLimit`
/// counts from the test's start, and a marked test first waits for one of the slots shared by
/// every marked test (in busy run 119, 20 tests of milliseconds ran out of their three minutes
/// there). Each test here has a gate of its own in place of those slots.
@Suite("A marked test's time limit counts its body, not its wait for a slot")
struct RunningLimitTests {
    @Test func theWaitForASlotDoesNotCount() async throws {
        let gate = AsyncGate(width: 1)
        await gate.enter(first: false)
        let holder = taskOnOwnThread {
            usleep(1_500_000)
            gate.leave()
        }
        // Waits 1.5 s for the slot, then runs at once (on a thread of its own): within a limit of 1 s.
        try await runAsMarkedTestCase(through: gate, runningAtMost: .seconds(1)) { #expect(runsOnOwnThread()) }
        try await holder.value
    }

    @Test func aBodyThatRanPastItsLimitFailsEvenWhenItEnds() async throws {
        try await withKnownIssue {
            try await runAsMarkedTestCase(through: AsyncGate(width: 1), runningAtMost: .milliseconds(100)) {
                usleep(400_000)
            }
        } matching: {
            "\($0)".contains("past its limit")
        }
    }

    @Test func aBodyStillRunningAtItsLimitIsCancelled() async throws {
        let started = ContinuousClock.now
        try await withKnownIssue {
            try await runAsMarkedTestCase(through: AsyncGate(width: 1), runningAtMost: .milliseconds(100)) {
                try await Task.sleep(for: .seconds(600))
            }
        } matching: {
            "\($0)".contains("past its limit")
        }
        #expect(ContinuousClock.now - started < .seconds(600))
    }
}
