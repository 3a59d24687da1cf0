// The path of a log line, and the execution context each step runs in:
//
//   program thread ── Spool.append / SpoolLogWriter ──▶ segment file (group commit: the
//        │             first appender writes and fdatasyncs for everyone waiting)
//        ▼
//   drain task (on the runtime's loop, inside a grant) ── decides: which segments start,
//        │             which outcome counts, when to stop, retry or wait out a backoff
//        │             (on the runtime's timer); it owns the drain's state
//        ▼
//   file queue (the uploader's own thread) ── blocking file work: sealing the active
//        │             segment, dead letters; and each upload's call of a sink that may
//        │             block (S3Sink, which reads and signs the segment; a program's own)
//        ▼
//   sink: HTTPSink, S3Sink ── libcurl transfers on the loop thread, several at once
//        │    (HTTPSink, called on the loop, reads an unencoded segment's file as it
//        │    sends — just written, so from the page cache — and encodes on its own thread)
//        │ DirectorySink / SyslogSink / RELPSink ── called on the loop, their blocking
//        │    I/O on a queue of their own
//        ▼
//   acknowledgement queue ── checkpoint write + two fdatasyncs, coalesced, beside the
//                            next upload (the upload benchmark row needs it)
//
// No step wakes while there is nothing to do: the loop already exists, and the file and
// acknowledgement queues are threads of the uploader's own (SerialWorkQueue) that sleep
// without a timeout while empty; the drain task runs only inside a grant.

import CoreMetrics
import Logging
import Overtime
import OvertimeSupport
import Tracing

/// Uploads a ``Spool``'s sealed segments to a ``LogSink`` inside a background grant.
///
/// On `didEnterBackground` and on `willTerminate` (unless only the program's own lines wait,
/// ``SpoolLogWriter``'s: those wait for the next run) it begins a grant (in the observer, so
/// the program does not suspend first), seals the active segment and uploads sealed
/// segments oldest first, moving the checkpoint after each acknowledgement. Up to
/// ``UploaderConfiguration/maximumUploadsInFlight`` uploads run at once where the sink
/// takes them (``LogSink/concurrentStores``); a segment is acknowledged only after every
/// older one, so the checkpoint never passes a segment the collector does not hold. It
/// stops starting uploads when the time left before expiration is below its estimate of
/// one upload. On expiration it cancels the uploads in flight, leaves the checkpoint where
/// it is and ends the grant. Failed uploads are retried with backoff inside the grant while
/// time allows; a segment refused for good goes to the dead-letter folder.
///
/// A collector's `Retry-After` is honoured from its first answer, across drains: no upload
/// starts before the time it named. When that time falls past the last moment one more
/// upload fits before expiration, the drain stops at once with the segments kept (waiting
/// would spend the budget for nothing); entering the background or being told to
/// terminate makes a waiting drain look again against the new budget. The uploader's own
/// backoff (no `Retry-After`) never outlasts the grant's time either, and a lifecycle
/// change cuts it short: the collector may be back.
///
/// Uploading periodically in the foreground is a scheduled request's job (the
/// `log-uploader` example's `OvertimeScheduler` request calls ``drain()``).
///
/// All its time is the runtime's: backoffs wait on the runtime's timer and estimates read
/// its clock, so a `ManualClock` drives them.
public final class LogUploader: Sendable {
    /// The runtime whose lifecycle drives uploads.
    public let runtime: Runtime
    /// The spool drained.
    public let spool: Spool
    /// Where segments go.
    public let sink: any LogSink
    /// How it uploads.
    public let configuration: UploaderConfiguration

    private let logger: Logger
    /// The drain's state: the loop's alone (the drain task runs there).
    private let drainState: LoopBound<DrainState>
    /// What other threads read: written by the loop and, for acknowledged segments, by
    /// the acknowledgement queue.
    private let published: Locked<Published>
    private let backoff: BackoffSleep
    /// Where the drain's blocking work runs (sealing, dead letters, each upload's start in
    /// the sink, which may read and encode the segment): a thread of the uploader's own
    /// that sleeps between drains, not Swift's global executor, whose Dispatch pool, once
    /// started, wakes the process every second.
    private let fileQueue = SerialWorkQueue(name: "overtime-upload")
    /// Where acknowledgements are made durable (the checkpoint's fsyncs), beside the
    /// uploads: one thread for the uploader's life, asleep while there is nothing to write.
    private let acknowledgementQueue = SerialWorkQueue(name: "overtime-ack")
    private let metrics: UploaderMetrics

    private struct DrainState {
        var draining: Task<Void, Never>?
        /// A drain was asked for while one ran: the running one seals again and goes on.
        var drainAgain = false
        /// The expected time of one upload, from the recent ones.
        var estimate: Duration
        /// No upload starts before this: the collector's last `Retry-After`.
        var retryNotBefore: MonotonicInstant?
    }

    private struct Published {
        var statistics = UploaderStatistics()
        var isDraining = false
        var token: ObservationToken?
    }

    /// Why a drain stops before the spool is empty.
    private enum Stop {
        case expired
        case outOfTime
        case retryAfterPastTheBudget(Duration)
    }

    /// Creates an uploader; nothing happens until ``start()``.
    public init(
        runtime: Runtime, spool: Spool, sink: any LogSink, configuration: UploaderConfiguration = .init(),
        logger: Logger = Logger(label: "overtime.uploader")
    ) {
        self.runtime = runtime
        self.spool = spool
        self.sink = sink
        self.metrics = UploaderMetrics(sink: sink)
        self.configuration = configuration
        self.logger = logger
        backoff = BackoffSleep(runtime: runtime)
        drainState = LoopBound(
            DrainState(estimate: configuration.initialUploadEstimate), context: runtime.driverContext)
        published = Locked(Published())
    }

    /// Starts observing the lifecycle.
    public func start() {
        let token = runtime.observe { [weak self] event in
            guard let self else { return }
            switch event {
            case .didEnterBackground, .willTerminate:
                self.backoff.wake()  // a drain waiting out a backoff retries now, inside the budget
                // A stop (its didEnterBackground too) with only the program's own lines
                // waiting (its log): they wait for the next run rather than hold the stop (an
                // outage would keep it for the whole budget, for the line that says it stops).
                let stopping = event == .willTerminate || self.runtime.driverContext.snapshot.isTerminating
                if stopping, !self.spool.holdsProducerLines() { return }
                self.drainInGrant(reason: "\(event)")
            default: break
            }
        }
        published.withLock { $0.token = token }
    }

    /// Stops observing; a drain in progress goes on until its grant ends.
    public func stop() {
        published.withLock { state in
            state.token?.cancel()
            state.token = nil
        }
    }

    /// What it has done so far.
    public var statistics: UploaderStatistics { published.withLock { $0.statistics } }

    /// Whether a drain is running.
    public var isDraining: Bool { published.withLock { $0.isDraining } }

    /// Whether a drain waits out a backoff (its timer is on the runtime's loop).
    var isBackingOff: Bool { backoff.isSleeping }
    /// When the wait between retries under way ends, or `nil` (see ``BackoffSleep/sleepsUntil``).
    var backoffEnds: MonotonicInstant? { backoff.sleepsUntil }

    /// Begins a grant now and drains in it. When a drain is already running, that drain
    /// seals the active segment again once it is through and uploads what came meanwhile
    /// (so lines spooled during a termination drain, such as input read to its end, go
    /// out in it). Safe to call from the loop thread (an observer) or any other: the grant
    /// begins at once, the drain starts on the loop.
    public func drainInGrant(reason: String) {
        let drain = LoopBound<Task<Void, Never>?>(nil, context: runtime.driverContext)
        let id = runtime.beginBackgroundTask(name: "log-upload") {
            drain.value?.cancel()  // expiration: abort the uploads in flight
        }
        guard !id.isInvalid else {
            logger.warning("no grant for uploading logs", metadata: ["reason": "\(reason)"])
            return
        }
        let start: @Sendable () -> Void = { [self, runtime] in
            // The drain's spans are the grant's children.
            let started = InstrumentationContext.withValue(runtime.tracing?.context(ofGrant: id)) {
                startDrain(then: { runtime.endBackgroundTask(id) })
            }
            guard let task = started else {
                runtime.endBackgroundTask(id)  // the running drain has its own grant
                return
            }
            drain.value = task
        }
        if runtime.isOnLoopThread {
            start()
        } else if !runtime.driverContext.execute(start) {
            runtime.endBackgroundTask(id)  // the runtime has shut down
        }
    }

    /// Drains inside the caller's grant (a scheduled run's, say) and returns the sealed
    /// segments still in the spool afterwards: 0 when everything sealed was stored or
    /// dead-lettered. Cancelling the calling task aborts the uploads in flight, as an
    /// expiration does. When a drain is already running, it goes round once more for
    /// this call (as ``drainInGrant(reason:)`` asks) and this call waits for it without
    /// cancelling it: that drain belongs to another grant. Once the runtime has shut down
    /// nothing is uploaded (the sinks' transfers run on its loop).
    @discardableResult
    public func drain() async -> Int {
        // Started on the loop, which owns the drain's state, in the caller's context (a
        // scheduled run's span is its segments' parent).
        let context = InstrumentationContext.current
        let started: (task: Task<Void, Never>, ours: Bool)? = await withCheckedContinuation { continuation in
            let start: @Sendable () -> Void = { [self] in
                if let task = InstrumentationContext.withValue(context, operation: { startDrain(then: {}) }) {
                    continuation.resume(returning: (task, true))
                } else {
                    continuation.resume(returning: drainState.value.draining.map { ($0, false) })
                }
            }
            if runtime.isOnLoopThread {
                start()
            } else if !runtime.driverContext.execute(start) {
                continuation.resume(returning: nil)
            }
        }
        if let (task, ours) = started {
            await withTaskCancellationHandler {
                await task.value
            } onCancel: {
                if ours { task.cancel() }
            }
        }
        return spool.sealedSegments.count
    }

    /// Starts a drain on the loop that calls `finished` when it is through; nil when one
    /// is running, which is then asked to seal and go round once more. Loop thread only.
    private func startDrain(then finished: @escaping @Sendable () -> Void) -> Task<Void, Never>? {
        guard drainState.value.draining == nil else {
            drainState.value.drainAgain = true
            return nil
        }
        // The task's first step is queued behind this one, so `draining` is set before it
        // can be cleared.
        let task = Task(executorPreference: runtime.executor) { [self] in
            while true {
                await drainOnce()
                let again = drainState.value.drainAgain && !Task.isCancelled
                drainState.value.drainAgain = false
                if !again { break }
            }
            drainState.value.draining = nil
            published.withLock { $0.isDraining = false }
            finished()
        }
        drainState.value.draining = task
        published.withLock { $0.isDraining = true }
        return task
    }

    /// Uploads sealed segments, oldest first, while time allows.
    ///
    /// Acknowledgements (the checkpoint's fsyncs) run beside the uploads, coalesced by an
    /// ``Acknowledger``; every exit waits for them.
    private func drainOnce() async {
        let acknowledger = Acknowledger(spool: spool, queue: acknowledgementQueue) { [self] segments in
            metrics.stored.increment(by: Int64(segments.count))
            metrics.lines.increment(by: Int64(segments.reduce(0) { $0 + $1.records }))
            metrics.bytes.increment(by: Int64(segments.reduce(0) { $0 + $1.bytes }))
            published.withLock { state in
                state.statistics.uploadedSegments += segments.count
                state.statistics.uploadedLines += segments.reduce(0) { $0 + $1.records }
            }
        }
        await drainSegments(acknowledger)
        if let failure = await acknowledger.finish() {
            noteFailure(failure, segment: nil)
        }
    }

    /// Uploads sealed segments oldest first, up to ``UploaderConfiguration/maximumUploadsInFlight``
    /// undecided at once (as many as the sink takes), deciding on each in spool order
    /// (``UploadWindow`` keeps that account). One still in flight or undecided when the
    /// drain stops is sent again next time (sinks are idempotent).
    private func drainSegments(_ acknowledger: Acknowledger) async {
        do {
            try await onFileQueue { try spool.sealActiveSegment() }
        } catch {
            logger.error("cannot seal the active segment: \(error)")
        }
        var window = UploadWindow(size: min(configuration.maximumUploadsInFlight, sink.concurrentStores))
        var spans = SegmentSpans(tracer: runtime.tracing?.tracer, sink: metrics.sinkKind)
        await withTaskGroup(of: (SealedSegment, UploadOutcome).self) { uploads in
            // Whatever stops this drain, no upload outlives it.
            defer {
                uploads.cancelAll()
                spans.endAll()
            }
            let retry = RetryPolicy(initial: configuration.initialRetryDelay, cap: configuration.maximumRetryDelay)
            var attempt = 0
            var finished = Set<String>()  // paths stored or dead-lettered in this drain
            var outOfTime = false
            while true {
                if Task.isCancelled { return noteExpired() }
                // The checkpoint could not be written: stop; what is not acknowledged is sent again.
                if acknowledger.failure != nil { return }
                switch await waitOutRetryAfter() {
                case nil: break
                case .expired: return noteExpired()
                case .outOfTime: return noteStoppedForTime()
                case .retryAfterPastTheBudget(let wait): return noteStoppedForRetryAfter(wait)
                }
                let waiting = spool.sealedSegments.filter { !finished.contains($0.path) }
                guard let oldest = waiting.first else { return }
                window.align(waitingPaths: Set(waiting.map(\.path)), oldest: oldest.path)
                for segment in window.toStart(waiting, path: \.path) where !outOfTime {
                    guard enoughTime(for: estimate) else {
                        outOfTime = true
                        break
                    }
                    window.started(segment.path)
                    spans.attemptStarted(segment)
                    uploads.addTask(executorPreference: storeExecutor) { [sink, runtime] in
                        let started = runtime.clock.now
                        do throws(SinkError) {
                            try await sink.store(segment)
                            return (segment, .stored(took: runtime.clock.now - started))
                        } catch {
                            return (segment, .failed(error))
                        }
                    }
                }
                var decided = window.takeStored(oldest.path)
                if decided == nil, !window.inFlight.contains(oldest.path) {
                    return noteStoppedForTime()  // not started: too little time left
                }
                // Uploads end in any order; the oldest's outcome decides.
                while decided == nil, let (segment, outcome) = await uploads.next() {
                    switch window.ended(segment.path, outcome, oldest: oldest.path) {
                    case .decide(let outcome): decided = outcome
                    case .kept, .later(nil): break
                    case .later(let error?):
                        noteFailure(error, segment: segment)
                        spans.attemptFailed(segment, "\(error)")
                    }
                }
                guard let outcome = decided else { return }  // unreachable: the oldest was in flight
                switch outcome {
                case .stored(let took):
                    acknowledger.submit(oldest)
                    finished.insert(oldest.path)
                    spans.decided(oldest, "stored")
                    record(took: took)
                    attempt = 0
                case .failed(let error):
                    switch error.code {
                    case .cancelled:
                        return noteExpired()
                    case .permanent:
                        finished.insert(oldest.path)
                        do {
                            try await onFileQueue { try spool.deadLetter(oldest, reason: error.reason) }
                        } catch {
                            noteFailure(error, segment: oldest)
                            continue  // still in the spool: sent again next drain
                        }
                        metrics.deadLettered.increment()
                        spans.decided(oldest, "dead_letter")
                        published.withLock {
                            $0.statistics.deadLetteredSegments += 1
                            $0.statistics.deadLetteredLines += oldest.records
                            $0.statistics.lastError = "\(error)"
                        }
                    default:  // retryable, and any code added later
                        noteFailure(error, segment: oldest)
                        spans.attemptFailed(oldest, "\(error)")
                        if let retryAfter = error.retryAfter {
                            // Waited out at the top of the loop, against whatever budget then runs.
                            let notBefore = runtime.clock.now + retryAfter
                            drainState.value.retryNotBefore = max(
                                drainState.value.retryNotBefore ?? notBefore, notBefore)
                            continue
                        }
                        var delay = retry.delay(attempt: attempt)
                        attempt += 1
                        // Never wait past the last moment one more upload still fits.
                        if let left = timeBeforeExpiration() {
                            guard left > estimate else { return noteStoppedForTime() }
                            delay = min(delay, left - estimate)
                        }
                        // Younger uploads go on meanwhile; they are decided after this one.
                        if await backoff.sleep(for: delay) {
                            if Task.isCancelled { return noteExpired() }
                            attempt = 0  // woken by a lifecycle change: the collector may be back
                        }
                    }
                }
            }
        }
    }

    private var estimate: Duration { drainState.value.estimate }

    /// Where an upload calls its sink: the loop for a sink that never blocks it, the file
    /// queue for any other (a program's own sink may do blocking I/O).
    private var storeExecutor: any TaskExecutor {
        sink is any NonBlockingLogSink ? runtime.executor : fileQueue
    }

    /// Runs blocking file work on the uploader's file queue, off the loop.
    private func onFileQueue(_ work: () throws -> Void) async throws {
        try await withTaskExecutorPreference(fileQueue) { try work() }
    }

    /// Waits until the collector's `Retry-After` has passed; `nil` then (or when none is
    /// pending). Stops instead when it ends past the last moment one more upload fits, or
    /// the grant expired. Woken early by a lifecycle change, it looks again against the
    /// budget that now runs.
    private func waitOutRetryAfter() async -> Stop? {
        while let notBefore = drainState.value.retryNotBefore {
            let wait = notBefore - runtime.clock.now
            guard wait > .zero else {
                drainState.value.retryNotBefore = nil
                return nil
            }
            if let left = timeBeforeExpiration() {
                guard left > estimate else { return .outOfTime }
                if wait > left - estimate { return .retryAfterPastTheBudget(wait) }
            }
            if await backoff.sleep(for: wait), Task.isCancelled { return .expired }
        }
        return nil
    }

    /// Whether `needed` fits before the expiration point of the current budget.
    private func enoughTime(for needed: Duration) -> Bool {
        timeBeforeExpiration().map { $0 > needed } ?? true
    }

    /// What a decision for want of time was made on: the time before the expiration
    /// handlers run (which is what an upload must fit in), the lead time that is short of
    /// the deadline, and the estimate of one upload.
    private func timeMetadata() -> Logger.Metadata {
        [
            "before-expiration": "\(timeBeforeExpiration().map { "\($0)" } ?? "unlimited")",
            "lead": "\(runtime.configuration.expirationLeadTime)", "estimate": "\(estimate)",
        ]
    }

    /// Time left before the expiration point of the current budget; nil in the foreground.
    private func timeBeforeExpiration() -> Duration? {
        runtime.timeBeforeExpiration
    }

    private func record(took duration: Duration) {
        metrics.duration.recordNanoseconds(duration.saturatingNanoseconds)
        // Weighted toward the recent, so a slower collector raises the estimate quickly.
        drainState.value.estimate = drainState.value.estimate * 0.5 + duration * 0.5
    }

    private func noteFailure(_ error: any Error, segment: SealedSegment?) {
        metrics.failures.increment()
        logger.warning(
            "upload failed: \(error)", metadata: ["segment": "\(segment?.name ?? "-")", "sink": "\(sink)"])
        published.withLock {
            $0.statistics.failedAttempts += 1
            $0.statistics.lastError = "\(error)"
        }
    }

    private func noteStoppedForTime() {
        logger.notice(
            "not starting another upload: it would not end before the expiration handlers run (the deadline less the lead time)",
            metadata: timeMetadata())
        published.withLock { $0.statistics.stoppedForTime += 1 }
    }

    private func noteStoppedForRetryAfter(_ wait: Duration) {
        logger.notice(
            "not starting another upload: the collector asked to wait past the last moment one fits (Retry-After); the segments stay for the next drain",
            metadata: timeMetadata().merging(["wait": "\(wait)"]) { $1 })
        published.withLock { $0.statistics.stoppedForTime += 1 }
    }

    private func noteExpired() {
        logger.notice("upload aborted: the grant expired; the checkpoint stays")
        published.withLock { $0.statistics.expiredDrains += 1 }
    }
}
