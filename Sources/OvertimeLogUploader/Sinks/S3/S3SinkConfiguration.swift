// Where an S3 sink stores segments, how it addresses the bucket, and the `s3://` URL form
// programs take on their command lines.

/// Where and how an ``S3Sink`` stores segments: objects
/// `<prefix>/<stream-id>/<segment>.log[.zst|.gz]` in `bucket`.
public struct S3SinkConfiguration: Sendable, CustomStringConvertible {
    /// How the bucket appears in request URLs.
    public struct Addressing: Sendable, Hashable, CustomStringConvertible {
        private enum Kind: Hashable {
            case path, virtualHosted
        }

        private let kind: Kind

        /// `http://endpoint/bucket/key`: what most S3-compatible stores (MinIO, SeaweedFS,
        /// Ceph RGW, Garage) expect.
        public static let path = Addressing(kind: .path)
        /// `https://bucket.endpoint/key`: what AWS prefers.
        public static let virtualHosted = Addressing(kind: .virtualHosted)

        /// `path` or `virtual`, as in the URL form.
        public var description: String { kind == .path ? "path" : "virtual" }
    }

    /// The bucket (3 to 63 lowercase letters, digits, dots and hyphens).
    public var bucket: String
    /// What every key starts with, without leading or trailing slashes (may be empty).
    public var prefix: String
    /// The region requests are signed for. Default `us-east-1`, which S3-compatible
    /// stores accept whatever their own setting.
    public var region = "us-east-1"
    /// `http(s)://host[:port]` of the store, or nil for AWS
    /// (`https://s3.<region>.amazonaws.com`).
    public var endpoint: String?
    /// How the bucket is addressed; nil: ``Addressing/path`` with an endpoint,
    /// ``Addressing/virtualHosted`` on AWS.
    public var addressing: Addressing?
    /// The keys requests are signed with.
    public var credentials: S3Credentials
    /// How segments are encoded and named: default ``SegmentEncoding/identity``.
    public var encoding = SegmentEncoding.identity
    /// Objects larger than this many bytes (after compression) go in a multipart upload;
    /// smaller ones in one PUT. Default 8 MiB; 5 MiB to 5 GiB.
    public var multipartThresholdBytes = 8 << 20
    /// The size of each part of a multipart upload but the last. Default 8 MiB; 5 MiB (S3's
    /// smallest) to 5 GiB — more when an object would need over 10,000 parts.
    public var partBytes = 8 << 20
    /// S3 error codes retried although their status would refuse the segment for good:
    /// a clock that steps back into line, a body damaged in transit, a token renewed.
    public var retryableErrorCodes: Set<String> = [
        "RequestTimeTooSkewed", "RequestTimeout", "BadDigest", "InvalidDigest", "XAmzContentSHA256Mismatch",
        "ExpiredToken", "TokenRefreshRequired", "NoSuchBucket", "OperationAborted", "ConditionalRequestConflict",
        "SlowDown", "InternalError", "ServiceUnavailable",
    ]

    /// Objects under `prefix` in `bucket`, signed with `credentials`.
    public init(bucket: String, prefix: String = "", credentials: S3Credentials) {
        self.bucket = bucket
        self.prefix = prefix
        self.credentials = credentials
    }

    /// Reads `s3://bucket[/prefix][?endpoint=URL&region=R&addressing=path|virtual&compression=none|zstd|gzip]`,
    /// and `multipart-threshold=` and `part-size=` in bytes.
    ///
    /// - Throws: ``S3ConfigurationError`` naming what is wrong.
    public init(url: String, credentials: S3Credentials) throws(S3ConfigurationError) {
        guard url.hasPrefix("s3://") else { throw S3ConfigurationError("an S3 URL starts with s3://; got '\(url)'") }
        let rest = url.dropFirst("s3://".count)
        let location = rest.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let path = location[0]
        let bucketEnd = path.firstIndex(of: "/") ?? path.endIndex
        self.init(bucket: String(path[..<bucketEnd]), credentials: credentials)
        prefix = Self.trimmedSlashes(String(path[bucketEnd...]))
        if location.count == 2 {
            for item in location[1].split(separator: "&") {
                let pair = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let value = try Self.percentDecoded(pair.count == 2 ? String(pair[1]) : "")
                switch pair[0] {
                case "endpoint": endpoint = value
                case "region": region = value
                case "addressing":
                    switch value {
                    case "path": addressing = .path
                    case "virtual", "virtual-hosted": addressing = .virtualHosted
                    default: throw S3ConfigurationError("addressing is path or virtual; got '\(value)'")
                    }
                case "compression":
                    guard let named = SegmentEncoding(name: value) else {
                        throw S3ConfigurationError("compression is none, zstd or gzip; got '\(value)'")
                    }
                    encoding = named
                case "multipart-threshold":
                    multipartThresholdBytes = try Self.byteCount(value, of: "multipart-threshold")
                case "part-size": partBytes = try Self.byteCount(value, of: "part-size")
                default:
                    throw S3ConfigurationError(
                        "unknown S3 URL parameter '\(pair[0])' (endpoint, region, addressing, compression, "
                            + "multipart-threshold, part-size)")
                }
            }
        }
        try validate()
    }

    /// Checks the bucket, region, endpoint and part sizes.
    ///
    /// - Throws: ``S3ConfigurationError`` naming the first problem.
    public func validate() throws(S3ConfigurationError) {
        let allowed = bucket.utf8.allSatisfy {
            ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z")) || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9"))
                || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".")
        }
        guard (3...63).contains(bucket.utf8.count), allowed, bucket.first != "-", bucket.first != ".",
            bucket.last != "-", bucket.last != "."
        else {
            throw S3ConfigurationError(
                "a bucket name is 3 to 63 lowercase letters, digits, dots and hyphens; got '\(bucket)'")
        }
        guard !region.isEmpty, region.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "/") }) else {
            throw S3ConfigurationError("a region is a name such as us-east-1; got '\(region)'")
        }
        let partSizes = S3MultipartUpload.minimumPartBytes...S3MultipartUpload.maximumPartBytes
        for (name, value) in [("multipartThresholdBytes", multipartThresholdBytes), ("partBytes", partBytes)]
        where !partSizes.contains(value) {
            throw S3ConfigurationError("\(name) is 5 MiB (5242880) to 5 GiB (5368709120) bytes; got \(value)")
        }
        if let endpoint, Self.split(endpoint: endpoint) == nil {
            // Never the endpoint as given: a user and password in it would be printed.
            let shown = HTTPSink.redacting(endpoint)
            if endpoint.contains("@") {
                throw S3ConfigurationError(
                    "an endpoint takes no user or password (the keys come from the credential); got '\(shown)'")
            }
            throw S3ConfigurationError("an endpoint is http(s)://host[:port] without a path; got '\(shown)'")
        }
    }

    /// `s3://bucket/prefix`, the endpoint and the encoding; never the credentials' secret.
    public var description: String {
        "s3://\(bucket)/\(prefix)" + (endpoint.map { " at \($0)" } ?? " on AWS \(region)")
            + (encoding == .identity ? "" : ", \(encoding)")
    }

    /// `(scheme, host[:port])` of an endpoint URL, or nil when it is not `http(s)://authority[/]`.
    static func split(endpoint: String) -> (scheme: String, authority: String)? {
        for scheme in ["http", "https"] where endpoint.hasPrefix(scheme + "://") {
            var authority = endpoint.dropFirst(scheme.count + 3)
            if authority.hasSuffix("/") { authority.removeLast() }
            guard !authority.isEmpty, !authority.contains("/"), !authority.contains("?"), !authority.contains("@"),
                authority.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
            else { return nil }
            // The port the scheme implies is left out, as the Host header leaves it out.
            let implied = scheme == "http" ? ":80" : ":443"
            if authority.hasSuffix(implied) { authority.removeLast(implied.count) }
            return (scheme, String(authority))
        }
        return nil
    }

    private static func byteCount(_ text: String, of name: String) throws(S3ConfigurationError) -> Int {
        guard let count = Int(text), count >= 0 else {
            throw S3ConfigurationError("\(name) is a number of bytes; got '\(text)'")
        }
        return count
    }

    private static func trimmedSlashes(_ text: String) -> String {
        String(text.drop { $0 == "/" }.reversed().drop { $0 == "/" }.reversed())
    }

    private static func percentDecoded(_ text: String) throws(S3ConfigurationError) -> String {
        var bytes = [UInt8]()
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                throw S3ConfigurationError("a bad %-escape in the S3 URL parameter '\(text)'")
            }
            bytes.append(high << 4 | low)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// An S3 sink's configuration that cannot work: the words say what to fix.
public struct S3ConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What is wrong.
    public let reason: String

    /// An error saying `reason`.
    public init(_ reason: String) { self.reason = reason }

    /// The reason.
    public var description: String { reason }
}
