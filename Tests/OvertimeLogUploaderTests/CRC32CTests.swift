import OvertimeTestSupport
import Testing

@testable import OvertimeLogUploader

@Suite("CRC-32C of spool records")
struct CRC32CTests {
    /// The definition, a bit at a time: what the fast paths must agree with.
    private func reference(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
        }
        return ~crc
    }

    @Test func theStandardCheckValue() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([]) == 0)
    }

    @Test func everyLengthAndAlignmentMatchesTheDefinition() {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<300).map { _ in UInt8.random(in: 0...255, using: &generator) }
        for start in 0..<9 {
            for end in stride(from: start, through: bytes.count, by: 7) {
                let slice = bytes[start..<end]
                let fast = slice.withUnsafeBytes { CRC32C.checksum($0) }
                #expect(fast == reference(slice), "bytes \(start)..<\(end)")
            }
        }
    }
}
