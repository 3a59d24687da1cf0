import CoreMetrics
import Logging
import Overtime
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A swift-log `LogHandler` that writes into a ``Spool`` without ever blocking the
/// logging thread on disk I/O.
///
/// ```swift
/// let spool = try Spool(directory: "/var/lib/my-daemon/logs", clock: SystemClock())
/// let writer = SpoolLogWriter(spool: spool)
/// LoggingSystem.bootstrap { label in SpoolLogHandler(label: label, writer: writer) }
/// ```
///
/// Each log call formats one line and hands it to an in-memory queue; the writer's one
/// thread appends queued lines in batches (group commit). Make one writer per spool and
/// share it between handlers. If the queue holds
/// ``SpoolLogWriter/capacity`` lines (the disk stalls, the quota blocks), further lines
/// are dropped and counted (`overtime_spool_handler_dropped_lines_total`), and the count
/// is written into the spool as soon as there is room again: no silent loss.
public struct SpoolLogHandler: LogHandler {
    /// The logger's label.
    public let label: String
    /// Where the lines go.
    public let writer: SpoolLogWriter
    /// Handler metadata, merged under each call's metadata.
    public var metadata: Logger.Metadata = [:]
    /// The lowest level written. Default `.info`.
    public var logLevel: Logger.Level = .info

    /// A handler for `label` writing through `writer`.
    public init(label: String, writer: SpoolLogWriter) {
        self.label = label
        self.writer = writer
    }

    /// Reads or writes one metadata value.
    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// Formats the event as one line and queues it; returns at once.
    public func log(event: LogEvent) {
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        var line = "\(writer.spool.clock.wallClockNow) \(event.level) \(label): \(event.message)"
        if !merged.isEmpty {
            line += " " + merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        }
        // One record is one line: newlines inside a message would split it for readers.
        let bytes = Array(line.utf8).map { $0 == UInt8(ascii: "\n") ? UInt8(ascii: " ") : $0 }
        // The same message again (its time aside) is counted, not spooled again.
        let repeatKey = line.drop { $0 != " " }
        writer.submit(bytes, repeatKey: "\(label)\(repeatKey)")
    }

}

/// The queue and writer thread between log calls and a ``Spool``.
///
/// A program's own log must not flood the spool it uploads (a signal sent ten thousand
/// times, a retry warning per attempt): a message repeated as is (its time aside) is
/// counted and written once more as "… repeated N times" when another message comes (or at
/// ``flush()``); beyond ``linesPerSecond`` (a burst of as many allowed) lines are counted
/// and the count written once lines are allowed again. Nothing is dropped silently, and no
/// timer wakes the program to say so.
public final class SpoolLogWriter: Sendable {
    /// The spool written to.
    public let spool: Spool
    /// The most lines waiting in memory; beyond it lines are dropped and counted.
    public let capacity: Int
    /// The most lines a second that go to the spool (after repeats are counted).
    public let linesPerSecond: Int

    private struct State {
        var queue: [[UInt8]] = []
        var dropped = 0
        var inFlight = false
        /// The writer thread, once it runs.
        var writerThread: pthread_t?
        /// The last message's key, and how often it came again since it was queued.
        var lastKey: String?
        var repeats = 0
        /// Lines allowed now (refilled at `linesPerSecond`), and when last refilled.
        var allowance: Double
        var refilled: MonotonicInstant?
        /// Lines beyond the rate since the last one allowed.
        var overRate = 0
        /// Lines submitted after ``stopSpooling()``.
        var stopped = false
    }

    private let state: Locked<State>
    private let droppedCounter = Counter(label: "overtime_spool_handler_dropped_lines_total")

    /// A writer with its own thread, for the life of the process: make one per spool.
    public init(spool: Spool, capacity: Int = 100_000, linesPerSecond: Int = 100) {
        self.spool = spool
        self.capacity = capacity
        self.linesPerSecond = max(1, linesPerSecond)
        state = Locked(State(allowance: Double(max(1, linesPerSecond))))
        spawnWriterThread()
    }

    /// Lines submitted from now on are not spooled (other handlers, stderr, still have
    /// them): a daemon's stop must not leave its own stop messages behind to upload. What
    /// was submitted before still goes in (``flush()`` waits for it).
    public func stopSpooling() {
        state.withLock { state in
            queueCounts(&state)
            state.stopped = true
            if !state.queue.isEmpty { self.state.broadcast() }
        }
    }

    /// Queues a line unless it repeats the last one (same `repeatKey`) or comes beyond
    /// the rate; both are counted and said later.
    func submit(_ line: [UInt8], repeatKey: String) {
        let now = spool.clock.now
        let accepted = state.withLock { state -> Bool in
            if state.stopped { return true }
            if let writer = state.writerThread, pthread_equal(writer, pthread_self()) != 0 { return true }
            if repeatKey == state.lastKey {
                state.repeats += 1
                return true
            }
            // Refill, then take one: at most `linesPerSecond` a second, bursts as large.
            if let last = state.refilled {
                let refill = (now - last).secondsValue * Double(linesPerSecond)
                state.allowance = min(Double(linesPerSecond), state.allowance + refill)
            }
            state.refilled = now
            guard state.allowance >= 1 else {
                state.overRate += 1
                return true
            }
            state.allowance -= 1
            queueCounts(&state)
            state.lastKey = repeatKey
            return enqueue(line, &state)
        }
        if !accepted { droppedCounter.increment() }
    }

    /// Queues what was counted since the last line: repeats of it, lines over the rate;
    /// stamped and levelled as every other line (`<time> notice overtime: …`).
    private func queueCounts(_ state: inout State) {
        guard state.repeats > 0 || state.overRate > 0 else { return }
        let stamp = "\(spool.clock.wallClockNow) notice overtime:"
        if state.repeats > 0 {
            let times = state.repeats == 1 ? "1 more time" : "\(state.repeats) more times"
            state.queue.append(Array("\(stamp) the previous log message repeated \(times)".utf8))
            state.repeats = 0
        }
        if state.overRate > 0 {
            let lines = state.overRate == 1 ? "1 log line" : "\(state.overRate) log lines"
            state.queue.append(Array("\(stamp) \(lines) not spooled: more than the rate allowed".utf8))
            state.overRate = 0
        }
    }

    private func enqueue(_ line: [UInt8], _ state: inout State) -> Bool {
        guard state.queue.count < capacity else {
            state.dropped += 1
            return false
        }
        state.queue.append(line)
        if state.queue.count == 1 { self.state.broadcast() }
        return true
    }

    /// Queues a line; never blocks on I/O. A line logged by the writer's own append (the
    /// spool reporting that it cannot write) is not queued: it would fail the same way and
    /// be reported again, a loop that never ends. Other handlers (stderr) still have it.
    public func submit(_ line: [UInt8]) {
        let accepted = state.withLock { state -> Bool in
            if state.stopped { return true }
            if let writer = state.writerThread, pthread_equal(writer, pthread_self()) != 0 { return true }
            return enqueue(line, &state)
        }
        if !accepted { droppedCounter.increment() }
    }

    /// Blocks until every line submitted before the call is in the spool (or failed),
    /// repeats and lines over the rate counted so far among them.
    public func flush() {
        state.withLock { state in
            if !state.stopped {
                queueCounts(&state)
                state.lastKey = nil
            }
            if !state.queue.isEmpty { self.state.broadcast() }
        }
        state.withLock(waitingUntil: { $0.queue.isEmpty && !$0.inFlight }) { _, _ in }
    }

    /// Lines dropped because the queue was full.
    public var droppedLines: Int { state.withLock { $0.dropped } }

    private func spawnWriterThread() {
        let thread = WriterThread(writer: self)
        spawnThread(name: "spool-writer") { thread.run() }
    }

    fileprivate func writerStarted() {
        state.withLock { $0.writerThread = pthread_self() }
    }

    fileprivate func nextBatch() -> [[UInt8]] {
        state.withLock { state in
            state.inFlight = false
            self.state.broadcast()
        }
        return state.withLock(waitingUntil: { !$0.queue.isEmpty }) { state, _ in
            var batch: [[UInt8]] = []
            swap(&batch, &state.queue)
            if state.dropped > 0 {
                batch.append(Array("overtime: \(state.dropped) log lines dropped: the spool writer fell behind".utf8))
                state.dropped = 0
            }
            state.inFlight = true
            return batch
        }
    }
}

/// The writer thread's body: takes batches and appends them.
private final class WriterThread: Sendable {
    let writer: SpoolLogWriter  // strong: the thread runs for the life of the process

    init(writer: SpoolLogWriter) {
        self.writer = writer
    }

    func run() {
        writer.writerStarted()
        while true {
            let batch = writer.nextBatch()
            do throws(SpoolError) {
                try writer.spool.append(ownLines: batch)
            } catch {
                // Not through swift-log: that could loop back into this handler.
                let text = "overtime: spool append of \(batch.count) log lines failed: \(error)\n"
                _ = text.withCString { write(STDERR_FILENO, $0, strlen($0)) }
            }
        }
    }
}
