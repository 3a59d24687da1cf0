/// Why ``Runtime/beginBackgroundTask(name:maximumDuration:fileID:line:expirationHandler:endHandler:)``
/// returned ``BackgroundTaskID/invalid``.
public enum BackgroundTaskRefusal: Error, Sendable, Hashable, CustomStringConvertible {
    /// The runtime has terminated.
    case terminated
    /// The program is suspended: no background work runs until the next transition.
    case suspended
    /// Less than the expiration lead time is left before the background deadline.
    case insufficientTimeRemaining(remaining: Duration, leadTime: Duration)
    /// The configured cap on open grants is reached.
    case tooManyOpenTasks(limit: Int)
    /// The requested maximum duration is not longer than the expiration lead time.
    case maximumDurationTooShort(requested: Duration, leadTime: Duration)

    /// A sentence naming the reason and its figures.
    public var description: String {
        switch self {
        case .terminated:
            "the runtime has terminated"
        case .suspended:
            "the program is suspended"
        case .insufficientTimeRemaining(let remaining, let lead):
            "only \(remaining) left before the background deadline, less than the expiration lead time \(lead)"
        case .tooManyOpenTasks(let limit):
            "the cap of \(limit) open background tasks is reached"
        case .maximumDurationTooShort(let requested, let lead):
            "maximum duration \(requested) is not longer than the expiration lead time \(lead)"
        }
    }

    var metricLabel: String {
        switch self {
        case .terminated: "terminated"
        case .suspended: "suspended"
        case .insufficientTimeRemaining: "insufficient_time"
        case .tooManyOpenTasks: "too_many_open"
        case .maximumDurationTooShort: "maximum_duration_too_short"
        }
    }
}
