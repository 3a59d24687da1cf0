import CoreMetrics
import Logging
import Overtime

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Retirement: acknowledged segments leave (the checkpoint moves past them first),
/// refused ones go to the dead-letter folder, redriven ones come back.
extension Spool {
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
        ((try? files.list(directory + "/dead-letter")) ?? []).filter { $0.hasSuffix(".seg") }.count
    }

    /// Moves every dead-lettered segment back into the upload queue (ahead of the current
    /// stream's segments), under its own name, and returns how many. Files in the folder
    /// that are not valid segments stay there and are named in the log.
    @discardableResult
    public func redriveDeadLetters() throws(SpoolError) -> Int {
        let folder = directory + "/dead-letter"
        return try retiring.withLock { (_) throws(SpoolError) -> Int in
            var moved: [SealedSegment] = []
            var failure: SpoolError?
            for name in try files.list(folder) where name.hasSuffix(".seg") {
                let path = folder + "/" + name
                let parsed: ParsedSegment
                do throws(SpoolError) {
                    parsed = SegmentFormat.parse(try files.readAll(path))
                } catch {
                    failure = error
                    break
                }
                let target = parsed.streamID.flatMap { stream in
                    parsed.segment.map {
                        directory + "/resend/" + SegmentName.resendFileName(stream: stream, segment: $0)
                    }
                }
                guard parsed.problem == nil, let target,
                    let segment = SealedSegment(parsed: parsed, at: target, files: files)
                else {
                    logger.error(
                        "not redriven: not a valid segment",
                        metadata: ["path": "\(path)", "problem": "\(parsed.problem ?? "empty")"])
                    continue
                }
                guard files.size(target) == nil else { continue }  // already queued
                do throws(SpoolError) {
                    try files.rename(path, to: target)
                } catch {
                    failure = error
                    break
                }
                moved.append(segment)
            }
            // Those moved are queued whatever fails next: the files are in `resend/` now.
            if !moved.isEmpty {
                state.withLock { state in
                    state.resend += moved
                    state.storedBytes += moved.reduce(0) { $0 + $1.bytes }
                }
                counters.redriven.increment(by: Int64(moved.count))
                logger.notice("dead letters redriven", metadata: ["segments": "\(moved.count)"])
            }
            if let failure { throw failure }
            if !moved.isEmpty { try files.syncDirectory(directory + "/resend") }
            return moved.count
        }
    }

    func retire(_ segments: [SealedSegment], moveTo destination: String?) throws(SpoolError) {
        // One retirement at a time, and the checkpoint's fsyncs outside the state lock:
        // appends go on while it is made durable.
        try retiring.withLock { (retiring: inout Retiring) throws(SpoolError) in
            // A refused segment moves before the checkpoint passes it: recovery takes a file
            // the checkpoint has passed for stored, and deletes it.
            if let destination {
                try state.withLock { (state) throws(SpoolError) in
                    for segment in segments
                    where state.resend.contains(where: { $0.path == segment.path })
                        || state.sealed.contains(where: { $0.path == segment.path })
                    {
                        try files.rename(segment.path, to: destination)
                    }
                }
            }
            let checkpoint: Checkpoint? = state.withLock { state in
                // Dropped by the quota meanwhile: nothing left to do for those. Segments to
                // send again are outside the numbering: they never move the checkpoint.
                let present = segments.filter { segment in state.sealed.contains { $0.path == segment.path } }
                guard !present.isEmpty else { return nil }
                return Checkpoint(
                    segment: max(state.acknowledged.segment, present.map(\.number).max()!),
                    sequence: max(state.acknowledged.sequence, present.map(\.lastSequence).max()!))
            }
            var failure: SpoolError?
            if let checkpoint {
                do throws(SpoolError) {
                    try retiring.checkpoint.write(checkpoint)
                    retiring.writes += 1
                } catch {
                    failure = error
                }
            }
            // Stored but not acknowledged: they stay queued and are sent again. Moved: they
            // leave the queue whatever the checkpoint says.
            if let failure, destination == nil { throw failure }
            state.withLock { state in
                if let checkpoint, failure == nil { state.acknowledged = checkpoint }
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
                    if destination == nil { files.unlink(segment.path) }
                    state.storedBytes -= segment.bytes
                }
                self.state.broadcast()  // a writer may be waiting for room
            }
            if let failure { throw failure }
        }
    }
}
