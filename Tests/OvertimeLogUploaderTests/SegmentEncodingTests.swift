import Foundation
import OvertimeTestSupport
import Testing

@testable import OvertimeLogUploader

@Suite("Segment encodings: zstd and gzip through the system's libraries, checked by their own tools", .onOwnThread)
struct SegmentEncodingTests {
    static let content: [UInt8] = {
        var generator = SplitMix64(seed: 7)
        return (0..<2000).flatMap { index in
            Array("2026-11-22T21:00:\(index % 60)Z host app[\(generator.next() % 999)]: request \(index) done\n".utf8)
        }
    }()

    @Test(.startsProcesses, arguments: [SegmentEncoding.zstd, .gzip, .zstd(level: 19), .gzip(level: 1)])
    func anEncodedSegmentDecodesWithTheCommandLineToolAndHoldsTheContent(_ encoding: SegmentEncoding) throws {
        let encoded = try encoding.encode(Self.content)
        #expect(encoded.count < Self.content.count / 3, "log lines compress")
        #expect(try encoding.object(encoded, holds: Self.content))
        // The system's own tool reads it: what a downstream pipeline would do.
        let folder = TemporaryDirectory("encoding")
        defer { folder.remove() }
        let path = folder.path + "/object" + encoding.fileExtension
        try Data(encoded).write(to: URL(fileURLWithPath: path))
        let tool = encoding.contentEncoding == "zstd" ? "/usr/bin/zstd" : "/bin/gzip"
        let child = try SpawnedProcess(
            tool, ["-d", "-q", "-f", path], standardOutput: .discard, standardError: .discard)
        #expect(child.waitForExit() == 0)
        let decoded = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/object"))
        #expect(Array(decoded) == Self.content)
    }

    @Test(arguments: [SegmentEncoding.zstd, .gzip])
    func anObjectThatDiffersIsNotOurs(_ encoding: SegmentEncoding) throws {
        let encoded = try encoding.encode(Self.content)
        #expect(try !encoding.object(encoded, holds: Array(Self.content.dropLast())), "longer than the segment")
        #expect(try !encoding.object(encoded, holds: Self.content + [10]), "shorter than the segment")
        var changed = Self.content
        changed[500] ^= 1
        #expect(try !encoding.object(encoded, holds: changed))
        #expect(try !encoding.object(Array(encoded.dropLast(5)), holds: Self.content), "cut short")
        var damaged = encoded
        damaged[damaged.count / 2] ^= 0xFF
        #expect(try !encoding.object(damaged, holds: Self.content))
        #expect(try !encoding.object(Self.content, holds: Self.content), "not encoded at all")
        #expect(try !encoding.object([], holds: []))
        // Two concatenated frames/members decode as one stream, as the tools do.
        let half = Self.content.count / 2
        let twoParts = try encoding.encode(Array(Self.content[..<half])) + encoding.encode(Array(Self.content[half...]))
        #expect(try encoding.object(twoParts, holds: Self.content))
    }

    @Test func namesAndLevels() {
        #expect(SegmentEncoding(name: "ZSTD") == .zstd && SegmentEncoding(name: "none") == .identity)
        #expect(SegmentEncoding(name: "brotli") == nil)
        #expect(SegmentEncoding.zstd(level: 99).level == 19 && SegmentEncoding.gzip(level: -3).level == 1)
        #expect(SegmentEncoding.identity.fileExtension.isEmpty && SegmentEncoding.identity.contentEncoding == nil)
        #expect("\(SegmentEncoding.gzip(level: 9))" == "gzip(level: 9)")
    }
}

@Suite("S3 sink configuration: the s3:// URL form and clear refusals")
struct S3SinkConfigurationTests {
    let keys = S3Credentials(accessKeyID: "AKID", secretAccessKey: "secret")

    @Test func aFullURLIsRead() throws {
        let configuration = try S3SinkConfiguration(
            url: "s3://my.logs-1/fleet/a%20b/?endpoint=http%3A%2F%2F127.0.0.1%3A8333&region=eu-west-3"
                + "&addressing=virtual&compression=zstd",
            credentials: keys)
        #expect(configuration.bucket == "my.logs-1" && configuration.prefix == "fleet/a%20b")
        #expect(configuration.endpoint == "http://127.0.0.1:8333" && configuration.region == "eu-west-3")
        #expect(configuration.addressing == .virtualHosted && configuration.encoding == .zstd)
        let plain = try S3SinkConfiguration(url: "s3://bucket", credentials: keys)
        #expect(plain.prefix.isEmpty && plain.endpoint == nil && plain.addressing == nil)
        let unescaped = try S3SinkConfiguration(
            url: "s3://bucket/p?endpoint=https://s3.example:443/", credentials: keys)
        #expect(unescaped.endpoint == "https://s3.example:443/")
        let parts = try S3SinkConfiguration(
            url: "s3://bucket?multipart-threshold=67108864&part-size=16777216", credentials: keys)
        #expect(parts.multipartThresholdBytes == 64 << 20 && parts.partBytes == 16 << 20)
        #expect(plain.multipartThresholdBytes == 8 << 20 && plain.partBytes == 8 << 20)
    }

    @Test(arguments: [
        ("http://bucket/prefix", "starts with s3://"), ("s3://", "bucket name"), ("s3://Bucket/x", "bucket name"),
        ("s3://ab", "bucket name"), ("s3://b_c_d", "bucket name"), ("s3://-abc", "bucket name"),
        ("s3://bucket?endpoint=ftp://host", "endpoint"), ("s3://bucket?endpoint=http://host/path", "endpoint"),
        ("s3://bucket?endpoint=http://user@host", "endpoint"), ("s3://bucket?region=", "region"),
        ("s3://bucket?addressing=dns", "addressing"), ("s3://bucket?compression=lz4", "compression"),
        ("s3://bucket?colour=blue", "unknown S3 URL parameter"), ("s3://bucket?region=%zz", "%-escape"),
        ("s3://bucket?part-size=1048576", "partBytes is 5 MiB"), ("s3://bucket?part-size=8M", "number of bytes"),
        ("s3://bucket?multipart-threshold=-1", "number of bytes"),
        ("s3://bucket?multipart-threshold=6000000000", "multipartThresholdBytes is 5 MiB"),
        ("s3://bucket?endpoint=http://user:se/cret@host", "takes no user or password"),
        ("s3://bucket?endpoint=http://user:secret@host", "takes no user or password"),
    ])
    func aBadURLIsAClearError(_ url: String, _ words: String) {
        #expect {
            _ = try S3SinkConfiguration(url: url, credentials: keys)
        } throws: { error in
            "\(error)".contains(words) && !"\(error)".contains("cret")
        }
    }
}
