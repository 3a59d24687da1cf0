// How late runs started, as an overview shows it: the time from each run's due time to its
// start, summed up as percentiles over the last hour. Stores keep a histogram (a count per
// bucket and minute, written with the starts), so an overview reads at most a few hundred
// rows however many runs started; the buckets are eight to a doubling, so a percentile read
// from them is at most 9 % above the true one.

import Overtime

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// How late the runs that started in the hour before an overview began: the time from each
/// run's due time to its start (the scheduler's `overtime_scheduler_lateness_seconds`).
/// Runs started at once by an operator (run now) are not counted: they had no due time.
public struct StartLateness: Sendable, Hashable {
    /// The runs counted.
    public let started: Int
    /// Half the runs started at most this late. An upper bound: the stores count lateness
    /// in buckets eight to a doubling, so it is at most about 9 % above the true median.
    public let median: Duration
    /// 99 in 100 runs started at most this late (an upper bound, as ``median``).
    public let percentile99: Duration

    /// A summary; for stores outside this module.
    public init(started: Int, median: Duration, percentile99: Duration) {
        self.started = started
        self.median = median
        self.percentile99 = percentile99
    }
}

/// The buckets stores count lateness in: bucket 0 holds a start less than a millisecond
/// after its due time (or before it); bucket `b` ≥ 1 holds lateness in [2^((b-1)/8),
/// 2^(b/8)) milliseconds, up to the last, which holds everything above.
@_spi(ScheduleStore) public enum LatenessBuckets {
    /// The highest bucket: 2^40 ms, about 35 years.
    public static let last = 320

    /// The bucket of a start `lateness` after its due time.
    public static func bucket(of lateness: Duration) -> Int {
        let milliseconds = Double(lateness.saturatingNanoseconds) / 1_000_000
        guard milliseconds >= 1 else { return 0 }
        return min(last, 1 + Int((log2(milliseconds) * 8).rounded(.down)))
    }

    /// The most lateness `bucket` holds: 2^(`bucket`/8) ms (for the last, all above it
    /// is counted in it too).
    public static func upperBound(of bucket: Int) -> Duration {
        let exponent = Double(min(max(bucket, 0), last)) / 8
        return .nanoseconds(Int64((pow(2, exponent) * 1_000_000).rounded()))
    }

    /// The summary of the starts counted by bucket, or `nil` when none is.
    /// Counts read from a store are taken as they come: a negative one is left out, and
    /// sums stop at `Int.max` rather than overflow (a damaged store cannot stop a read).
    public static func summary(_ counted: [Int: Int]) -> StartLateness? {
        let buckets = counted.filter { $0.value > 0 }.sorted { $0.key < $1.key }
        func add(_ a: Int, _ b: Int) -> Int {
            let (sum, overflow) = a.addingReportingOverflow(b)
            return overflow ? .max : sum
        }
        let started = buckets.reduce(0) { add($0, $1.value) }
        guard started > 0 else { return nil }
        /// The bucket the `rank`th start (from 1, least late first) falls in.
        func bound(atRank rank: Int) -> Duration {
            var seen = 0
            for (bucket, count) in buckets {
                seen = add(seen, count)
                if seen >= rank { return upperBound(of: bucket) }
            }
            return upperBound(of: buckets[buckets.count - 1].key)
        }
        // The nearest rank: the smallest lateness at least the fraction of starts reach.
        func rank(_ fraction: Double) -> Int { max(1, Int((Double(started) * fraction).rounded(.up))) }
        return StartLateness(
            started: started, median: bound(atRank: rank(0.5)), percentile99: bound(atRank: rank(0.99)))
    }
}
