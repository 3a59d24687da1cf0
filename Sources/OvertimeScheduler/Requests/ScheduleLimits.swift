// The ranges every duration a scheduler takes must fall in, and why.

import Overtime

/// The ranges a request's durations (and a scheduler's) must fall in. A value outside is
/// refused at submission with ``SchedulerError/Code/invalidRequest`` naming the field and
/// its range; nothing is clamped silently.
public enum ScheduleLimits {
    /// The shortest repetition interval: 100 ms. Every run is a grant and a durable
    /// commit of its plan and history; below this the bookkeeping outweighs any work, and
    /// a shared store would take thousands of writes a second from one request. (Where
    /// WorkManager's floor of 15 minutes protects a phone's battery, a daemon may poll
    /// faster; systemd timers default to a minute's accuracy for the same reason.)
    public static let minimumInterval: Duration = .milliseconds(100)

    /// The longest duration any field takes: 100 years. Plans are wall-clock nanoseconds
    /// since 1970 in 64 bits (they reach 2262): a longer interval, delay or grant could
    /// overflow a plan and run at once instead of never.
    public static let maximumDuration: Duration = .seconds(100 * 365 * 86_400)

    /// The most attempts a retry policy allows.
    public static let maximumAttempts = 1_000_000

    /// Checks `value` against `range`; the error names `field` and the range.
    static func check(
        _ field: String, _ value: Duration, in range: ClosedRange<Duration>, identifier: String? = nil
    ) throws(SchedulerError) {
        guard range.contains(value) else {
            let subject = identifier.map { "'\($0)': " } ?? ""
            throw SchedulerError(
                code: .invalidRequest,
                message:
                    "\(subject)\(field) must be between \(describe(range.lowerBound)) and \(describe(range.upperBound)), got \(describe(value))",
                field: field)
        }
    }

    private static func describe(_ duration: Duration) -> String {
        duration == maximumDuration ? "100 years" : "\(duration)"
    }
}
