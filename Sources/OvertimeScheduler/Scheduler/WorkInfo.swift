// The state of one request, finished or not, as WorkManager's WorkInfo shows it.

import Overtime

/// Where one request stands, finished or not: what `Scheduler.workInfo(_:)` answers and
/// ``Scheduler/workInfoUpdates(_:)`` yields as it changes (WorkManager's `WorkInfo`).
public struct WorkInfo: Sendable, Hashable {
    /// The state of a request. A struct over a private enum, so that states can be added
    /// without breaking code that switches over them.
    public struct State: Sendable, Hashable, CustomStringConvertible {
        enum Kind: String, Hashable {
            case enqueued, blocked, running, succeeded, failed, cancelled
        }

        let kind: Kind

        /// Waits for its next planned time, or a failed attempt's retry.
        public static let enqueued = State(kind: .enqueued)
        /// Held by something other than time: a prerequisite that has not succeeded yet,
        /// or — due — a requirement that does not hold, the concurrency limit, or a runtime
        /// that gives no grant (``WorkInfo/waitingFor`` says which).
        public static let blocked = State(kind: .blocked)
        /// A run is in progress (here, or on ``WorkInfo/holder`` in a fleet).
        public static let running = State(kind: .running)
        /// Finished: its last run succeeded (a one-shot, or a calendar repetition whose
        /// calendar ended).
        public static let succeeded = State(kind: .succeeded)
        /// Finished: its last run failed for good (every attempt its retry policy allows).
        public static let failed = State(kind: .failed)
        /// Finished: cancelled (`Scheduler.cancel(_:)`, `Scheduler.cancel(tag:)`,
        /// `Scheduler.cancelAll()`) before it finished, or because a prerequisite was
        /// (``WorkInfo/stoppedBy``).
        public static let cancelled = State(kind: .cancelled)

        /// Whether nothing more of the request runs (succeeded, failed or cancelled).
        public var isFinished: Bool { kind == .succeeded || kind == .failed || kind == .cancelled }

        /// The word shown: `enqueued`, `blocked`, …
        public var description: String { kind.rawValue }
    }

    /// The request.
    public let request: ScheduledTaskRequest
    /// Its state.
    public let state: State
    /// When it was submitted (wall clock).
    public let submittedAt: WallClockInstant
    /// What it waits for, when enqueued or blocked (``PendingRequest/Reason/running`` while a
    /// run is in progress); `nil` when finished.
    public let waitingFor: PendingRequest.Reason?
    /// When its next run may start; `nil` when finished, and while it waits on a
    /// prerequisite.
    public let nextRun: WallClockInstant?
    /// The attempt of the run in progress, or the one that starts next; when finished, the
    /// last attempt that ran (0 when none did).
    public let attempt: Int
    /// The newest attempt that ended, with its result, stop reason and output; `nil` before
    /// the first ends.
    public let lastRun: RunRecord?
    /// What the run in progress here last reported (``ScheduledTask/setProgress(_:message:)``).
    public let progress: RunProgress?
    /// In a fleet: the instance whose run is in progress; `nil` otherwise.
    public let holder: String?
    /// When it was cancelled; `nil` unless ``state`` is ``State-swift.struct/cancelled``.
    public let cancelledAt: WallClockInstant?
    /// The prerequisite whose failure or cancellation failed or cancelled this request
    /// (``ScheduledTaskRequest/prerequisites``); `nil` otherwise.
    public let stoppedBy: String?
    /// The outputs its prerequisites handed on so far, by identifier (those that set one).
    public let prerequisiteOutputs: [String: [UInt8]]

    /// Why its newest attempt stopped (expiration, a requirement, a crash), if something
    /// stopped it.
    public var lastStopReason: String? { lastRun?.stopReason }
}

extension WorkInfo {
    /// The work info of `stored`, given the run in progress here (`running`), the newest
    /// attempt that ended, and why it waits when pending.
    init(
        _ stored: StoredRequest, running: Scheduler.ActiveRun?, lastRun: RunRecord?,
        waitingFor: PendingRequest.Reason
    ) {
        let current = running.map { $0.detached ? stored : $0.stored } ?? stored
        request = current.request
        submittedAt = current.submittedAt
        self.lastRun = lastRun
        holder = stored.holder
        cancelledAt = stored.cancelledAt
        stoppedBy = stored.chain?.stoppedBy
        prerequisiteOutputs = stored.chain?.handedOn ?? [:]
        let isRunning = running.map { !$0.detached } ?? stored.isRunning
        if stored.cancelledAt != nil {
            state = .cancelled
        } else if isRunning {
            state = .running
        } else if current.plan.isFinished {
            let succeeded = stored.chain?.stoppedBy == nil && lastRun.map { $0.result == .succeeded } ?? true
            state = succeeded ? .succeeded : .failed
        } else {
            switch waitingFor {
            case .plannedTime, .retry, .startSpacing: state = .enqueued
            case .running: state = .running
            case .prerequisite, .concurrencyLimit, .runtimeRefused, .requirement, .requirementUnknown: state = .blocked
            }
        }
        if state.isFinished {
            self.waitingFor = nil
            nextRun = nil
            attempt = lastRun?.attempt ?? 0
            progress = nil
        } else {
            self.waitingFor = state == .running ? .running : waitingFor
            nextRun = current.chain?.isWaiting == true ? nil : SchedulePlanner.dueTime(current.plan, current.request)
            attempt = running.map { $0.task.attempt } ?? current.plan.failedAttempts + 1
            progress = running?.task.progress
        }
    }
}
