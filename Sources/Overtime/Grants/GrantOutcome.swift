/// Why a grant ended, as its end handler sees it.
public enum BackgroundTaskEndReason: Sendable, Hashable, CustomStringConvertible {
    /// Ended by its owner before its expiration handler was asked to run.
    case completed
    /// Ended by its owner after its expiration handler ran (or was due).
    case expired
    /// Still open at its deadline: the runtime ended it and reported it.
    case terminated

    /// `completed`, `expired` or `terminated`.
    public var description: String {
        switch self {
        case .completed: "completed"
        case .expired: "expired"
        case .terminated: "terminated"
        }
    }
}

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

/// What the runtime does with a grant still open at its deadline, after reporting it.
public enum TerminationPolicy: Sendable, Hashable {
    /// Force-end the grant (its end handler sees ``BackgroundTaskEndReason/terminated``);
    /// the program goes on. The default.
    case endTask
    /// Write the reports, then exit the process with `status` (what iOS does).
    case exitProcess(status: Int32)
}

/// What the watchdog does when one callback holds the loop past the timeout.
public enum WatchdogPolicy: Sendable, Hashable {
    /// Report, then exit the process with `status`. The default, with
    /// ``WatchdogPolicy/defaultExitStatus``.
    case exitProcess(status: Int32)
    /// Report only; the program goes on.
    case reportOnly

    /// The status the default policy exits with: 70 (`EX_SOFTWARE`).
    public static let defaultExitStatus: Int32 = 70
}
