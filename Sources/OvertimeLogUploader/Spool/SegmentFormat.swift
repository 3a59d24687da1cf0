/// The on-disk format of a spool segment, version 1. Little-endian throughout.
///
/// ```
/// header  (32 bytes)  "OTSEG001" | stream ID (16 bytes) | segment number (u64)
/// record  (repeated)  body length (u32) | CRC-32C of body (u32) | body
/// body                sequence (u64) | wall-clock time, ns since 1970 (u64) | line (UTF-8)
/// ```
///
/// The stream ID is in the header, so every record of a segment belongs to that stream;
/// with its sequence number a collector sees gaps and duplicates. A sealed segment is
/// uploaded byte for byte under the name ``SegmentName``, so a retry sends the same bytes.
///
/// The time's lowest bit marks the last record of each append (one call of
/// `Spool.append`, one ingestion batch): recovery drops an append a crash cut short
/// whole, even when the cut fell on a record boundary, so a batch is stored whole or not
/// at all. (A nanosecond is below any clock's meaning, and readers of the format need not
/// know the bit.) The next bit (``ownLineBit``) marks a line the program wrote of its own
/// (its log), not a producer's: a stop with only those waiting need not upload.
package enum SegmentFormat {
    /// The time's bit that marks the program's own line.
    package static let ownLineBit: UInt64 = 2

    /// The first eight bytes of every segment.
    package static let magic: [UInt8] = Array("OTSEG001".utf8)
    /// Header size in bytes.
    package static let headerSize = 32
    /// Record frame overhead (length and checksum) in bytes.
    package static let frameSize = 8
    /// Body bytes before the line (sequence and time).
    package static let bodyPrefixSize = 16
    /// The longest line a record holds.
    package static let maximumLineBytes = 1 << 20

    /// The 32-byte header.
    static func header(streamID: StreamID, segment: UInt64) -> [UInt8] {
        var bytes = magic
        bytes += streamID.bytes
        bytes.appendLittleEndian(segment)
        return bytes
    }

    /// Appends one framed record to `buffer`; `endsAppend` for the last record of an append.
    static func appendRecord(
        sequence: UInt64, time: UInt64, line: some Collection<UInt8>, endsAppend: Bool = true,
        to buffer: inout [UInt8]
    ) {
        let bodyLength = bodyPrefixSize + line.count
        let start = buffer.count
        buffer.appendLittleEndian(UInt32(bodyLength))
        buffer.appendLittleEndian(UInt32(0))  // checksum, filled in below
        buffer.appendLittleEndian(sequence)
        buffer.appendLittleEndian(endsAppend ? time | 1 : time & ~1)
        // Contiguous lines (arrays, most callers) are copied with one memcpy; the generic
        // path walks an iterator byte by byte, unspecialized across the module boundary.
        if line.withContiguousStorageIfAvailable({ buffer.append(contentsOf: $0) }) == nil {
            buffer.append(contentsOf: line)
        }
        let crc = buffer.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[(start + 8)...])) }
        buffer.withUnsafeMutableBytes { $0.storeBytes(of: crc.littleEndian, toByteOffset: start + 4, as: UInt32.self) }
    }

    /// Parses a whole segment: the header, then records until the end or the first
    /// Moves the sequence of every record in `records` (whole records, as
    /// ``appendRecord(sequence:time:line:endsAppend:to:)`` writes them, no header) down by
    /// `shift`, their checksums made again.
    static func renumberRecords(_ records: inout [UInt8], down shift: UInt64) {
        records.withUnsafeMutableBytes { bytes in
            var offset = 0
            while offset + frameSize + bodyPrefixSize <= bytes.count {
                let length = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
                let sequence = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self))
                bytes.storeBytes(of: (sequence - shift).littleEndian, toByteOffset: offset + 8, as: UInt64.self)
                let body = UnsafeRawBufferPointer(rebasing: bytes[(offset + frameSize)..<(offset + frameSize + length)])
                bytes.storeBytes(of: CRC32C.checksum(body).littleEndian, toByteOffset: offset + 4, as: UInt32.self)
                offset += frameSize + length
            }
        }
    }

    /// invalid record. Never traps, whatever the bytes.
    package static func parse(_ bytes: [UInt8]) -> ParsedSegment {
        guard bytes.count >= headerSize, Array(bytes[0..<8]) == magic else {
            return ParsedSegment(
                streamID: nil, segment: nil, records: [], validLength: 0,
                problem: bytes.isEmpty ? nil : "not a segment (bad or short header)")
        }
        let streamID = StreamID(bytes: Array(bytes[8..<24]))
        let segment = bytes.readLittleEndian(UInt64.self, at: 24)
        var records: [SpoolRecord] = []
        var offset = headerSize
        var problem: String?
        while offset < bytes.count {
            switch readRecord(bytes, at: offset) {
            case .record(let record, let next):
                records.append(record)
                offset = next
            case .problem(let found):
                problem = found
            }
            if problem != nil { break }
        }
        return ParsedSegment(
            streamID: streamID, segment: segment, records: records, validLength: offset, problem: problem)
    }

    /// What is at `offset`: a valid record and where the next begins, or what is wrong.
    private enum RecordRead {
        case record(SpoolRecord, next: Int)
        case problem(String)
    }

    private static func readRecord(_ bytes: [UInt8], at offset: Int) -> RecordRead {
        guard bytes.count - offset >= frameSize else { return .problem("torn record frame at byte \(offset)") }
        let length = Int(bytes.readLittleEndian(UInt32.self, at: offset))
        let crc = bytes.readLittleEndian(UInt32.self, at: offset + 4)
        guard length >= bodyPrefixSize, length <= bodyPrefixSize + maximumLineBytes else {
            return .problem("invalid record length \(length) at byte \(offset)")
        }
        guard bytes.count - offset - frameSize >= length else {
            return .problem(
                "torn record at byte \(offset): \(length) bytes announced, \(bytes.count - offset - frameSize) present")
        }
        let bodyStart = offset + frameSize
        let actual = bytes.withUnsafeBytes {
            CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[bodyStart..<(bodyStart + length)]))
        }
        guard actual == crc else { return .problem("checksum mismatch in the record at byte \(offset)") }
        let record = SpoolRecord(
            sequence: bytes.readLittleEndian(UInt64.self, at: bodyStart),
            time: bytes.readLittleEndian(UInt64.self, at: bodyStart + 8),
            line: Array(bytes[(bodyStart + bodyPrefixSize)..<(bodyStart + length)]))
        return .record(record, next: bodyStart + length)
    }
}

extension SegmentFormat {
    /// `parsed` without an append a crash cut short: the records after the last one that
    /// ends an append (see the type's documentation). For the segment being written when
    /// the process died; a sealed segment holds whole appends only.
    static func wholeAppends(_ parsed: ParsedSegment) -> ParsedSegment {
        guard let lastEnd = parsed.records.lastIndex(where: { $0.time & 1 == 1 }) else {
            guard !parsed.records.isEmpty else { return parsed }
            return ParsedSegment(
                streamID: parsed.streamID, segment: parsed.segment, records: [], validLength: headerSize,
                problem: "an append cut short by the crash: its \(parsed.records.count) records dropped")
        }
        let dropped = parsed.records.count - lastEnd - 1
        guard dropped > 0 else { return parsed }
        let kept = Array(parsed.records[...lastEnd])
        let length = kept.reduce(headerSize) { $0 + frameSize + bodyPrefixSize + $1.line.count }
        return ParsedSegment(
            streamID: parsed.streamID, segment: parsed.segment, records: kept, validLength: length,
            problem: "an append cut short by the crash: its \(dropped) records dropped"
                + (parsed.problem.map { "; then \($0)" } ?? ""))
    }
}

extension SegmentFormat {
    /// The segment being written when the process died, read past damage: what a crash
    /// cut (the tail after the last record that ends an append) is dropped whole, as
    /// ``wholeAppends(_:)`` does; damage inside an append that was completed — a later
    /// record ending an append is there, so the crash did not cut it — loses only the
    /// damaged bytes. After a damaged stretch the parse finds the next valid record (its
    /// frame, checksum and a sequence a little past the last good one) and goes on.
    ///
    /// `rewritten` holds the segment's new bytes when records after damage are kept (the
    /// damaged stretch left out: an open segment was never uploaded, so its bytes may
    /// change); `nil` when the kept records are a prefix of the file (cut back as before).
    static func recoverOpen(_ bytes: [UInt8]) -> (parsed: ParsedSegment, rewritten: [UInt8]?) {
        let first = parse(bytes)
        guard first.problem != nil, let streamID = first.streamID, let segment = first.segment else {
            return (wholeAppends(first), nil)
        }
        var records = first.records
        var damaged: [(offset: Int, problem: String)] = [(first.validLength, first.problem ?? "")]
        var offset = first.validLength
        var lastSequence = records.last?.sequence ?? 0
        while let resumed = resynchronize(bytes, after: offset, lastSequence: lastSequence) {
            offset = resumed
            while offset < bytes.count, case .record(let record, let next) = readRecord(bytes, at: offset) {
                records.append(record)
                lastSequence = record.sequence
                offset = next
            }
            guard offset < bytes.count, case .problem(let problem) = readRecord(bytes, at: offset) else { break }
            damaged.append((offset, problem))
        }
        let whole = wholeAppends(
            ParsedSegment(streamID: streamID, segment: segment, records: records, validLength: 0, problem: nil))
        // Nothing past the first damage survives the rule for torn appends: cut back as before.
        guard whole.records.count > first.records.count else {
            return (wholeAppends(first), nil)
        }
        var rewritten = header(streamID: streamID, segment: segment)
        for record in whole.records {
            appendRecord(
                sequence: record.sequence, time: record.time, line: record.line, endsAppend: record.time & 1 == 1,
                to: &rewritten)
        }
        let places = damaged.map { "byte \($0.offset) (\($0.problem))" }.joined(separator: ", ")
        let problem =
            "damage inside appends that were completed, at \(places): \(records.count - first.records.count) "
            + "records read past it" + (whole.problem.map { "; \($0)" } ?? "")
        return (
            ParsedSegment(
                streamID: streamID, segment: segment, records: whole.records, validLength: rewritten.count,
                problem: problem),
            rewritten
        )
    }

    /// The offset of the next valid record after the damage at `offset`: a whole frame
    /// whose checksum holds and whose sequence follows `lastSequence` closely (a random
    /// match of both is below one in 10^15). `nil` when none is left.
    private static func resynchronize(_ bytes: [UInt8], after offset: Int, lastSequence: UInt64) -> Int? {
        var candidate = offset + 1
        while candidate + frameSize + bodyPrefixSize <= bytes.count {
            let sequence = bytes.readLittleEndian(UInt64.self, at: candidate + frameSize)
            if sequence > lastSequence, sequence - lastSequence <= 1 << 20,
                case .record = readRecord(bytes, at: candidate)
            {
                return candidate
            }
            candidate += 1
        }
        return nil
    }
}

/// A segment as read back: its records up to the first problem, if any.
package struct ParsedSegment: Sendable, Equatable {
    /// The stream ID from the header; `nil` without a valid header.
    package let streamID: StreamID?
    /// The segment number from the header.
    package let segment: UInt64?
    /// Every valid record before the first problem.
    package let records: [SpoolRecord]
    /// Bytes up to the end of the last valid record (the header alone counts).
    package let validLength: Int
    /// What stopped the parse early, or `nil` when every byte was valid.
    package let problem: String?
}

/// The 128-bit identity of a spool's stream, printed as 32 hex digits.
package struct StreamID: Sendable, Hashable, CustomStringConvertible {
    /// The 16 bytes.
    package let bytes: [UInt8]

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// Sixteen random bytes.
    static func random() -> StreamID {
        var generator = SystemRandomNumberGenerator()
        return StreamID(bytes: (0..<16).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
    }

    /// Parses 32 hex digits.
    package init?(hex: String) {
        let digits = Array(hex.utf8)
        guard digits.count == 32 else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: 32, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else {
                return nil
            }
            bytes.append(byte)
        }
        self.bytes = bytes
    }

    /// 32 lowercase hex digits.
    package var description: String {
        bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }
}

/// The stable name of a sealed segment: `<stream-id>/<20-digit number>.log`.
package enum SegmentName {
    /// The name a sink stores segment `number` of `stream` under.
    package static func make(stream: StreamID, segment: UInt64) -> String {
        "\(stream)/\(padded(segment)).log"
    }

    /// The file name of a segment kept outside the checkpoint's numbering (in `resend/`
    /// and `dead-letter/`): `<stream-id>-<20-digit number>.seg`, unique across streams.
    static func resendFileName(stream: StreamID, segment: UInt64) -> String {
        "\(stream)-\(padded(segment)).seg"
    }

    /// The stream and number in a ``resendFileName(stream:segment:)``.
    static func parseResend(_ name: String) -> (StreamID, UInt64)? {
        let parts = name.split(separator: "-")
        guard parts.count == 2, parts[1].hasSuffix(".seg"), let stream = StreamID(hex: String(parts[0])),
            let number = UInt64(parts[1].dropLast(4))
        else { return nil }
        return (stream, number)
    }

    static func padded(_ number: UInt64) -> String {
        let digits = String(number)
        return String(repeating: "0", count: max(0, 20 - digits.count)) + digits
    }
}

extension Array where Element == UInt8 {
    mutating func appendLittleEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }

    func readLittleEndian<T: FixedWidthInteger>(_ type: T.Type, at offset: Int) -> T {
        withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: T.self)) }
    }
}
