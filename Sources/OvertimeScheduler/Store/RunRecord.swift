import Overtime

/// How one attempt of a run ended. A struct over a private enum, so that results can be
/// added without breaking code that switches over them.
public struct RunResult: Sendable, Hashable, CustomStringConvertible {
    enum Kind: String, Hashable, CaseIterable {
        case running, succeeded, failed, expired, stopped, terminated, interrupted, superseded
    }

    let kind: Kind

    /// Still running.
    public static let running = RunResult(kind: .running)
    /// The handler said `setTaskCompleted(success: true)`.
    public static let succeeded = RunResult(kind: .succeeded)
    /// The handler said `setTaskCompleted(success: false)`.
    public static let failed = RunResult(kind: .failed)
    /// The grant expired and the handler completed it.
    public static let expired = RunResult(kind: .expired)
    /// A requirement stopped holding (see ``RunRecord/stopReason``) and the handler
    /// completed it after its expiration handler.
    public static let stopped = RunResult(kind: .stopped)
    /// Never completed: the grant was terminated at its deadline.
    public static let terminated = RunResult(kind: .terminated)
    /// The process ended while it ran (a crash, kill -9); found at the next start.
    public static let interrupted = RunResult(kind: .interrupted)
    /// It ended (the handler completed it) after its claim on a fleet's store had been
    /// taken over by another instance — the process was paused or cut off longer than the
    /// claim — so its end did not count: the attempt that took it over stands for the run.
    /// See ``RunRecord/stopReason`` for what it ended with.
    public static let superseded = RunResult(kind: .superseded)

    /// The word stored and shown: `succeeded`, `failed`, …
    public var description: String { kind.rawValue }
}

extension RunResult {
    /// The result a store wrote as `stored`, or `nil` for a word this build does not know.
    @_spi(ScheduleStore) public init?(stored: String) {
        guard let kind = Kind(rawValue: stored) else { return nil }
        self.init(kind: kind)
    }
}

/// One attempt of a run, as the history keeps it.
public struct RunRecord: Sendable, Hashable {
    /// The request's identifier.
    public let identifier: String
    /// The run's ID: the same for every attempt of one run, so a handler can be idempotent.
    public let runID: Int64
    /// 1 for the first attempt.
    public let attempt: Int
    /// When the attempt started (wall clock).
    public let startedAt: WallClockInstant
    /// When it ended; `nil` while it runs.
    public let endedAt: WallClockInstant?
    /// How it ended.
    public let result: RunResult
    /// Why it stopped, when something stopped it (expiration, a requirement, a crash).
    public let stopReason: String?
    /// What the handler set with ``ScheduledTask/setOutput(_:)`` before it completed the
    /// attempt; `nil` when it set none.
    public let output: [UInt8]?

    /// An attempt as a store recorded it.
    @_spi(ScheduleStore) public init(
        identifier: String, runID: Int64, attempt: Int, startedAt: WallClockInstant, endedAt: WallClockInstant?,
        result: RunResult, stopReason: String?, output: [UInt8]? = nil
    ) {
        self.output = output
        self.identifier = identifier
        self.runID = runID
        self.attempt = attempt
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.result = result
        self.stopReason = stopReason
    }
}
