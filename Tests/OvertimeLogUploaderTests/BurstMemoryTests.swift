import Testing

@testable import OvertimeLogUploader

/// When a line reader hands a burst's memory back: a transcript of reads and quiet moments.
struct BurstMemoryPolicyTests {
    private func quiet(_ policy: inout BurstMemoryPolicy) -> Bool { policy.quiet() }

    @Test func aBurstReturnsMemoryAtItsFirstQuietMomentAndATrickleNever() {
        var policy = BurstMemoryPolicy(threshold: 65_536)
        // A trickle: lines now and then, quiet between them, never a return.
        for _ in 0..<100 {
            policy.read(120)
            #expect(!policy.isDue)
            #expect(!quiet(&policy))
        }
        #expect(policy.bytesSinceReturn == 12_000)
        // A burst: full reads; the reader only looks for quiet once it is due.
        policy.read(65_536 - 12_000 - 1)
        #expect(!policy.isDue)
        policy.read(1)
        #expect(policy.isDue)
        policy.read(65_536)
        #expect(quiet(&policy))  // the first quiet moment returns memory
        #expect(policy.bytesSinceReturn == 0)
        #expect(!policy.isDue)
        #expect(!quiet(&policy))  // and the next does not, until another burst
        policy.read(0)
        policy.read(-1)  // a failed read counts nothing
        #expect(policy.bytesSinceReturn == 0)
    }

    @Test func aThresholdBelowOneCountsAsOne() {
        var policy = BurstMemoryPolicy(threshold: 0)
        #expect(!quiet(&policy))
        policy.read(1)
        #expect(quiet(&policy))
    }

    @Test func glibcsTrimIsFoundAndCallable() {
        #expect(AllocatorMemory.isAvailable)
        AllocatorMemory.returnFreeMemory()
    }
}
