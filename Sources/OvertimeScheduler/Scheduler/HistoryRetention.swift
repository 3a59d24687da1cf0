// How long a schedule keeps what has finished: a device's history must not grow forever.

/// What a scheduler's history keeps: every periodic run adds an attempt, so without a
/// bound a device's store grows for as long as it runs. Attempts that ended longer than
/// ``maximumAge`` ago are deleted, and beyond the newest ``maximumAttemptsPerRequest`` of
/// each identifier; with them the finished requests (one-shots done, failed for good)
/// whose last attempt is that old. WorkManager prunes finished work after a day;
/// journald rotates.
///
/// Pruning runs when the scheduler starts and then, at most once per ``checkInterval`` of
/// wall-clock time, after a commit that recorded ended runs: never on a timer of its own,
/// so a schedule at rest wakes for nothing.
public struct HistoryRetention: Sendable, Hashable, CustomStringConvertible {
    /// Attempts that ended longer ago are deleted; `nil` keeps them whatever their age.
    /// Default 30 days.
    public var maximumAge: Duration?
    /// At most this many attempts of each identifier are kept (the newest); `nil`, any
    /// number. Default 1,000.
    public var maximumAttemptsPerRequest: Int?
    /// How often pruning may run. Default 1 hour.
    public var checkInterval: Duration

    /// A retention as given; by default 30 days and 1,000 attempts per request, checked
    /// hourly.
    public init(
        maximumAge: Duration? = .seconds(30 * 86_400), maximumAttemptsPerRequest: Int? = 1_000,
        checkInterval: Duration = .seconds(3_600)
    ) {
        self.maximumAge = maximumAge
        self.maximumAttemptsPerRequest = maximumAttemptsPerRequest
        self.checkInterval = checkInterval
    }

    /// Everything kept, forever (the history grows without bound).
    public static let keepEverything = HistoryRetention(maximumAge: nil, maximumAttemptsPerRequest: nil)

    /// `30 days, 1000 attempts per request`, as logs show it.
    public var description: String {
        let age = maximumAge.map { "attempts younger than \($0)" } ?? "attempts of any age"
        let count = maximumAttemptsPerRequest.map { "at most \($0) per request" } ?? "any number per request"
        return "\(age), \(count)"
    }

    /// Throws ``SchedulerError/Code/invalidRequest`` naming the field out of range.
    func check() throws(SchedulerError) {
        let lengths = ScheduleLimits.minimumInterval...ScheduleLimits.maximumDuration
        if let maximumAge { try ScheduleLimits.check("historyRetention.maximumAge", maximumAge, in: lengths) }
        try ScheduleLimits.check("historyRetention.checkInterval", checkInterval, in: lengths)
        if let count = maximumAttemptsPerRequest, count < 1 {
            throw SchedulerError(
                code: .invalidRequest,
                message: "historyRetention.maximumAttemptsPerRequest must be at least 1, got \(count)",
                field: "historyRetention.maximumAttemptsPerRequest")
        }
    }
}
