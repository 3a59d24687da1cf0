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
