// How a segment is encoded on its way to a collector: as it is in the spool, or compressed
// with zstd or gzip. The spool always keeps records uncompressed (its recovery reads them).

import CCompression
import CoreMetrics

/// How a sink encodes a segment for the collector, and how the stored object is named
/// (`<segment>.log`, `.log.zst`, `.log.gz`) and labelled (`Content-Encoding`).
///
/// Compression runs once per segment on the uploader's task (a 1 MiB segment of log lines
/// takes a few milliseconds with zstd's default level). The libraries are the system's
/// (Debian: libzstd1, zlib1g), loaded when a sink first compresses: a program that uploads
/// uncompressed loads neither. When a stored object is compared with a segment (the name
/// was taken), the object is decompressed first, so a different library version that
/// compresses the same lines to other bytes still counts as the same segment.
public struct SegmentEncoding: Sendable, Hashable, CustomStringConvertible {
    private enum Kind: Hashable {
        case identity, zstd, gzip
    }

    private let kind: Kind
    /// The compression level (zstd 1...19, gzip 1...9; 0 for ``identity``).
    public let level: Int

    /// The segment's bytes as the spool holds them. The default.
    public static let identity = SegmentEncoding(kind: .identity, level: 0)
    /// zstd at its default level, 3.
    public static let zstd = SegmentEncoding(kind: .zstd, level: 3)
    /// gzip (zlib) at its default level, 6.
    public static let gzip = SegmentEncoding(kind: .gzip, level: 6)

    /// zstd at `level`, clamped to 1...19.
    public static func zstd(level: Int) -> SegmentEncoding {
        SegmentEncoding(kind: .zstd, level: min(max(level, 1), 19))
    }

    /// gzip at `level`, clamped to 1...9.
    public static func gzip(level: Int) -> SegmentEncoding {
        SegmentEncoding(kind: .gzip, level: min(max(level, 1), 9))
    }

    /// The encoding named `none` (or `identity`), `zstd` or `gzip`, at its default level;
    /// nil for any other name.
    public init?(name: String) {
        switch name.lowercased() {
        case "none", "identity": self = .identity
        case "zstd": self = .zstd
        case "gzip": self = .gzip
        default: return nil
        }
    }

    private init(kind: Kind, level: Int) {
        self.kind = kind
        self.level = level
    }

    /// What stored objects' names end with after `.log`: `""`, `.zst` or `.gz`.
    public var fileExtension: String {
        switch kind {
        case .identity: ""
        case .zstd: ".zst"
        case .gzip: ".gz"
        }
    }

    /// The `Content-Encoding` an object carries, or nil for ``identity``.
    public var contentEncoding: String? {
        switch kind {
        case .identity: nil
        case .zstd: "zstd"
        case .gzip: "gzip"
        }
    }

    /// `none`, `zstd` or `gzip`, with a level other than the default.
    public var description: String {
        switch kind {
        case .identity: "none"
        case .zstd: level == 3 ? "zstd" : "zstd(level: \(level))"
        case .gzip: level == 6 ? "gzip" : "gzip(level: \(level))"
        }
    }

    /// Why this encoding's library cannot be loaded, or `nil` (always for ``identity``).
    public var libraryUnavailable: String? {
        guard let codec else { return nil }
        var error = [CChar](repeating: 0, count: 256)
        guard overtime_codec_load(codec, &error, error.count) != 0 else { return nil }
        return String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private var codec: overtime_codec? {
        switch kind {
        case .identity: nil
        case .zstd: OVERTIME_CODEC_ZSTD
        case .gzip: OVERTIME_CODEC_GZIP
        }
    }

    /// `bytes` encoded (for ``identity``, unchanged), as a sink sends them.
    ///
    /// - Throws: a retryable ``SinkError`` when the library cannot be loaded or fails.
    public func encode(_ bytes: [UInt8]) throws(SinkError) -> [UInt8] {
        guard let codec else { return bytes }
        if let unavailable = libraryUnavailable { throw .retryable(unavailable, retryAfter: nil) }
        var output = [UInt8](repeating: 0, count: overtime_codec_bound(codec, bytes.count))
        var written = 0
        let status = output.withUnsafeMutableBytes { out in
            bytes.withUnsafeBytes { input in
                overtime_codec_compress(
                    codec, Int32(level), input.baseAddress, input.count, out.baseAddress, out.count, &written)
            }
        }
        guard status == 0 else { throw .retryable("\(self) could not compress \(bytes.count) bytes", retryAfter: nil) }
        output.removeSubrange(written...)
        // What compression saves, per encoding: the figures before and after.
        let dimensions = [("encoding", contentEncoding ?? "none")]
        Counter(label: "overtime_uploader_compression_input_bytes_total", dimensions: dimensions)
            .increment(by: Int64(bytes.count))
        Counter(label: "overtime_uploader_compressed_bytes_total", dimensions: dimensions).increment(by: Int64(written))
        return output
    }

    /// The most bytes an object of `contentBytes` encoded this way can take.
    func largestObject(contentBytes: Int) -> Int {
        guard let codec, libraryUnavailable == nil else { return contentBytes }
        return overtime_codec_bound(codec, contentBytes)
    }

    /// Whether a stored object holds exactly `content` once decoded (`false` for an object
    /// that does not decode, or decodes to anything longer or different).
    func object(_ object: [UInt8], holds content: [UInt8]) throws(SinkError) -> Bool {
        guard let codec else { return object == content }
        if let unavailable = libraryUnavailable { throw .retryable(unavailable, retryAfter: nil) }
        var decoded = [UInt8](repeating: 0, count: content.count + 1)
        var written = 0
        let status = decoded.withUnsafeMutableBytes { out in
            object.withUnsafeBytes { input in
                overtime_codec_decompress(codec, input.baseAddress, input.count, out.baseAddress, out.count, &written)
            }
        }
        return status == 0 && written == content.count && decoded.prefix(written).elementsEqual(content)
    }
}
