// Standard base64 (RFC 4648, with padding): S3's checksums, systemd's MEMORY_PRESSURE_WRITE.

/// Base64 with the standard alphabet and `=` padding.
package enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// `bytes` as base64 text.
    package static func encode(_ bytes: [UInt8]) -> String {
        var text = [UInt8]()
        text.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            var value = 0
            for (offset, byte) in chunk.enumerated() { value |= Int(byte) << (16 - 8 * offset) }
            for position in 0..<4 {
                text.append(position <= chunk.count ? alphabet[(value >> (18 - 6 * position)) & 63] : UInt8(ascii: "="))
            }
            index += 3
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The bytes `text` encodes, or `nil` when it is not base64 (a character outside the
    /// alphabet, a length that is not a multiple of four, padding anywhere but the end).
    /// Whitespace is not accepted: what systemd writes has none.
    package static func decode(_ text: String) -> [UInt8]? {
        let characters = Array(text.utf8)
        guard characters.count % 4 == 0 else { return nil }
        var bytes = [UInt8]()
        bytes.reserveCapacity(characters.count / 4 * 3)
        var quad = 0
        while quad < characters.count {
            var value = 0
            var padding = 0
            for offset in 0..<4 {
                let character = characters[quad + offset]
                if character == UInt8(ascii: "=") {
                    // Only the last one or two of the last quad.
                    guard quad + 4 == characters.count, offset >= 2 else { return nil }
                    padding += 1
                    value <<= 6
                    continue
                }
                guard padding == 0, let digit = digit(character) else { return nil }
                value = value << 6 | digit
            }
            bytes.append(UInt8(value >> 16 & 0xFF))
            if padding < 2 { bytes.append(UInt8(value >> 8 & 0xFF)) }
            if padding < 1 { bytes.append(UInt8(value & 0xFF)) }
            quad += 4
        }
        return bytes
    }

    private static func digit(_ character: UInt8) -> Int? {
        switch character {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): Int(character - UInt8(ascii: "A"))
        case UInt8(ascii: "a")...UInt8(ascii: "z"): Int(character - UInt8(ascii: "a")) + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): Int(character - UInt8(ascii: "0")) + 52
        case UInt8(ascii: "+"): 62
        case UInt8(ascii: "/"): 63
        default: nil
        }
    }
}
