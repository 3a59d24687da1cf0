import CoreMetrics
import Logging
import Overtime
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A crash-safe, append-only spool of log lines: CRC-framed segment files in one folder.
///
/// ```
/// <directory>/lock                 held (flock) by the one process using the spool
/// <directory>/checkpoint           the stream's ID, last acknowledged segment and sequence
///                                  (two checksummed slots, written in place)
/// <directory>/segments/<n>.open    the active segment (at most one)
/// <directory>/segments/<n>.seg     sealed segments: never change, uploaded byte for byte
/// <directory>/resend/              sealed segments outside the checkpoint's numbering, to
///                                  upload again: an earlier stream's, redriven dead letters
/// <directory>/dead-letter/         segments a collector refused for good (until redriven)
/// <directory>/quarantine/          files found that were not valid segments or checkpoints
/// ```
///
/// Appends are group-committed: concurrent writers' lines go out in one `write` and one
/// `fdatasync`, and each writer returns once its lines are durable. An append that
/// returned is never lost; an append that threw stored nothing of its own lines.
///
/// Thread-safe; the writing happens on the appending threads themselves.
public final class Spool: Sendable {
    /// The spool's folder.
    public let directory: String
    /// The ID every new segment of this spool carries. A new one is made when the
    /// checkpoint cannot prove the numbering (see ``RecoveryReport/startedNewStream``).
    package let streamID: StreamID
    /// The configuration it was opened with.
    public let configuration: SpoolConfiguration
    /// What opening it found and repaired.
    public let recovery: RecoveryReport
    /// The clock records are stamped with (wall clock) and segments aged by (monotonic).
    public let clock: any RuntimeClock
    /// Where its files are: on disk, or on a volume in memory.
    let files: SpoolFiles

    let state: Locked<State>
    /// Serializes acknowledgements and dead-lettering (the checkpoint moves in order);
    /// owns the checkpoint file and counts its writes.
    let retiring: Locked<Retiring>
    let lock: SpoolLock
    let logger: Logger
    let counters: SpoolCounters
    /// Records the levels when metrics are collected; set once the spool is open.
    private let levelSampler = Locked<MetricSamplerRegistration?>(nil)
    /// Called after every durable append (``onAppend(_:)``).
    let appendObservers = Locked<[@Sendable () -> Void]>([])
    var segmentsDirectory: String { directory + "/segments" }

    /// Calls `body` after every append, once its lines are durable, on the appending
    /// thread: for a program that wakes only when there is something to upload (it
    /// schedules an upload on the first line after an empty spool). Keep it cheap.
    public func onAppend(_ body: @escaping @Sendable () -> Void) {
        appendObservers.withLock { $0.append(body) }
    }

    /// Opens (creating if needed) the spool in `directory` and recovers it: torn tails are
    /// cut back to the last valid record, an active segment left by a crash is sealed.
    ///
    /// - Throws: ``SpoolError/locked(path:holder:)`` at once when another process has the
    ///   spool open; an I/O error when the folder cannot be made or read.
    ///
    /// `clock` is the runtime's (`runtime.clock`): segments age, and lines are stamped, on
    /// the same clock as the uploader's grants and schedules, so a `ManualClock` drives them
    /// all in tests. A program that opens its spool before its runtime passes the clock it
    /// will give the runtime (`SystemClock()` by default).
    ///
    /// `storage` is the disk unless a test passes ``SpoolStorage/memory(_:)``: the same
    /// spool on files in memory, with nothing to wait for.
    public init(
        directory: String, configuration: SpoolConfiguration = SpoolConfiguration(),
        clock: any RuntimeClock, storage: SpoolStorage = .disk, logger: Logger = Logger(label: "overtime.spool")
    ) throws(SpoolError) {
        try configuration.validate()
        self.directory = directory
        self.clock = clock
        let files = storage.files
        self.files = files
        self.configuration = configuration
        self.logger = logger
        self.counters = SpoolCounters()
        try files.refuseForeignFolder(directory)
        try files.makeDirectories(directory)
        lock = try SpoolLock(directory: directory, files: files)
        let folders = ["segments", "resend", "dead-letter", "quarantine"]
        let foldersExisted = folders.contains { files.size(directory + "/" + $0) != nil }
        for folder in folders {
            try files.makeDirectory(directory + "/" + folder)
        }
        var report = RecoveryReport()
        let recovered = try SpoolRecovery(directory: directory, files: files, logger: logger).run(
            &report, usedBefore: lock.wasHeldBefore || foldersExisted)
        recovery = report
        streamID = recovered.stream
        retiring = Locked(Retiring(checkpoint: recovered.checkpoint))
        state = Locked(
            State(
                nextSequence: recovered.lastSequence + 1, nextSegment: recovered.lastSegment + 1,
                sealed: recovered.sealed, resend: recovered.resend,
                storedBytes: (recovered.sealed + recovered.resend).reduce(0) { $0 + $1.bytes },
                acknowledged: recovered.checkpoint.record.checkpoint))
        // Sampled without waiting: a collection that finds the spool sealing (which syncs
        // under its lock) keeps the levels it recorded last.
        let levels = SpoolLevels()
        let sampler = MetricSamplers.add { [weak self] in
            _ = self?.state.withLockIfFree { levels.record($0) }
        }
        levelSampler.withLock { $0 = sampler }
        let lostBytes = report.truncations.reduce(0) { $0 + $1.droppedBytes }
        if !report.isClean, lostBytes == 0, report.quarantined.isEmpty {
            // A checkpoint rebuilt or a segment closed where it ended: repaired, nothing lost.
            logger.notice(
                "spool repaired at open; no line lost",
                metadata: ["checkpoint": "\(report.checkpointDamage ?? "intact")"])
        } else if !report.isClean {
            logger.error(
                "spool recovered with losses: \(lostBytes) bytes cut, \(report.quarantined.count) files quarantined",
                metadata: [
                    "truncated": "\(report.truncations.map { "\($0.path): \($0.problem), \($0.droppedBytes) bytes" })",
                    "quarantined": "\(report.quarantined)",
                    "checkpoint": "\(report.checkpointDamage ?? "intact")",
                ])
        }
    }

    /// Opens the spool on a clock of its own.
    @available(*, deprecated, message: "pass the runtime's clock: Spool(directory:configuration:clock: runtime.clock)")
    public convenience init(
        directory: String, configuration: SpoolConfiguration = SpoolConfiguration(),
        logger: Logger = Logger(label: "overtime.spool")
    ) throws(SpoolError) {
        try self.init(directory: directory, configuration: configuration, clock: SystemClock(), logger: logger)
    }

    deinit {
        state.withLock { state in
            if let active = state.active { files.close(active.fd) }
        }
    }

    /// Lines spooled and not yet acknowledged (sealed and active).
    public var pendingLines: Int {
        state.withLock { state in
            (state.resend + state.sealed).reduce(0) { $0 + $1.records } + (state.active?.records ?? 0)
        }
    }

    /// How many times the checkpoint file was written (acknowledgements share writes).
    var checkpointWrites: Int { retiring.withLock { $0.writes } }

    /// The last checkpoint: the highest acknowledged segment and sequence.
    package var checkpoint: Checkpoint { state.withLock { $0.acknowledged } }

    /// Lines appended (durably) since the spool was opened.
    public var appendedLines: Int { state.withLock { $0.appendedLines } }

    /// Lines deleted by the ``SpoolConfiguration/QuotaPolicy/dropOldest`` policy so far.
    public var droppedLines: Int { state.withLock { $0.droppedLines } }

    struct Active {
        let number: UInt64
        let fd: Int32
        let path: String
        var size: Int
        let openedAt: MonotonicInstant
        var records: Int
        var firstSequence: UInt64
        var lastSequence: UInt64
        /// When its first line was spooled (as ``SealedSegment/firstLineTime``).
        var firstLineTime: UInt64 = 0
        /// Its records that are a producer's, not the program's own.
        var producerRecords = 0
    }

    struct Retiring {
        let checkpoint: CheckpointFile
        var writes = 0
    }

    struct State {
        var nextSequence: UInt64
        var nextSegment: UInt64
        var active: Active?
        /// The current stream's sealed segments, by number.
        var sealed: [SealedSegment]
        /// Sealed segments outside the checkpoint's numbering, uploaded first.
        var resend: [SealedSegment]
        var pending: [UInt8] = []
        var pendingRecords = 0
        /// Of ``pendingRecords``, those a producer's (not the program's own).
        var pendingProducerRecords = 0
        /// When the first line of ``pending`` was spooled.
        var pendingFirstTime: UInt64 = 0
        /// The last batch handed to a writer, and the last one finished (written or failed).
        var issuedTicket: UInt64 = 0
        var durableTicket: UInt64 = 0
        var failures: [UInt64: SpoolError] = [:]
        /// The numbers failed batches gave back (the stream has no gaps), and when each
        /// batch went to the writer: how far each appender's numbers moved down.
        var giveBacks = SequenceGiveBacks()
        /// By ticket: how many appenders have not yet read its outcome. Its failure and its
        /// issue in ``giveBacks`` are kept until the last has: an appender that wakes late (a
        /// loaded machine) must still find them, however many batches went on meanwhile.
        var waiters: [UInt64: Int] = [:]
        var writing = false
        var storedBytes: Int
        var acknowledged: Checkpoint
        var droppedLines = 0
        var appendedLines = 0
    }
}
