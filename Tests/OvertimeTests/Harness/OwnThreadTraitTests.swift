// The test harness's own promise: a suite marked `.onOwnThread` keeps its blocking bodies
// off the threads every other test shares.
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
