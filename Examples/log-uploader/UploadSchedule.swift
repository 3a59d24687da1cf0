// The periodic upload: one request in the schedule, pending only while the spool has lines.

import Logging
import Overtime
import OvertimeLogUploader
import OvertimeScheduler
import OvertimeSupport

/// Keeps one `log-upload` request pending exactly while the spool has lines to send. The
/// first line after an empty spool submits it, due one interval later (lines batch up
/// meanwhile); its run drains inside its grant and, once the spool is empty, ends. An idle
/// daemon so has nothing scheduled: no wake-up, no write (a repeating request would run,
/// and write its history, every interval for nothing). A run that leaves segments fails
/// and is retried with the scheduler's backoff; a network sink's request waits for a
/// default route.
final class UploadSchedule: Sendable {
    static let identifier = "log-upload"

    let scheduler: Scheduler
    let uploader: LogUploader
    let interval: Duration
    let requirements: Set<Requirement>
    private let logger: Logger
    /// A request is pending (or its run in progress): lines arriving need not submit one.
    private let armed = Locked(false)
    /// Where submits happen: not on an appending thread (the loop's, a client's), since a
    /// submit is a durable transaction.
    private let queue = SerialWorkQueue(name: "log-upload-arm")

    init(
        scheduler: Scheduler, uploader: LogUploader, interval: Duration, requirements: Set<Requirement>,
        logger: Logger
    ) {
        self.scheduler = scheduler
        self.uploader = uploader
        self.interval = interval
        self.requirements = requirements
        self.logger = logger
    }

    /// Registers the run's handler (before the scheduler starts).
    func register() throws(SchedulerError) {
        try scheduler.register(Self.identifier) { [self] task in
            let drain = Task(executorPreference: queue) { [self] in
                let left = await uploader.drain()
                guard left == 0 else {
                    logger.warning(
                        "\(UploadLeftSegments(count: left, lastError: uploader.statistics.lastError)); retried")
                    task.setTaskCompleted(success: false)
                    return
                }
                task.setTaskCompleted(success: true)
                drained()
            }
            task.expirationHandler = { drain.cancel() }
        }
    }

    /// After the start: lines left from before (or a request of an earlier version, which
    /// repeated) decide whether an upload is pending, due now. Decided on ``queue``, as the
    /// submits of arriving lines are (so a line's submit never comes before this and is
    /// never cancelled by it), and not waited for: the scheduler's own start work is queued
    /// ahead of it, and the daemon's start (`READY=1`) need not wait for that.
    func start() {
        uploader.spool.onAppend { [self] in linesArrived(dueIn: interval) }
        let pending = uploader.spool.pendingLines > 0
        if pending { armed.withLock { $0 = true } }
        queue.async { [self] in
            do throws(SchedulerError) {
                if pending {
                    try scheduler.submit(request(dueIn: .zero), ifExists: .replace)
                } else {
                    try scheduler.cancel(Self.identifier)
                }
            } catch  where error.code == .unknownIdentifier && !pending {
                // Nothing pending: as it should be at rest.
            } catch {
                if pending { armed.withLock { $0 = false } }  // the next line tries again
                logger.error("cannot schedule the upload: \(error)")
            }
        }
    }

    private func request(dueIn delay: Duration) -> ScheduledTaskRequest {
        var request = ScheduledTaskRequest(identifier: Self.identifier)
        request.earliestBegin = scheduler.runtime.clock.wallClockNow + delay
        request.requirements = requirements
        request.retry.initialDelay = min(interval, .seconds(30))
        request.retry.maximumAttempts = ScheduleLimits.maximumAttempts
        return request
    }

    /// Lines were appended: the first since the spool was drained submits the upload.
    private func linesArrived(dueIn delay: Duration) {
        let submit = armed.withLock { armed in
            defer { armed = true }
            return !armed
        }
        guard submit else { return }
        queue.async { [self] in
            do {
                try scheduler.submit(request(dueIn: delay))
            } catch {
                armed.withLock { $0 = false }  // the next line tries again
                logger.error("cannot schedule the upload: \(error)")
            }
        }
    }

    /// A run left the spool empty (its task completed): lines that came meanwhile, or that
    /// come from now on, submit the next upload.
    private func drained() {
        armed.withLock { $0 = false }
        if uploader.spool.pendingLines > 0 { linesArrived(dueIn: interval) }
    }
}
