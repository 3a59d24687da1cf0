import CoreMetrics
import Logging
import Overtime

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A sealed segment: a file that never changes again.
public struct SealedSegment: Sendable, Hashable {
    /// The stream it belongs to.
    package let stream: StreamID
    /// Its number in the stream.
    public let number: UInt64
    /// Its file (on a spool in memory, a name on the volume: read it with
    /// ``readBytes()``).
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
    /// The file system its file is on.
    let files: SpoolFiles
    /// When its first line was spooled (nanoseconds since 1970, the lowest bit a flag; 0
    /// when unknown), for the age of what waits.
    package var firstLineTime: UInt64 = 0
    /// Its records that are a producer's, not the program's own (see
    /// ``Spool/append(ownLines:)``).
    package var producerRecords = 0

    /// Reads its records (for sinks that send record by record).
    public func readRecords() throws(SpoolError) -> [SpoolRecord] {
        let parsed = SegmentFormat.parse(try files.readAll(path))
        if let problem = parsed.problem { throw .corrupt(path: path, reason: problem) }
        return parsed.records
    }

    /// Its bytes (the first ``bytes`` of its file), for sinks that send from memory; a file
    /// that cannot be read is a retryable failure. A sink reads a segment this way (or with
    /// ``readRecords()``), not by its ``path``: on a spool in memory no file is there.
    public func readBytes() throws(SinkError) -> [UInt8] {
        do {
            let content = try files.readAll(path)
            return content.count <= bytes ? content : Array(content.prefix(bytes))
        } catch {
            throw .retryable("cannot read \(path): \(error)", retryAfter: nil)
        }
    }

    /// The stable name sinks store it under: `<stream-id>/<number>.log`.
    public var name: String { SegmentName.make(stream: stream, segment: number) }
    var resendFileName: String { SegmentName.resendFileName(stream: stream, segment: number) }
}

extension SealedSegment {
    /// The segment a parsed file holds (its valid records, at `path`), or nil when it has
    /// no stream, no number or no valid record. Segments read back from disk (at open, or
    /// redriven) may already be stored on a collector.
    init?(parsed: ParsedSegment, at path: String, files: SpoolFiles, mayAlreadyBeStored: Bool = true) {
        guard let stream = parsed.streamID, let number = parsed.segment, let first = parsed.records.first,
            let last = parsed.records.last
        else { return nil }
        self.init(
            stream: stream, number: number, path: path, bytes: parsed.validLength, records: parsed.records.count,
            firstSequence: first.sequence, lastSequence: last.sequence, mayAlreadyBeStored: mayAlreadyBeStored,
            files: files, firstLineTime: first.time,
            producerRecords: parsed.records.count { $0.time & SegmentFormat.ownLineBit == 0 })
    }
}

/// How far uploads got: every segment up to `segment` (and every sequence up to
/// `sequence`) is stored by the collector or dead-lettered.
package struct Checkpoint: Sendable, Equatable {
    /// The highest acknowledged segment number (0: none).
    package let segment: UInt64
    /// The highest acknowledged sequence number (0: none).
    package let sequence: UInt64

}

extension String {
    func trimmingWhitespace() -> String {
        String(drop { $0.isWhitespace }.reversed().drop { $0.isWhitespace }.reversed())
    }
}
