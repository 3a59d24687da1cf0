// A request that has not finished, as the scheduler shows it: when it runs next and what
// it waits for.

import Overtime

/// A request not finished, as `Scheduler.pendingRequests()` shows it: why it has not
/// run yet.
public struct PendingRequest: Sendable, Hashable {
    /// Why a request waits.
    public enum Reason: Sendable, Hashable, CustomStringConvertible {
        /// A run is in progress.
        case running
        /// Its next planned time (the start of its flex window, never before its earliest begin).
        case plannedTime(WallClockInstant)
        /// A failed attempt's retry, after its backoff.
        case retry(at: WallClockInstant)
        /// A prerequisite that has not succeeded yet (the first, in identifier order, of
        /// those left): see ``ScheduledTaskRequest/prerequisites``.
        case prerequisite(String)
        /// The most runs at once are running.
        case concurrencyLimit
        /// Due with others: started one after another, ``SchedulerConfiguration/startSpacing`` apart.
        case startSpacing
        /// The runtime refused a grant (suspended or terminating): until the lifecycle changes.
        case runtimeRefused(String)
        /// A requirement does not hold (the first unmet one).
        case requirement(Requirement)
        /// A requirement that cannot be told here now (the first unmet one), and why: no
        /// NetworkManager to say whether the network is metered, no logind to say whether
        /// the device is idle. It waits until the system can tell.
        case requirementUnknown(Requirement, because: String)

        /// A sentence, as `overtimectl` prints it.
        public var description: String {
            switch self {
            case .running: "running"
            case .plannedTime(let time): "earliest begin at \(time)"
            case .retry(let time): "retry at \(time)"
            case .prerequisite(let identifier): "prerequisite '\(identifier)'"
            case .concurrencyLimit: "the concurrency limit"
            case .startSpacing: "runs due together start one after another"
            case .runtimeRefused(let reason): "no grant: \(reason)"
            case .requirement(let requirement): "requirement '\(requirement)'"
            case .requirementUnknown(let requirement, let reason): "requirement '\(requirement)' (unknown: \(reason))"
            }
        }
    }

    /// The request.
    public let request: ScheduledTaskRequest
    /// When its next run may start.
    public let nextRun: WallClockInstant
    /// The attempt that run will be (1 unless retrying).
    public let attempt: Int
    /// What it waits for.
    public let waitingFor: Reason
    /// In a fleet (a store instances share): the instance whose run is in progress, as
    /// the store names it (the PostgreSQL store: `host:pid`, after the instance name when
    /// one is configured); `nil` otherwise.
    public let holder: String?
    /// What the run in progress here last reported with `ScheduledTask.setProgress(_:message:)`;
    /// `nil` when none runs here or it reported nothing.
    public let progress: RunProgress?

    init(
        request: ScheduledTaskRequest, nextRun: WallClockInstant, attempt: Int, waitingFor: Reason, holder: String?,
        progress: RunProgress? = nil
    ) {
        self.request = request
        self.nextRun = nextRun
        self.attempt = attempt
        self.waitingFor = waitingFor
        self.holder = holder
        self.progress = progress
    }
}
