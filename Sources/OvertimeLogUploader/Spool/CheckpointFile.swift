// The checkpoint file: how far uploads got, in two checksummed slots written in place.
//
// ```
// checkpoint   8,192 bytes, allocated once when the spool is made
//   slot A at byte 0, slot B at byte 4,096 (each 64 bytes, the rest zero):
//   "OTCKPT02" | generation (u64) | stream ID (16) | segment (u64) | sequence (u64)
//   | reserved (u64, 0) | CRC-32C of the 56 bytes before (u32) | zero (u32)
// ```
//
// Why two slots, both written every time (A, fdatasync, B, fdatasync): a torn or rotted
// slot always leaves the other one holding either the same checkpoint or, when the write
// of A tore, the one before it, whose segments are still on disk (they are deleted only
// after the checkpoint is durable). So one damaged slot never loses numbering; two
// damaged slots are detected, never trusted. Why in place: acknowledging must not need a
// free block, or a spool that filled its disk could never delete what it uploaded.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A checkpoint as one slot stores it: the stream it numbers, and how far uploads got.
struct CheckpointRecord: Equatable {
    var generation: UInt64
    var stream: StreamID
    var checkpoint: Checkpoint
}

/// The pure part of the checkpoint file: encoding a slot, and choosing what to trust.
enum CheckpointFormat {
    static let magic: [UInt8] = Array("OTCKPT02".utf8)
    static let fileSize = 8192
    static let slotOffsets = [0, 4096]
    static let slotSize = 64
    private static let checkedBytes = 56

    static func encodeSlot(_ record: CheckpointRecord) -> [UInt8] {
        var bytes = magic
        bytes.appendLittleEndian(record.generation)
        bytes += record.stream.bytes
        bytes.appendLittleEndian(record.checkpoint.segment)
        bytes.appendLittleEndian(record.checkpoint.sequence)
        bytes.appendLittleEndian(UInt64(0))
        let crc = bytes.withUnsafeBytes { CRC32C.checksum($0) }
        bytes.appendLittleEndian(crc)
        bytes.appendLittleEndian(UInt32(0))
        return bytes
    }

    static func decodeSlot(_ bytes: ArraySlice<UInt8>) -> CheckpointRecord? {
        let slot = Array(bytes)
        guard slot.count >= slotSize, Array(slot[0..<8]) == magic else { return nil }
        let crc = slot.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[0..<checkedBytes])) }
        guard crc == slot.readLittleEndian(UInt32.self, at: checkedBytes) else { return nil }
        return CheckpointRecord(
            generation: slot.readLittleEndian(UInt64.self, at: 8),
            stream: StreamID(bytes: Array(slot[16..<32])),
            checkpoint: Checkpoint(
                segment: slot.readLittleEndian(UInt64.self, at: 32),
                sequence: slot.readLittleEndian(UInt64.self, at: 40)))
    }

    /// The whole file for `record`, both slots filled.
    static func encodeFile(_ record: CheckpointRecord) -> [UInt8] {
        var file = [UInt8](repeating: 0, count: fileSize)
        let slot = encodeSlot(record)
        for offset in slotOffsets { file.replaceSubrange(offset..<(offset + slotSize), with: slot) }
        return file
    }

    /// What a checkpoint file's bytes can be trusted for.
    enum Reading: Equatable {
        /// Both slots valid (the newer generation wins: a crash between the two writes).
        case valid(CheckpointRecord)
        /// A slot damaged or missing, or the file cut short or grown, with at least one slot
        /// intact: the intact slot is trusted (see the file's header for why that is safe).
        case partlyDamaged(CheckpointRecord, problem: String)
        /// Neither slot valid: the numbering cannot be proven.
        case damaged(reason: String)
    }

    /// Reads whatever slots the bytes hold whole, whatever the file's length: a slot that
    /// is intact is used, even in a file cut short.
    static func read(_ bytes: [UInt8]) -> Reading {
        if bytes.starts(with: Array("segment=".utf8)) {
            return .damaged(reason: "a checkpoint of the earlier text format, which has no checksum")
        }
        var problems: [String] = []
        if bytes.count != fileSize { problems.append("the file has \(bytes.count) bytes instead of \(fileSize)") }
        var intact: [CheckpointRecord] = []
        for (index, offset) in slotOffsets.enumerated() {
            guard bytes.count >= offset + slotSize else {
                problems.append("slot \(index) is missing")
                continue
            }
            if let record = decodeSlot(bytes[offset..<(offset + slotSize)]) {
                intact.append(record)
            } else {
                problems.append("slot \(index) fails its checksum")
            }
        }
        guard let newest = intact.max(by: { $0.generation < $1.generation }) else {
            return .damaged(reason: problems.joined(separator: "; "))
        }
        return problems.isEmpty ? .valid(newest) : .partlyDamaged(newest, problem: problems.joined(separator: "; "))
    }
}

/// The open checkpoint file: rewritten in place, slot by slot.
///
/// Used only under the spool's retiring lock, which orders every write.
final class CheckpointFile: @unchecked Sendable {  // guarded by Spool's `retiring` lock
    let path: String
    private let files: SpoolFiles
    private let fd: Int32
    private(set) var record: CheckpointRecord

    /// Opens the existing file at `path` (already validated) holding `record`.
    init(path: String, record: CheckpointRecord, files: SpoolFiles) throws(SpoolError) {
        self.path = path
        self.record = record
        self.files = files
        fd = try files.open(path, flags: O_RDWR)
    }

    deinit {
        files.close(fd)
    }

    /// Makes a new checkpoint file for `stream` (temp → fsync → rename → fsync of the folder).
    static func create(
        path: String, stream: StreamID, directory: String, files: SpoolFiles
    ) throws(SpoolError) -> CheckpointFile {
        let record = CheckpointRecord(generation: 1, stream: stream, checkpoint: Checkpoint(segment: 0, sequence: 0))
        try files.replaceAtomically(path, with: CheckpointFormat.encodeFile(record), directory: directory)
        return try CheckpointFile(path: path, record: record, files: files)
    }

    /// Makes a partly damaged file whole again: its length (a hole, needing no free block)
    /// and both slots, holding the record that was trusted.
    func repair() throws(SpoolError) {
        try files.truncate(fd, to: CheckpointFormat.fileSize, path: path)
        try write(record.checkpoint)
    }

    /// Writes `checkpoint` into both slots in place, each made durable before the next.
    func write(_ checkpoint: Checkpoint) throws(SpoolError) {
        let next = CheckpointRecord(generation: record.generation + 1, stream: record.stream, checkpoint: checkpoint)
        let slot = CheckpointFormat.encodeSlot(next)
        for offset in CheckpointFormat.slotOffsets {
            try files.writeAll(fd, slot, at: offset, path: path)
            try files.sync(fd, path: path)
        }
        record = next
    }
}
