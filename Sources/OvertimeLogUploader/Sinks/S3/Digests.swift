// SHA-256 and HMAC-SHA256 through the system's libcrypto, and CRC-32C in S3's header form.

import CLibCrypto
import OvertimeSupport

/// The hashes a signed S3 request needs.
enum Digests {
    /// Why libcrypto cannot be loaded, or `nil` once it is (loaded by the first call).
    static var libcryptoUnavailable: String? { libcryptoLoadFailure }

    private static let libcryptoLoadFailure: String? = {
        var error = [CChar](repeating: 0, count: 256)
        guard overtime_crypto_load(&error, error.count) != 0 else { return nil }
        return String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }()

    /// SHA-256 of `bytes`.
    static func sha256(_ bytes: [UInt8]) throws(SinkError) -> [UInt8] {
        if let unavailable = libcryptoUnavailable { throw .retryable(unavailable, retryAfter: nil) }
        var digest = [UInt8](repeating: 0, count: 32)
        let status = bytes.withUnsafeBytes { overtime_sha256($0.baseAddress, $0.count, &digest) }
        guard status == 0 else { throw .retryable("libcrypto could not compute SHA-256", retryAfter: nil) }
        return digest
    }

    /// HMAC-SHA256 of `data` under `key`.
    static func hmacSHA256(key: [UInt8], _ data: [UInt8]) throws(SinkError) -> [UInt8] {
        if let unavailable = libcryptoUnavailable { throw .retryable(unavailable, retryAfter: nil) }
        var mac = [UInt8](repeating: 0, count: 32)
        let status = key.withUnsafeBytes { key in
            data.withUnsafeBytes { overtime_hmac_sha256(key.baseAddress, key.count, $0.baseAddress, $0.count, &mac) }
        }
        guard status == 0 else { throw .retryable("libcrypto could not compute HMAC-SHA256", retryAfter: nil) }
        return mac
    }

    /// `x-amz-checksum-crc32c`'s value: the CRC-32C of `bytes`, big-endian, in base64.
    static func crc32cHeaderValue(_ bytes: [UInt8]) -> String {
        let crc = CRC32C.checksum(bytes)
        return base64([UInt8(crc >> 24), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc & 0xFF)])
    }

    /// Lowercase hexadecimal.
    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// Standard base64 with padding.
    static func base64(_ bytes: [UInt8]) -> String { Base64.encode(bytes) }
}
