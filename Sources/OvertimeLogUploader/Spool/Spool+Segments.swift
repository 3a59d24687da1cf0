import CoreMetrics
import Logging
import Overtime
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Segments: sealing, rotation by size and age, and the active segment.
extension Spool {
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

    /// Whether any line not yet acknowledged is a producer's, not the program's own (see
    /// ``append(ownLines:)``): counted as lines are written and read at open, so a stop
    /// asks without touching the disk.
    package func holdsProducerLines() -> Bool {
        state.withLock { state in
            (state.resend + state.sealed).contains { $0.producerRecords > 0 }
                || (state.active?.producerRecords ?? 0) > 0 || state.pendingProducerRecords > 0
        }
    }

    func rotateIfDue(_ state: inout State, incoming: Int) throws(SpoolError) {
        guard let active = state.active, active.records > 0 else { return }
        let tooBig = active.size + incoming > configuration.segmentBytes
        let tooOld = clock.now - active.openedAt >= configuration.segmentAge
        if tooBig || tooOld { try seal(&state) }
    }

    func openActiveIfNeeded(_ state: inout State) throws(SpoolError) {
        guard state.active == nil else { return }
        let number = state.nextSegment
        let path = segmentsDirectory + "/" + SegmentName.padded(number) + ".open"
        let fd = try files.open(path, flags: O_WRONLY | O_CREAT | O_EXCL | O_APPEND)
        let header = SegmentFormat.header(streamID: streamID, segment: number)
        do throws(SpoolError) {
            try files.writeAll(fd, header, path: path)
            try files.sync(fd, path: path)
            try files.syncDirectory(segmentsDirectory)  // the new name itself must survive a crash
        } catch {
            files.close(fd)
            files.unlink(path)
            throw error
        }
        state.nextSegment += 1
        state.storedBytes += header.count
        state.active = Active(
            number: number, fd: fd, path: path, size: header.count, openedAt: clock.now, records: 0,
            firstSequence: 0, lastSequence: 0)
    }

    func seal(_ state: inout State) throws(SpoolError) {
        guard let active = state.active, active.records > 0 else { return }
        if configuration.durability != .syncEachBatch { try files.sync(active.fd, path: active.path) }
        let sealedPath = String(active.path.dropLast(".open".count)) + ".seg"
        try files.rename(active.path, to: sealedPath)
        files.close(active.fd)
        state.active = nil
        // Listed before the directory is synced: its records are durable already, and a
        // failed sync (out of descriptors) must not leave it on disk but out of the queue.
        state.sealed.append(
            SealedSegment(
                stream: streamID, number: active.number, path: sealedPath, bytes: active.size,
                records: active.records, firstSequence: active.firstSequence, lastSequence: active.lastSequence,
                mayAlreadyBeStored: false, files: files, firstLineTime: active.firstLineTime,
                producerRecords: active.producerRecords))
        counters.sealed.increment()
        try files.syncDirectory(segmentsDirectory)
    }
}
