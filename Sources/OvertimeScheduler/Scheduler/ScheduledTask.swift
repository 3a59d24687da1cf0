import Logging
import Overtime
import OvertimeSupport
import Synchronization

/// One attempt of a run, handed to the handler registered for its identifier: it runs
/// inside a grant of background time, and ends with ``setTaskCompleted(success:fileID:line:)``,
/// exactly once (BGTask's contract).
///
/// ```swift
/// try scheduler.register("com.example.refresh") { task in
///     let fetch = fetcher.start(run: task.runID) { ok in task.setTaskCompleted(success: ok) }
///     task.expirationHandler = { fetch.cancel() }   // then complete it, unsuccessfully
/// }
/// ```
public final class ScheduledTask: Sendable {
    /// The request's identifier.
    public let identifier: String
    /// The run's ID: the same for every attempt of one run (a retry, a run interrupted by a
    /// crash), so a handler can make its effect idempotent.
    public let runID: Int64
    /// 1 for the first attempt of the run.
    public let attempt: Int
    /// When the run was due: the planned time it stands for — a repeating request's slot on
    /// its grid (a catch-up run's missed time; one run per planned time, across a fleet
    /// too), or a one-shot's due time — the same for every attempt of the run. On the
    /// schedule's clock (the database's, for a shared store).
    public let dueTime: WallClockInstant
    /// When this attempt fell due: ``dueTime`` for a first attempt; a retry's time after
    /// its backoff, or when a crash or a lost claim (a fleet's takeover) left it to retry.
    public let attemptDueTime: WallClockInstant

    /// The request's ``ScheduledTaskRequest/input``: what to work on.
    public let input: [UInt8]

    /// The outputs of the request's ``ScheduledTaskRequest/prerequisites`` (each set with
    /// ``setOutput(_:)`` by the run that succeeded), by identifier; a prerequisite that set
    /// none is absent. Empty for a request without prerequisites.
    public let prerequisiteOutputs: [String: [UInt8]]

    /// This attempt as a token that later attempts (a retry, a fleet's takeover) exceed:
    /// pass it with writes that must happen once, to a store that refuses smaller tokens.
    public var fencingToken: FencingToken { FencingToken(runID: runID, attempt: attempt) }

    /// Whether this process may still act as the run's holder: in a fleet, its claim on the
    /// run was renewed within the claim's duration less its margin and not taken over (a
    /// process paused past its claim reads `false` as soon as it resumes, before a renewal);
    /// always `true` on a store one process owns, until the task completes. Check it right
    /// before an effect that must happen once; pair it with ``fencingToken`` where the
    /// effect's store can check.
    public var isClaimHeld: Bool { !isCompleted && claimCheck() }

    private let claimCheck: @Sendable () -> Bool
    /// Tells the scheduler what the handler did: completed the task, or reported progress
    /// (one closure for both: a task is made for every run).
    private let report: @Sendable (Report) -> Void
    private let logger: Logger
    private let metrics: SchedulerMetrics
    private let completed = Atomic<Bool>(false)
    private let expired = Atomic<Bool>(false)
    private let handler = Locked<(@Sendable () -> Void)?>(nil)
    /// What the handler reported: its progress and its output (one lock for both: a task
    /// is made for every run).
    private let reported = Locked<Reported>(Reported())

    /// What the handler did, as the scheduler hears it.
    enum Report: Sendable {
        /// ``setTaskCompleted(success:fileID:line:)``, after the expiration handler or not.
        case completed(success: Bool, expired: Bool)
        /// ``setProgress(_:message:)``: `recordingDue` for the first report since the
        /// scheduler last took one to record (``takeProgressToRecord()``); reports meanwhile
        /// only replace it.
        case progress(RunProgress, recordingDue: Bool)
    }

    struct Reported: Sendable {
        var progress: RunProgress?
        var output: [UInt8]?
        /// Progress was reported since the scheduler last took it to record.
        var progressToRecord = false
    }

    init(
        identifier: String, runID: Int64, attempt: Int, dueTime: WallClockInstant, attemptDueTime: WallClockInstant,
        input: [UInt8] = [], prerequisiteOutputs: [String: [UInt8]] = [:], logger: Logger, metrics: SchedulerMetrics,
        claimCheck: @escaping @Sendable () -> Bool = { true },
        report: @escaping @Sendable (Report) -> Void
    ) {
        self.report = report
        self.input = input
        self.prerequisiteOutputs = prerequisiteOutputs
        self.claimCheck = claimCheck
        self.metrics = metrics
        self.identifier = identifier
        self.runID = runID
        self.attempt = attempt
        self.dueTime = dueTime
        self.attemptDueTime = attemptDueTime
        self.logger = logger
    }

    /// Called (on the runtime's loop thread) when the run's time is up: its grant is
    /// expiring, or it was cancelled. Stop the work, then complete the task. It is let go
    /// once called or once the task is completed, so a handler that refers to its task
    /// (`task.expirationHandler = { task.setTaskCompleted(success: false) }`) keeps
    /// neither alive.
    public var expirationHandler: (@Sendable () -> Void)? {
        get { handler.withLock { $0 } }
        set { handler.withLock { $0 = newValue } }
    }

    /// Whether the run's time is up (its expiration handler was called).
    public var isExpired: Bool { expired.load(ordering: .acquiring) }

    /// Ends the run: `success` or not (a failure is retried per the request's policy). A
    /// second call is logged with its call site and counted, and does nothing else.
    public func setTaskCompleted(success: Bool, fileID: StaticString = #fileID, line: UInt = #line) {
        guard !completed.exchange(true, ordering: .acquiringAndReleasing) else {
            metrics.countMisuse("completed_twice")
            logger.warning(
                "setTaskCompleted called again for a task already completed",
                metadata: [
                    "task": "\(identifier)", "run": "\(runID)", "attempt": "\(attempt)",
                    "call_site": "\(fileID):\(line)",
                ])
            return
        }
        handler.withLock { $0 = nil }  // never called now
        report(.completed(success: success, expired: isExpired))
    }

    /// Reports how far the run has come: `fraction` from 0 to 1 (clamped; a value that is
    /// not a number is counted as misuse and ignored) and what it is doing. From any
    /// thread; after completion it does nothing.
    ///
    /// ```swift
    /// task.setProgress(Double(sent) / Double(total), message: "segment \(sent) of \(total)")
    /// ```
    public func setProgress(_ fraction: Double, message: String? = nil) {
        guard !isCompleted else { return }
        guard let progress = RunProgress(fraction: fraction, message: message) else {
            metrics.countMisuse("progress_not_a_number")
            logger.warning(
                "setProgress called with a fraction that is not a number", metadata: ["task": "\(identifier)"])
            return
        }
        let recordingDue = reported.withLock { reported in
            defer { reported.progressToRecord = true }
            reported.progress = progress
            return !reported.progressToRecord
        }
        report(.progress(progress, recordingDue: recordingDue))
    }

    /// The progress reported since the last call, for the store to record; `nil` when none.
    func takeProgressToRecord() -> RunProgress? {
        reported.withLock { reported in
            guard reported.progressToRecord else { return nil }
            reported.progressToRecord = false
            return reported.progress
        }
    }

    /// Keeps `bytes` as this attempt's result, recorded with it in the history when it ends
    /// (``RunRecord/output``); a later call replaces it. More than
    /// ``ScheduleLimits/maximumDataBytes`` is refused with
    /// ``SchedulerError/Code/dataTooLarge`` and keeps what was set before. After completion
    /// it is counted as misuse and does nothing.
    ///
    /// ```swift
    /// try task.setOutput(Array("uploaded 42 segments".utf8))
    /// task.setTaskCompleted(success: true)
    /// ```
    public func setOutput(_ bytes: [UInt8]) throws(SchedulerError) {
        try ScheduleLimits.check(dataOf: bytes.count, field: "output", identifier: identifier)
        guard !isCompleted else {
            metrics.countMisuse("output_after_completion")
            logger.warning("setOutput called after the task was completed", metadata: ["task": "\(identifier)"])
            return
        }
        reported.withLock { $0.output = bytes }
    }

    /// What ``setOutput(_:)`` kept, `nil` when nothing.
    var output: [UInt8]? { reported.withLock { $0.output } }

    /// The last progress reported, `nil` before the first.
    public var progress: RunProgress? { reported.withLock { $0.progress } }

    /// Whether ``setTaskCompleted(success:fileID:line:)`` was called.
    var isCompleted: Bool { completed.load(ordering: .acquiring) }

    /// The run's time is up: tells the handler, once.
    func expire() {
        guard !expired.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let called = handler.withLock { handler in
            defer { handler = nil }
            return handler
        }
        called?()
    }
}
