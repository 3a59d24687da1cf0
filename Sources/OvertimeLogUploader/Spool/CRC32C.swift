import CCRC32C

/// CRC-32C (Castagnoli), the checksum of every spool record.
///
/// Castagnoli rather than the zlib polynomial: better error detection for the record
/// sizes involved, the one storage formats use (iSCSI, ext4, LevelDB), and the one CPUs
/// compute in hardware (the C module `CCRC32C` uses that instruction when present).
enum CRC32C {
    /// The checksum of `bytes`.
    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        overtime_crc32c(0, bytes.baseAddress, bytes.count)
    }

    static func checksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { checksum($0) }
    }
}
