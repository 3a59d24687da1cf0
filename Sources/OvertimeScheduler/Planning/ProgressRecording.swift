// When a running handler's progress is written to the store.

import Overtime

/// When the progress a running handler reports (``ScheduledTask/setProgress(_:message:)``)
/// is written to the store, where inspectors read it (a dashboard's Running page, which a
/// fleet's instances share): the first report at once, then at most one write per
/// ``interval`` for a run, the latest report winning. A handler may report for every item
/// it handles; a fleet's database takes one write a second for each run.
enum ProgressRecording {
    /// The shortest time between two writes of one run's progress.
    static let interval: Duration = .seconds(1)

    /// When to write a report made at `now`, for a run whose progress was last written at
    /// `lastWritten` (`nil`: never).
    static func writeTime(lastWritten: MonotonicInstant?, now: MonotonicInstant) -> MonotonicInstant {
        guard let lastWritten else { return now }
        return max(lastWritten + interval, now)
    }
}
