import Overtime
import Testing

@_spi(ScheduleStore) @testable import OvertimeScheduler

/// The buckets stores count lateness in, and the percentiles an overview reads from them:
/// each bucket's bound is at least any lateness it holds and at most 2^(1/8) above it, and a
/// percentile is the bound of the bucket its nearest rank falls in.
@Suite("Start lateness")
struct StartLatenessTests {
    @Test func aBucketsBoundIsAtLeastWhatItHoldsAndAtMostAnEighthOfADoublingAbove() {
        #expect(LatenessBuckets.bucket(of: .zero) == 0)
        #expect(LatenessBuckets.bucket(of: .seconds(-5)) == 0, "started before its due time: on time")
        #expect(LatenessBuckets.bucket(of: .microseconds(999)) == 0)
        #expect(LatenessBuckets.upperBound(of: 0) == .milliseconds(1))
        #expect(LatenessBuckets.bucket(of: .milliseconds(1)) == 1)
        #expect(LatenessBuckets.bucket(of: .microseconds(1_090)) == 1)
        #expect(LatenessBuckets.bucket(of: .microseconds(1_100)) == 2, "2^(1/8) ms is 1.0905 ms")
        #expect(LatenessBuckets.upperBound(of: LatenessBuckets.bucket(of: .seconds(1))) == .milliseconds(1_024))
        #expect(LatenessBuckets.bucket(of: .seconds(86_400 * 365 * 100)) == LatenessBuckets.last)
        let step = 1.0905077326652577  // 2^(1/8)
        var lateness = Duration.microseconds(1_000)
        while lateness < .seconds(86_400 * 30) {
            let bound = LatenessBuckets.upperBound(of: LatenessBuckets.bucket(of: lateness))
            #expect(bound > lateness && bound <= lateness * step + .microseconds(1), "\(lateness) -> \(bound)")
            lateness = lateness * 1.37 + .microseconds(13)
        }
    }

    @Test func aPercentileIsTheBoundOfTheBucketItsNearestRankFallsIn() {
        let quick = LatenessBuckets.bucket(of: .milliseconds(10))
        let slow = LatenessBuckets.bucket(of: .seconds(5))
        #expect(LatenessBuckets.summary([:]) == nil)
        #expect(LatenessBuckets.summary([quick: 0]) == nil)
        #expect(
            LatenessBuckets.summary([0: 1])
                == StartLateness(started: 1, median: .milliseconds(1), percentile99: .milliseconds(1)))
        // The 99th of 100 is the last quick one; with one more slow, it is slow.
        #expect(
            LatenessBuckets.summary([slow: 1, quick: 99])
                == StartLateness(
                    started: 100, median: LatenessBuckets.upperBound(of: quick),
                    percentile99: LatenessBuckets.upperBound(of: quick)))
        #expect(
            LatenessBuckets.summary([quick: 98, slow: 2])
                == StartLateness(
                    started: 100, median: LatenessBuckets.upperBound(of: quick),
                    percentile99: LatenessBuckets.upperBound(of: slow)))
        // Counts a damaged store could hold: a negative one is left out, a sum stops at the most.
        #expect(LatenessBuckets.summary([quick: -5, slow: 1])?.started == 1)
        #expect(
            LatenessBuckets.summary([quick: .max, slow: .max, -3: 1, 10_000: 1])
                == StartLateness(
                    started: .max, median: LatenessBuckets.upperBound(of: quick),
                    percentile99: LatenessBuckets.upperBound(of: quick)))
        // Half of four is the second: on time; the fourth is slow.
        #expect(
            LatenessBuckets.summary([0: 2, slow: 2])
                == StartLateness(
                    started: 4, median: .milliseconds(1), percentile99: LatenessBuckets.upperBound(of: slow)))
    }
}
