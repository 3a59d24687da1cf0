// Opening a spool after a crash (or a clean stop): what is there, what can be trusted.

import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Recovers a spool folder. What it decides, and why:
///
/// - The checkpoint numbers the stream. One damaged slot: the other is used. Both damaged,
///   missing, or of the earlier text format while segments exist: nothing proves which
///   segment names and sequence numbers a collector already holds, so the spool starts a
///   **new stream** (a new random ID numbers from 1 again: no name or sequence can collide)
///   and says so at critical level. Never a guess that could overwrite or delete.
/// - Segments of the current stream at or below the checkpoint were acknowledged: deleted
///   (the crash came between moving the checkpoint and deleting them).
/// - Segments of another stream (an earlier one) are moved to `resend/` and uploaded under
///   their own names: a collector that already has them keeps one copy (sinks never
///   overwrite a stored segment with different bytes).
/// - A segment whose tail is torn or whose record fails its checksum is cut back to the
///   last valid record, and the loss is reported; a sealed segment cut back this way may
///   have been uploaded whole, so the sequence numbers its lost records may have had are
///   never given out again.
/// - The active (`.open`) segment was never uploaded: an append a crash cut short (the
///   records after the last one that ends an append) goes whole; damage inside appends
///   that were completed — a later record ending an append is intact — costs only the
///   damaged bytes, the records on both sides kept and the segment rewritten without them.
///   Damage to the segment's very last record cannot be told from a crash's tail and is
///   taken as one.
/// - An active (`.open`) segment is sealed, so its lines get uploaded.
/// - Anything that is not a segment is moved to `quarantine/`.
struct SpoolRecovery {
    let directory: String
    let files: SpoolFiles
    let logger: Logger

    struct Result {
        var checkpoint: CheckpointFile
        var sealed: [SealedSegment] = []
        var resend: [SealedSegment] = []
        var lastSequence: UInt64 = 0
        var lastSegment: UInt64 = 0
        var stream: StreamID { checkpoint.record.stream }
    }

    /// `usedBefore`: the spool folder was used before this open (its lock file named a
    /// holder, or its folders existed): a checkpoint missing then is a stream change, not
    /// a new spool.
    func run(_ report: inout RecoveryReport, usedBefore: Bool) throws(SpoolError) -> Result {
        let checkpointPath = directory + "/checkpoint"
        let legacyStreamPath = directory + "/stream-id"
        var record: CheckpointRecord?
        let hasCheckpoint = files.size(checkpointPath) != nil
        if hasCheckpoint {
            switch CheckpointFormat.read(try files.readAll(checkpointPath)) {
            case .valid(let valid):
                record = valid
            case .partlyDamaged(let valid, let problem):
                record = valid
                report.checkpointDamage = "checkpoint damaged (\(problem)); its intact slot was used"
                logger.error("\(report.checkpointDamage!)", metadata: ["path": "\(checkpointPath)"])
            case .damaged(let reason):
                report.checkpointDamage = "checkpoint unusable: \(reason)"
                quarantine(checkpointPath, name: "checkpoint", &report)
            }
        }
        let segmentsFolder = directory + "/segments"
        let resendFolder = directory + "/resend"
        let checkpoint: CheckpointFile
        if let record {
            checkpoint = try CheckpointFile(path: checkpointPath, record: record, files: files)
            if report.checkpointDamage != nil {
                do {
                    try checkpoint.repair()
                } catch {
                    // A full disk, say: the intact slot still holds; the next acknowledgement writes both.
                    logger.error("cannot repair the checkpoint now: \(error)", metadata: ["path": "\(checkpointPath)"])
                }
            }
        } else {
            let previous = files.size(legacyStreamPath) != nil
            let segmentFiles = try files.list(segmentsFolder)
            let resendFiles = try files.list(resendFolder)
            let leftovers = !segmentFiles.isEmpty || !resendFiles.isEmpty
            checkpoint = try CheckpointFile.create(
                path: checkpointPath, stream: .random(), directory: directory, files: files)
            if !hasCheckpoint, usedBefore || previous || leftovers {
                report.checkpointDamage = "checkpoint missing from a spool used before"
            }
            if report.checkpointDamage != nil || previous || leftovers {
                report.startedNewStream = true
                logger.critical(
                    "spool checkpoint missing or damaged: started a new stream; every segment still here is uploaded again under its own name, none is deleted",
                    metadata: [
                        "cause": "\(report.checkpointDamage ?? "no checkpoint file")",
                        "stream": "\(checkpoint.record.stream)",
                    ])
            }
        }
        // The earlier format kept the stream ID in a file of its own; the checkpoint holds it now.
        files.unlink(legacyStreamPath)

        var result = Result(checkpoint: checkpoint)
        result.lastSequence = checkpoint.record.checkpoint.sequence
        result.lastSegment = checkpoint.record.checkpoint.segment
        // Listed before segments of an earlier stream are moved into it, so none is taken twice.
        let queuedForResend = try files.list(resendFolder)
        for name in try files.list(segmentsFolder) {
            try recoverCurrent(name: name, folder: segmentsFolder, into: &result, &report)
        }
        for name in queuedForResend {
            let path = resendFolder + "/" + name
            guard let (stream, number) = SegmentName.parseResend(name) else {
                quarantine(path, name: name, &report)
                continue
            }
            if let segment = try recoverSealed(path: path, stream: stream, number: number, &report) {
                result.resend.append(segment)
            }
        }
        try files.syncDirectory(segmentsFolder)
        try files.syncDirectory(resendFolder)
        result.sealed.sort { $0.number < $1.number }
        report.resendSegments = result.resend.count
        return result
    }

    /// A file in `segments/`: the current stream's, an earlier stream's, or not a segment.
    private func recoverCurrent(
        name: String, folder: String, into result: inout Result, _ report: inout RecoveryReport
    ) throws(SpoolError) {
        let path = folder + "/" + name
        if name.hasSuffix(".tmp") {
            files.unlink(path)
            return
        }
        let isOpen = name.hasSuffix(".open")
        guard isOpen || name.hasSuffix(".seg"), let number = UInt64(name.prefix { $0 != "." }) else {
            return quarantine(path, name: name, &report)
        }
        let bytes = try files.readAll(path)
        var parsed = SegmentFormat.parse(bytes)
        guard let stream = parsed.streamID, parsed.segment == number else {
            return quarantine(path, name: name, &report)
        }
        // The segment being written when the process died: an append it cut short goes
        // whole; damage inside appends that were completed costs only the damaged bytes.
        if isOpen {
            let recovered = SegmentFormat.recoverOpen(bytes)
            parsed = recovered.parsed
            if let rewritten = recovered.rewritten {
                try replace(path, with: rewritten)
                report.truncations.append(
                    RecoveryReport.Truncation(
                        path: path, keptRecords: parsed.records.count, droppedBytes: bytes.count - rewritten.count,
                        problem: parsed.problem ?? ""))
                parsed = ParsedSegment(
                    streamID: parsed.streamID, segment: parsed.segment, records: parsed.records,
                    validLength: rewritten.count, problem: nil)
            }
        }
        if stream != result.stream {
            // An earlier stream's segment: sealed as it is, and sent again under its own name.
            let target = directory + "/resend/" + SegmentName.resendFileName(stream: stream, segment: number)
            try files.rename(path, to: target)
            if let segment = try recoverSealed(path: target, stream: stream, number: number, &report) {
                result.resend.append(segment)
            }
            return
        }
        if number <= result.checkpoint.record.checkpoint.segment {
            files.unlink(path)
            report.removedAcknowledged += 1
            return
        }
        result.lastSegment = max(result.lastSegment, number)
        try cutBack(path, parsed, from: bytes.count, &report)
        guard let last = parsed.records.last else {
            files.unlink(path)  // nothing valid in it
            return
        }
        var sealedPath = path
        if isOpen {
            sealedPath = folder + "/" + SegmentName.padded(number) + ".seg"
            try files.rename(path, to: sealedPath)
        }
        var highest = last.sequence
        if !isOpen, parsed.problem != nil {
            // A sealed segment may have been uploaded before the crash: never reuse the
            // numbers its lost records may have had. Skip as many as the dropped bytes
            // could hold; the collector sees a gap, which is what happened.
            let smallestRecord = SegmentFormat.frameSize + SegmentFormat.bodyPrefixSize
            highest += UInt64((bytes.count - parsed.validLength + smallestRecord - 1) / smallestRecord)
        }
        result.lastSequence = max(result.lastSequence, highest)
        if let segment = SealedSegment(parsed: parsed, at: sealedPath, files: files) { result.sealed.append(segment) }
    }

    /// A sealed segment outside the checkpoint's numbering (in `resend/`): checked, cut
    /// back to its valid records if damaged, deleted if none is valid.
    private func recoverSealed(
        path: String, stream: StreamID, number: UInt64, _ report: inout RecoveryReport
    ) throws(SpoolError) -> SealedSegment? {
        let bytes = try files.readAll(path)
        let parsed = SegmentFormat.parse(bytes)
        guard parsed.streamID == stream, parsed.segment == number else {
            quarantine(path, name: String(path.split(separator: "/").last ?? "segment"), &report)
            return nil
        }
        try cutBack(path, parsed, from: bytes.count, &report)
        guard let segment = SealedSegment(parsed: parsed, at: path, files: files) else {
            files.unlink(path)  // nothing valid in it
            return nil
        }
        return segment
    }

    /// Cuts a damaged segment back to its valid records (made durable) and reports the loss.
    private func cutBack(
        _ path: String, _ parsed: ParsedSegment, from size: Int, _ report: inout RecoveryReport
    ) throws(SpoolError) {
        guard let problem = parsed.problem else { return }
        let fd = try files.open(path, flags: O_WRONLY)
        defer { files.close(fd) }
        try files.truncate(fd, to: parsed.validLength, path: path)
        try files.sync(fd, path: path)
        report.truncations.append(
            RecoveryReport.Truncation(
                path: path, keptRecords: parsed.records.count, droppedBytes: size - parsed.validLength,
                problem: problem))
    }

    /// Puts `bytes` in place of `path`, durably: written beside it, synced, renamed over it.
    private func replace(_ path: String, with bytes: [UInt8]) throws(SpoolError) {
        let temporary = path + ".tmp"
        let fd = try files.open(temporary, flags: O_WRONLY | O_CREAT | O_TRUNC)
        defer { files.close(fd) }
        do {
            try files.writeAll(fd, bytes, path: temporary)
        } catch {
            files.unlink(temporary)
            throw error
        }
        try files.sync(fd, path: temporary)
        try files.rename(temporary, to: path)
    }

    /// Moves `path` into `quarantine/`, never over an earlier file there.
    private func quarantine(_ path: String, name: String, _ report: inout RecoveryReport) {
        var target = directory + "/quarantine/" + name
        var suffix = 1
        while files.size(target) != nil {
            target = directory + "/quarantine/" + name + ".\(suffix)"
            suffix += 1
        }
        _ = files.system.rename(path, to: target)
        report.quarantined.append(path)
    }
}
