// The machine's CPU time by kind, from /proc/stat: how much of a run a hypervisor took.

import Foundation

/// The machine's CPU time so far, in clock ticks, from the first line of `/proc/stat`.
public struct CPUTimes: Sendable {
    /// Ticks of every kind (user, nice, system, idle, iowait, irq, softirq, steal).
    public var total: UInt64
    /// Ticks the hypervisor gave to someone else while a vCPU wanted to run.
    public var steal: UInt64

    /// Now (zero when `/proc/stat` cannot be read).
    public static func now() -> CPUTimes {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = text.split(separator: "\n").first, line.hasPrefix("cpu ")
        else { return CPUTimes(total: 0, steal: 0) }
        let ticks = line.split(separator: " ").dropFirst().prefix(8).compactMap { UInt64($0) }
        guard ticks.count == 8 else { return CPUTimes(total: 0, steal: 0) }
        return CPUTimes(total: ticks.reduce(0, +), steal: ticks[7])
    }

    /// Steal time between `earlier` and this, in percent of all CPU time then.
    public func stealPercent(since earlier: CPUTimes) -> Double {
        guard total > earlier.total else { return 0 }
        return Double(steal &- earlier.steal) * 100 / Double(total - earlier.total)
    }
}
