// Every sample behind a percentile row (the scheduler's lateness, the fleet's claim
// latency), by metric and implementation, for the distribution charts beside the table.

import Foundation
import Synchronization

/// The samples the runs behind percentile rows recorded, kept for `distributions.json`.
public enum Distributions {
    private static let samples = Mutex<[String: [String: [Double]]]>([:])

    /// Keeps `values` (in the metric's unit) as `implementation`'s samples of `metric`.
    public static func record(_ metric: String, _ implementation: String, _ values: [Double]) {
        samples.withLock { $0[metric, default: [:]][implementation] = values.sorted() }
    }

    /// Everything recorded, as JSON: metric → implementation → sorted samples.
    public static func json() throws -> Data {
        try JSONSerialization.data(withJSONObject: samples.withLock { $0 }, options: [.sortedKeys])
    }
}
