import CoreMetrics
import Logging
import Overtime

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
    public let streamID: StreamID
    /// The configuration it was opened with.
    public let configuration: SpoolConfiguration
    /// What opening it found and repaired.
    public let recovery: RecoveryReport

    private let state: Locked<State>
    /// Serializes acknowledgements and dead-lettering (the checkpoint moves in order);
    /// owns the checkpoint file and counts its writes.
    private let retiring: Locked<Retiring>
    private let lock: SpoolLock
    private let logger: Logger
    private let counters: SpoolCounters
    var segmentsDirectory: String { directory + "/segments" }

    /// Opens (creating if needed) the spool in `directory` and recovers it: torn tails are
    /// cut back to the last valid record, an active segment left by a crash is sealed.
    ///
    /// - Throws: ``SpoolError/locked(path:holder:)`` at once when another process has the
    ///   spool open; an I/O error when the folder cannot be made or read.
    public init(
        directory: String, configuration: SpoolConfiguration = SpoolConfiguration(),
        logger: Logger = Logger(label: "overtime.spool")
    ) throws(SpoolError) {
        try configuration.validate()
        self.directory = directory
        self.configuration = configuration
        self.logger = logger
        self.counters = SpoolCounters()
        try SpoolFiles.makeDirectories(directory)
        lock = try SpoolLock(directory: directory)
        for folder in ["segments", "resend", "dead-letter", "quarantine"] {
            try SpoolFiles.makeDirectory(directory + "/" + folder)
        }
        var report = RecoveryReport()
        let recovered = try SpoolRecovery(directory: directory, logger: logger).run(&report)
        recovery = report
        streamID = recovered.stream
        retiring = Locked(Retiring(checkpoint: recovered.checkpoint))
        state = Locked(
            State(
                nextSequence: recovered.lastSequence + 1, nextSegment: recovered.lastSegment + 1,
                sealed: recovered.sealed, resend: recovered.resend,
                storedBytes: (recovered.sealed + recovered.resend).reduce(0) { $0 + $1.bytes },
                acknowledged: recovered.checkpoint.record.checkpoint))
        if !report.isClean {
            logger.error(
                "spool recovered with losses",
                metadata: [
                    "truncated": "\(report.truncations.map { "\($0.path): \($0.problem), \($0.droppedBytes) bytes" })",
                    "quarantined": "\(report.quarantined)",
                    "checkpoint": "\(report.checkpointDamage ?? "intact")",
                ])
        }
    }

    deinit {
        state.withLock { state in
            if let active = state.active { close(active.fd) }
        }
    }

    // MARK: Appending

    /// Appends `lines` and returns their sequence numbers once they are durable (as the
    /// configured ``SpoolConfiguration/Durability`` defines it).
    ///
    /// - Throws: ``SpoolError/lineTooLong(bytes:)`` (nothing appended),
    ///   ``SpoolError/quotaExceeded(quotaBytes:neededBytes:)``, or an I/O error such as a
    ///   full disk (``SpoolError/isDiskFull``), after which the segment is cut back to its
    ///   last durable record.
    @discardableResult
    public func append<Line: Collection<UInt8>>(_ lines: [Line]) throws(SpoolError) -> ClosedRange<UInt64>? {
        // Generic code called from another module runs unspecialized (a witness call per
        // byte); the work happens in the concrete overload below.
        if let arrays = lines as? [[UInt8]] { return try append(arrays) }
        return try append(lines.map { Array($0) })
    }

    /// Appends `lines` and returns their sequence numbers once they are durable, like the
    /// generic `append(_:)`; the overload arrays of bytes take.
    @discardableResult
    public func append(_ lines: [[UInt8]]) throws(SpoolError) -> ClosedRange<UInt64>? {
        guard !lines.isEmpty else { return nil }
        if let long = lines.first(where: { $0.count > SegmentFormat.maximumLineBytes }) {
            throw .lineTooLong(bytes: long.count)
        }
        var encoded: [UInt8] = []
        encoded.reserveCapacity(lines.reduce(0) { $0 + $1.count + SegmentFormat.frameSize + 16 })
        let time = Self.wallClockNanoseconds()
        let needed = lines.reduce(0) { $0 + $1.count + SegmentFormat.frameSize + SegmentFormat.bodyPrefixSize }
        let quota = configuration.quotaBytes
        var roomTimeout: Double?
        if case .blockWriter(let timeout) = configuration.quotaPolicy {
            roomTimeout = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        }
        let (range, ticket, lead) = try state.withLock(
            // Only a blocking quota waits for room (acknowledgements make it).
            waitingUntil: { roomTimeout == nil || $0.storedBytes + needed <= quota }, timeout: roomTimeout
        ) { (state, _) throws(SpoolError) in
            try makeRoom(&state, needed: needed)
            let first = state.nextSequence
            for line in lines {
                SegmentFormat.appendRecord(sequence: state.nextSequence, time: time, line: line, to: &encoded)
                state.nextSequence += 1
            }
            state.pending += encoded
            state.pendingRecords += lines.count
            state.storedBytes += encoded.count
            let lead = !state.writing
            state.writing = true
            return (first...(state.nextSequence - 1), state.issuedTicket + 1, lead)
        }
        if lead { writeBatches() }
        try state.withLock(waitingUntil: { $0.durableTicket >= ticket }) { (state, _) throws(SpoolError) in
            if let error = state.failures[ticket] { throw error }
        }
        counters.appended.increment(by: Int64(lines.count))
        state.withLock { $0.appendedLines += lines.count }
        return range
    }

    /// Appends one line.
    @discardableResult
    public func append(_ line: String) throws(SpoolError) -> UInt64 {
        try append([Array(line.utf8)])!.lowerBound
    }

    /// The leader's loop: writes what is pending, batch after batch, until nothing is.
    private func writeBatches() {
        while true {
            let work = state.withLock { (state: inout State) -> Batch? in
                guard !state.pending.isEmpty else {
                    state.writing = false
                    self.state.broadcast()
                    return nil
                }
                do throws(SpoolError) {
                    try rotateIfDue(&state, incoming: state.pending.count)
                    try openActiveIfNeeded(&state)
                } catch {
                    // The batch cannot be placed: fail its writers, keep nothing of it.
                    failPending(&state, error)
                    return Batch(bytes: [], ticket: 0, fd: -1, path: "", size: 0, records: 0, lastSequence: 0)
                }
                let active = state.active!
                state.issuedTicket += 1
                var bytes: [UInt8] = []
                swap(&bytes, &state.pending)
                defer { state.pendingRecords = 0 }
                return Batch(
                    bytes: bytes, ticket: state.issuedTicket, fd: active.fd, path: active.path, size: active.size,
                    records: state.pendingRecords, lastSequence: state.nextSequence - 1)
            }
            guard let work else { return }
            guard work.fd >= 0 else { continue }
            var failure: SpoolError?
            do throws(SpoolError) {
                try SpoolFiles.writeAll(work.fd, work.bytes, path: work.path)
                if configuration.durability == .syncEachBatch { try SpoolFiles.sync(work.fd, path: work.path) }
            } catch {
                failure = error
                // Cut the segment back to its last durable record, so it stays valid.
                _ = ftruncate(work.fd, off_t(work.size))
                _ = lseek(work.fd, off_t(work.size), SEEK_SET)
            }
            state.withLock { state in
                if let failure {
                    state.failures[work.ticket] = failure
                    state.storedBytes -= work.bytes.count
                    counters.writeErrors.increment()
                    logger.error("spool write failed: \(failure)")
                } else if var active = state.active {
                    // A batch holds consecutive sequences; a failed one before it leaves a gap.
                    if active.records == 0 { active.firstSequence = work.lastSequence - UInt64(work.records) + 1 }
                    active.size += work.bytes.count
                    active.records += work.records
                    active.lastSequence = work.lastSequence
                    state.active = active
                }
                state.durableTicket = work.ticket
                if state.failures.count > 64 { state.failures = state.failures.filter { $0.key + 32 > work.ticket } }
                self.state.broadcast()
            }
        }
    }

    private func failPending(_ state: inout State, _ error: SpoolError) {
        state.issuedTicket += 1
        state.failures[state.issuedTicket] = error
        state.durableTicket = state.issuedTicket
        state.storedBytes -= state.pending.count
        state.pending = []
        state.pendingRecords = 0
        counters.writeErrors.increment()
        logger.error("spool write failed: \(error)")
        self.state.broadcast()
    }

    // MARK: Segments

    /// Seals the active segment if it holds any record, so that everything spooled so far
    /// can be uploaded. Waits for a write in progress to finish first.
    public func sealActiveSegment() throws(SpoolError) {
        try state.withLock(waitingUntil: { !$0.writing }) { (state, _) throws(SpoolError) in
            try seal(&state)
        }
    }

    /// Sealed segments not yet acknowledged: those to send again first (see
    /// ``redriveDeadLetters()``), then the current stream's, oldest first.
    public var sealedSegments: [SealedSegment] {
        state.withLock { $0.resend + $0.sealed }
    }

    /// Marks `segment` as stored by the collector: the checkpoint moves past it (written in
    /// place, made durable) and then the file is deleted. Needs no free disk space, so a
    /// spool that filled its file system drains itself.
    public func acknowledge(_ segment: SealedSegment) throws(SpoolError) {
        try retire([segment], moveTo: nil)
    }

    /// Marks several stored segments at once: one checkpoint write (two fsyncs) for all.
    public func acknowledge(_ segments: [SealedSegment]) throws(SpoolError) {
        guard !segments.isEmpty else { return }
        try retire(segments, moveTo: nil)
    }

    /// Moves `segment`, which a collector refused for good, to the dead-letter folder, and
    /// moves the checkpoint past it.
    public func deadLetter(_ segment: SealedSegment, reason: String) throws(SpoolError) {
        try retire([segment], moveTo: directory + "/dead-letter/" + segment.resendFileName)
        counters.deadLettered.increment()
        logger.error(
            "segment moved to dead-letter; `log-uploader redrive` (or Spool.redriveDeadLetters()) sends it again",
            metadata: ["segment": "\(segment.name)", "reason": "\(reason)"])
    }

    /// Segments in the dead-letter folder now.
    public var deadLetterCount: Int {
        ((try? SpoolFiles.list(directory + "/dead-letter")) ?? []).filter { $0.hasSuffix(".seg") }.count
    }

    /// Moves every dead-lettered segment back into the upload queue (ahead of the current
    /// stream's segments), under its own name, and returns how many. Files in the folder
    /// that are not valid segments stay there and are named in the log.
    @discardableResult
    public func redriveDeadLetters() throws(SpoolError) -> Int {
        let folder = directory + "/dead-letter"
        return try retiring.withLock { (_) throws(SpoolError) -> Int in
            var moved: [SealedSegment] = []
            for name in try SpoolFiles.list(folder) where name.hasSuffix(".seg") {
                let path = folder + "/" + name
                let parsed = SegmentFormat.parse(try SpoolFiles.readAll(path))
                let target = parsed.streamID.flatMap { stream in
                    parsed.segment.map {
                        directory + "/resend/" + SegmentName.resendFileName(stream: stream, segment: $0)
                    }
                }
                guard parsed.problem == nil, let target, let segment = SealedSegment(parsed: parsed, at: target) else {
                    logger.error(
                        "not redriven: not a valid segment",
                        metadata: ["path": "\(path)", "problem": "\(parsed.problem ?? "empty")"])
                    continue
                }
                guard SpoolFiles.size(target) == nil else { continue }  // already queued
                if rename(path, target) != 0 { throw .io(operation: "rename", path: path, errno: errno) }
                moved.append(segment)
            }
            guard !moved.isEmpty else { return 0 }
            try SpoolFiles.syncDirectory(directory + "/resend")
            state.withLock { state in
                state.resend += moved
                state.storedBytes += moved.reduce(0) { $0 + $1.bytes }
            }
            counters.redriven.increment(by: Int64(moved.count))
            logger.notice("dead letters redriven", metadata: ["segments": "\(moved.count)"])
            return moved.count
        }
    }

    private func retire(_ segments: [SealedSegment], moveTo destination: String?) throws(SpoolError) {
        // One retirement at a time, and the checkpoint's fsyncs outside the state lock:
        // appends go on while it is made durable.
        try retiring.withLock { (retiring: inout Retiring) throws(SpoolError) in
            let checkpoint: Checkpoint? = state.withLock { state in
                // Dropped by the quota meanwhile: nothing left to do for those. Segments to
                // send again are outside the numbering: they never move the checkpoint.
                let present = segments.filter { segment in state.sealed.contains { $0.path == segment.path } }
                guard !present.isEmpty else { return nil }
                return Checkpoint(
                    segment: max(state.acknowledged.segment, present.map(\.number).max()!),
                    sequence: max(state.acknowledged.sequence, present.map(\.lastSequence).max()!))
            }
            if let checkpoint {
                try retiring.checkpoint.write(checkpoint)
                retiring.writes += 1
            }
            try state.withLock { (state) throws(SpoolError) in
                if let checkpoint { state.acknowledged = checkpoint }
                for segment in segments {
                    // The quota may have dropped (and deleted) it while the checkpoint was written.
                    if let index = state.resend.firstIndex(where: { $0.path == segment.path }) {
                        state.resend.remove(at: index)
                    } else if checkpoint != nil, let index = state.sealed.firstIndex(where: { $0.path == segment.path })
                    {
                        state.sealed.remove(at: index)
                    } else {
                        continue
                    }
                    if let destination {
                        if rename(segment.path, destination) != 0 {
                            throw .io(operation: "rename", path: segment.path, errno: errno)
                        }
                    } else {
                        unlink(segment.path)
                    }
                    state.storedBytes -= segment.bytes
                }
                self.state.broadcast()  // a writer may be waiting for room
            }
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
    public var checkpoint: Checkpoint { state.withLock { $0.acknowledged } }

    /// Lines appended (durably) since the spool was opened.
    public var appendedLines: Int { state.withLock { $0.appendedLines } }

    /// Lines deleted by the ``SpoolConfiguration/QuotaPolicy/dropOldest`` policy so far.
    public var droppedLines: Int { state.withLock { $0.droppedLines } }

    // MARK: Internals (under the lock)

    private func rotateIfDue(_ state: inout State, incoming: Int) throws(SpoolError) {
        guard let active = state.active, active.records > 0 else { return }
        let tooBig = active.size + incoming > configuration.segmentBytes
        let tooOld = SystemClock().now - active.openedAt >= configuration.segmentAge
        if tooBig || tooOld { try seal(&state) }
    }

    private func openActiveIfNeeded(_ state: inout State) throws(SpoolError) {
        guard state.active == nil else { return }
        let number = state.nextSegment
        let path = segmentsDirectory + "/" + SegmentName.padded(number) + ".open"
        let fd = try SpoolFiles.open(path, flags: O_WRONLY | O_CREAT | O_EXCL | O_APPEND)
        let header = SegmentFormat.header(streamID: streamID, segment: number)
        do throws(SpoolError) {
            try SpoolFiles.writeAll(fd, header, path: path)
            try SpoolFiles.sync(fd, path: path)
            try SpoolFiles.syncDirectory(segmentsDirectory)  // the new name itself must survive a crash
        } catch {
            close(fd)
            unlink(path)
            throw error
        }
        state.nextSegment += 1
        state.storedBytes += header.count
        state.active = Active(
            number: number, fd: fd, path: path, size: header.count, openedAt: SystemClock().now, records: 0,
            firstSequence: 0, lastSequence: 0)
    }

    private func seal(_ state: inout State) throws(SpoolError) {
        guard let active = state.active, active.records > 0 else { return }
        if configuration.durability != .syncEachBatch { try SpoolFiles.sync(active.fd, path: active.path) }
        let sealedPath = String(active.path.dropLast(".open".count)) + ".seg"
        if rename(active.path, sealedPath) != 0 { throw .io(operation: "rename", path: active.path, errno: errno) }
        close(active.fd)
        state.active = nil
        try SpoolFiles.syncDirectory(segmentsDirectory)
        state.sealed.append(
            SealedSegment(
                stream: streamID, number: active.number, path: sealedPath, bytes: active.size,
                records: active.records, firstSequence: active.firstSequence, lastSequence: active.lastSequence,
                mayAlreadyBeStored: false))
        counters.sealed.increment()
    }

    private func makeRoom(_ state: inout State, needed: Int) throws(SpoolError) {
        let quota = configuration.quotaBytes
        switch configuration.quotaPolicy {
        case .dropOldest:
            while state.storedBytes + needed > quota, let oldest = state.resend.first ?? state.sealed.first {
                unlink(oldest.path)
                if state.resend.isEmpty { state.sealed.removeFirst() } else { state.resend.removeFirst() }
                state.storedBytes -= oldest.bytes
                state.droppedLines += oldest.records
                counters.droppedLines.increment(by: Int64(oldest.records))
                logger.error(
                    "spool quota full: dropped the oldest segment",
                    metadata: [
                        "segment": "\(oldest.name)", "lines": "\(oldest.records)",
                        "sequences": "\(oldest.firstSequence)...\(oldest.lastSequence)",
                    ])
            }
        case .blockWriter:
            break  // `append` waited for room before calling
        }
        if state.storedBytes + needed > quota {
            counters.quotaRejections.increment()
            throw .quotaExceeded(quotaBytes: quota, neededBytes: needed)
        }
    }

    static func wallClockNanoseconds() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return UInt64(spec.tv_sec) &* 1_000_000_000 &+ UInt64(spec.tv_nsec)
    }

    struct Active {
        let number: UInt64
        let fd: Int32
        let path: String
        var size: Int
        let openedAt: MonotonicInstant
        var records: Int
        var firstSequence: UInt64
        var lastSequence: UInt64
    }

    /// One batch on its way to disk.
    struct Batch {
        let bytes: [UInt8]
        let ticket: UInt64
        let fd: Int32
        let path: String
        let size: Int
        let records: Int
        let lastSequence: UInt64
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
        /// The last batch handed to a writer, and the last one finished (written or failed).
        var issuedTicket: UInt64 = 0
        var durableTicket: UInt64 = 0
        var failures: [UInt64: SpoolError] = [:]
        var writing = false
        var storedBytes: Int
        var acknowledged: Checkpoint
        var droppedLines = 0
        var appendedLines = 0
    }
}

/// A sealed segment: a file that never changes again.
public struct SealedSegment: Sendable, Hashable {
    /// The stream it belongs to.
    public let stream: StreamID
    /// Its number in the stream.
    public let number: UInt64
    /// Its file.
    public let path: String
    /// Its size in bytes.
    public let bytes: Int
    /// How many records it holds.
    public let records: Int
    /// The first and last sequence numbers in it.
    public let firstSequence: UInt64
    /// The last sequence number in it.
    public let lastSequence: UInt64
    /// Whether a collector may already hold it: it was found when the spool was opened (a
    /// crash may have come between its upload and the checkpoint) or is queued to be sent
    /// again. A segment sealed since the spool was opened cannot be stored anywhere under
    /// a numbering the checkpoint proves, so sinks may skip asking before its first upload.
    public let mayAlreadyBeStored: Bool

    /// Reads its records (for sinks that send record by record).
    public func readRecords() throws(SpoolError) -> [SpoolRecord] {
        let parsed = SegmentFormat.parse(try SpoolFiles.readAll(path))
        if let problem = parsed.problem { throw .corrupt(path: path, reason: problem) }
        return parsed.records
    }

    /// The stable name sinks store it under: `<stream-id>/<number>.log`.
    public var name: String { SegmentName.make(stream: stream, segment: number) }
    var resendFileName: String { SegmentName.resendFileName(stream: stream, segment: number) }
}

extension SealedSegment {
    /// The segment a parsed file holds (its valid records, at `path`), or nil when it has
    /// no stream, no number or no valid record. Segments read back from disk (at open, or
    /// redriven) may already be stored on a collector.
    init?(parsed: ParsedSegment, at path: String, mayAlreadyBeStored: Bool = true) {
        guard let stream = parsed.streamID, let number = parsed.segment, let first = parsed.records.first,
            let last = parsed.records.last
        else { return nil }
        self.init(
            stream: stream, number: number, path: path, bytes: parsed.validLength, records: parsed.records.count,
            firstSequence: first.sequence, lastSequence: last.sequence, mayAlreadyBeStored: mayAlreadyBeStored)
    }
}

/// How far uploads got: every segment up to `segment` (and every sequence up to
/// `sequence`) is stored by the collector or dead-lettered.
public struct Checkpoint: Sendable, Equatable {
    /// The highest acknowledged segment number (0: none).
    public let segment: UInt64
    /// The highest acknowledged sequence number (0: none).
    public let sequence: UInt64

}

/// The spool's counters (swift-metrics, global factory).
struct SpoolCounters: Sendable {
    let appended = Counter(label: "overtime_spool_appended_lines_total")
    let droppedLines = Counter(label: "overtime_spool_dropped_lines_total")
    let writeErrors = Counter(label: "overtime_spool_write_errors_total")
    let quotaRejections = Counter(label: "overtime_spool_quota_rejections_total")
    let sealed = Counter(label: "overtime_spool_segments_sealed_total")
    let deadLettered = Counter(label: "overtime_spool_dead_lettered_segments_total")
    let redriven = Counter(label: "overtime_spool_redriven_segments_total")
}

extension String {
    func trimmingWhitespace() -> String {
        String(drop { $0.isWhitespace }.reversed().drop { $0.isWhitespace }.reversed())
    }
}
