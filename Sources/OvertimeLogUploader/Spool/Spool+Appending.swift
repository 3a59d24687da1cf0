import CoreMetrics
import Logging
import Overtime

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Appending: group commit. The first appender to find no write under way becomes the
/// leader and writes batch after batch for everyone waiting; each appender returns once
/// the batch holding its lines is durable.
extension Spool {
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
        try append(lines, own: false)
    }

    /// Appends lines the program wrote of its own (its log, through ``SpoolLogWriter``), not
    /// a producer's: marked so in the segment (``SegmentFormat``), so that a stop can tell
    /// whether anything but them waits (``holdsProducerLines()``).
    @discardableResult
    package func append(ownLines lines: [[UInt8]]) throws(SpoolError) -> ClosedRange<UInt64>? {
        try append(lines, own: true)
    }

    private func append(_ lines: [[UInt8]], own: Bool) throws(SpoolError) -> ClosedRange<UInt64>? {
        guard !lines.isEmpty else { return nil }
        if let long = lines.first(where: { $0.count > SegmentFormat.maximumLineBytes }) {
            throw .lineTooLong(bytes: long.count)
        }
        let clockTime = UInt64(clamping: clock.wallClockNow.nanosecondsSinceEpoch)
        let time = own ? clockTime | SegmentFormat.ownLineBit : clockTime & ~SegmentFormat.ownLineBit
        let needed = lines.reduce(0) { $0 + $1.count + SegmentFormat.frameSize + SegmentFormat.bodyPrefixSize }
        let quota = configuration.quotaBytes
        var roomTimeout: Double?
        if let timeout = configuration.quotaPolicy.blockingTimeout {
            roomTimeout = timeout.secondsValue
        }
        let (range, ticket, mark, lead) = try state.withLock(
            // Only a blocking quota waits for room (acknowledgements make it).
            waitingUntil: { roomTimeout == nil || $0.storedBytes + needed <= quota }, timeout: roomTimeout
        ) { (state, _) throws(SpoolError) in
            try makeRoom(&state, needed: needed)
            let first = state.nextSequence
            // Encoded straight into the batch: a burst then holds its bytes once, not twice.
            let start = state.pending.count
            if state.pending.capacity < start + needed {
                state.pending.reserveCapacity(max(start + needed, 2 * state.pending.capacity))
            }
            if state.pendingRecords == 0 { state.pendingFirstTime = time }
            for (index, line) in lines.enumerated() {
                SegmentFormat.appendRecord(
                    sequence: state.nextSequence, time: time, line: line, endsAppend: index == lines.count - 1,
                    to: &state.pending)
                state.nextSequence += 1
            }
            state.pendingRecords += lines.count
            if !own { state.pendingProducerRecords += lines.count }
            state.storedBytes += state.pending.count - start
            let lead = !state.writing
            state.writing = true
            state.waiters[state.issuedTicket + 1, default: 0] += 1
            return (first...(state.nextSequence - 1), state.issuedTicket + 1, state.giveBacks.mark, lead)
        }
        if lead { writeBatches() }
        let shift = try state.withLock(waitingUntil: { $0.durableTicket >= ticket }) {
            (state, _) throws(SpoolError) -> UInt64 in
            let failure = state.failures[ticket]
            let shift = state.giveBacks.shift(ticket: ticket, since: mark)
            // The last appender of the batch to read its outcome lets it go.
            if let left = state.waiters[ticket], left > 1 {
                state.waiters[ticket] = left - 1
            } else {
                state.waiters[ticket] = nil
                state.failures[ticket] = nil
                state.giveBacks.release(ticket)
            }
            if let failure { throw failure }
            return shift
        }
        counters.appended.increment(by: Int64(lines.count))
        state.withLock { $0.appendedLines += lines.count }
        for observer in appendObservers.withLock({ $0 }) { observer() }
        return (range.lowerBound - shift)...(range.upperBound - shift)
    }

    /// Appends one line.
    @discardableResult
    public func append(_ line: String) throws(SpoolError) -> UInt64 {
        try append([Array(line.utf8)])!.lowerBound
    }

    /// The leader's loop: writes what is pending, batch after batch, until nothing is.
    func writeBatches() {
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
                    return Batch(
                        bytes: [], ticket: 0, fd: -1, path: "", size: 0, records: 0, lastSequence: 0, firstTime: 0,
                        producerRecords: 0)
                }
                let active = state.active!
                state.issuedTicket += 1
                state.giveBacks.issue(state.issuedTicket)
                var bytes: [UInt8] = []
                swap(&bytes, &state.pending)
                defer {
                    state.pendingRecords = 0
                    state.pendingProducerRecords = 0
                }
                return Batch(
                    bytes: bytes, ticket: state.issuedTicket, fd: active.fd, path: active.path, size: active.size,
                    records: state.pendingRecords, lastSequence: state.nextSequence - 1,
                    firstTime: state.pendingFirstTime, producerRecords: state.pendingProducerRecords)
            }
            guard let work else { return }
            guard work.fd >= 0 else { continue }
            var failure: SpoolError?
            do throws(SpoolError) {
                try files.writeAll(work.fd, work.bytes, path: work.path)
                if configuration.durability == .syncEachBatch { try files.sync(work.fd, path: work.path) }
            } catch {
                failure = error
                // Cut the segment back to its last durable record, so it stays valid.
                _ = files.system.truncate(work.fd, to: work.size)
            }
            state.withLock { state in
                if let failure {
                    state.failures[work.ticket] = failure
                    state.storedBytes -= work.bytes.count
                    giveBackSequences(&state, count: work.records)
                    counters.writeErrors.increment()
                    logger.error("spool write failed: \(failure)")
                } else if var active = state.active {
                    // A batch holds consecutive sequences; a failed one before it leaves a gap.
                    if active.records == 0 {
                        active.firstSequence = work.lastSequence - UInt64(work.records) + 1
                        active.firstLineTime = work.firstTime
                    }
                    active.size += work.bytes.count
                    active.records += work.records
                    active.producerRecords += work.producerRecords
                    active.lastSequence = work.lastSequence
                    state.active = active
                }
                state.durableTicket = work.ticket
                self.state.broadcast()
            }
        }
    }

    func failPending(_ state: inout State, _ error: SpoolError) {
        state.issuedTicket += 1
        state.giveBacks.issue(state.issuedTicket)
        state.failures[state.issuedTicket] = error
        state.durableTicket = state.issuedTicket
        state.storedBytes -= state.pending.count
        state.nextSequence -= UInt64(state.pendingRecords)  // never stored: the next lines take their numbers
        state.pending = []
        state.pendingRecords = 0
        counters.writeErrors.increment()
        logger.error("spool write failed: \(error)")
        self.state.broadcast()
    }

    /// A failed batch's `count` lines were never stored, so their numbers go to the lines
    /// after them: the stream a collector sees has no gap that looks like loss. The lines
    /// already waiting for the next batch are renumbered; their appenders learn by how much
    /// from ``SequenceGiveBacks`` (those who append after this drew the lower numbers).
    private func giveBackSequences(_ state: inout State, count: Int) {
        let shift = UInt64(count)
        state.nextSequence -= shift
        state.giveBacks.giveBack(shift)
        SegmentFormat.renumberRecords(&state.pending, down: shift)
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
        /// When its first line was spooled.
        let firstTime: UInt64
        /// Its records that are a producer's.
        let producerRecords: Int
    }
}
