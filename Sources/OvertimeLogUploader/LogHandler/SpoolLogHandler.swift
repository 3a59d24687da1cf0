import CoreMetrics
import Logging
import Overtime

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A swift-log `LogHandler` that writes into a ``Spool`` without ever blocking the
/// logging thread on disk I/O.
///
/// ```swift
/// let spool = try Spool(directory: "/var/lib/my-daemon/logs")
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
        writer.submit(Array(line.utf8).map { $0 == UInt8(ascii: "\n") ? UInt8(ascii: " ") : $0 })
    }

}

/// The queue and writer thread between log calls and a ``Spool``.
public final class SpoolLogWriter: Sendable {
    /// The spool written to.
    public let spool: Spool
    /// The most lines waiting in memory; beyond it lines are dropped and counted.
    public let capacity: Int

    private struct State {
        var queue: [[UInt8]] = []
        var dropped = 0
        var inFlight = false
        /// The writer thread, once it runs.
        var writerThread: pthread_t?
    }

    private let state = Locked(State())
    private let droppedCounter = Counter(label: "overtime_spool_handler_dropped_lines_total")

    /// A writer with its own thread, for the life of the process: make one per spool.
    public init(spool: Spool, capacity: Int = 100_000) {
        self.spool = spool
        self.capacity = capacity
        spawnWriterThread()
    }

    /// Queues a line; never blocks on I/O. A line logged by the writer's own append (the
    /// spool reporting that it cannot write) is not queued: it would fail the same way and
    /// be reported again, a loop that never ends. Other handlers (stderr) still have it.
    public func submit(_ line: [UInt8]) {
        let accepted = state.withLock { state -> Bool in
            if let writer = state.writerThread, pthread_equal(writer, pthread_self()) != 0 { return true }
            guard state.queue.count < capacity else {
                state.dropped += 1
                return false
            }
            state.queue.append(line)
            if state.queue.count == 1 { self.state.broadcast() }
            return true
        }
        if !accepted { droppedCounter.increment() }
    }

    /// Blocks until every line submitted before the call is in the spool (or failed).
    public func flush() {
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
                try writer.spool.append(batch)
            } catch {
                // Not through swift-log: that could loop back into this handler.
                let text = "overtime: spool append of \(batch.count) log lines failed: \(error)\n"
                _ = text.withCString { write(STDERR_FILENO, $0, strlen($0)) }
            }
        }
    }
}
