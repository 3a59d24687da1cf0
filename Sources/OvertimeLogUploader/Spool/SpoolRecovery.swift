import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Opening a spool after a crash (or a clean stop): what is there, what is valid.
///
/// - segments at or below the checkpoint were acknowledged: deleted (the crash came
///   between moving the checkpoint and deleting them);
/// - a segment whose tail is torn or whose record fails its checksum is cut back to the
///   last valid record, and the loss is reported; a sealed segment cut back this way has
///   never been acknowledged, and the sequence numbers its lost records may have had are
///   never given out again;
/// - an active (`.open`) segment is sealed, so its lines get uploaded;
/// - anything that is not a segment of this stream is moved to `quarantine/`.
struct SpoolRecovery {
    let directory: String
    let streamID: StreamID
    let logger: Logger

    struct Result {
        var sealed: [SealedSegment] = []
        var checkpoint = Checkpoint(segment: 0, sequence: 0)
        var lastSequence: UInt64 = 0
        var lastSegment: UInt64 = 0
    }

    func run(_ report: inout RecoveryReport) throws(SpoolError) -> Result {
        var result = Result()
        let checkpointPath = directory + "/checkpoint"
        if SpoolFiles.size(checkpointPath) != nil {
            if let checkpoint = Checkpoint.decode(try SpoolFiles.readAll(checkpointPath)) {
                result.checkpoint = checkpoint
            } else {
                // Uploading again is safe (collectors key on the segment name); skipping is not.
                logger.error("spool checkpoint unreadable; every segment present will be uploaded again")
                report.quarantined.append(checkpointPath)
                rename(checkpointPath, directory + "/quarantine/checkpoint")
            }
        }
        result.lastSequence = result.checkpoint.sequence
        result.lastSegment = result.checkpoint.segment
        let folder = directory + "/segments"
        for name in try SpoolFiles.list(folder) {
            let path = folder + "/" + name
            if name.hasSuffix(".tmp") {
                unlink(path)
                continue
            }
            let isOpen = name.hasSuffix(".open")
            guard isOpen || name.hasSuffix(".seg"), let number = UInt64(name.prefix { $0 != "." }) else {
                quarantine(path, name: name, &report)
                continue
            }
            if number <= result.checkpoint.segment {
                unlink(path)
                report.removedAcknowledged += 1
                continue
            }
            let bytes = try SpoolFiles.readAll(path)
            let parsed = SegmentFormat.parse(bytes)
            guard parsed.streamID == streamID, parsed.segment == number else {
                quarantine(path, name: name, &report)
                continue
            }
            result.lastSegment = max(result.lastSegment, number)
            if let problem = parsed.problem {
                try truncate(path, to: parsed.validLength)
                report.truncations.append(
                    RecoveryReport.Truncation(
                        path: path, keptRecords: parsed.records.count, droppedBytes: bytes.count - parsed.validLength,
                        problem: problem))
            }
            guard let first = parsed.records.first, let last = parsed.records.last else {
                unlink(path)  // nothing valid in it
                continue
            }
            var sealedPath = path
            if isOpen {
                sealedPath = folder + "/" + SegmentName.padded(number) + ".seg"
                if rename(path, sealedPath) != 0 { throw .io(operation: "rename", path: path, errno: errno) }
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
            result.sealed.append(
                SealedSegment(
                    stream: streamID, number: number, path: sealedPath, bytes: parsed.validLength,
                    records: parsed.records.count, firstSequence: first.sequence, lastSequence: last.sequence))
        }
        try SpoolFiles.syncDirectory(folder)
        result.sealed.sort { $0.number < $1.number }
        return result
    }

    private func truncate(_ path: String, to length: Int) throws(SpoolError) {
        let fd = try SpoolFiles.open(path, flags: O_WRONLY)
        defer { close(fd) }
        if ftruncate(fd, off_t(length)) != 0 { throw .io(operation: "ftruncate", path: path, errno: errno) }
        try SpoolFiles.sync(fd, path: path)
    }

    private func quarantine(_ path: String, name: String, _ report: inout RecoveryReport) {
        rename(path, directory + "/quarantine/" + name)
        report.quarantined.append(path)
    }
}
