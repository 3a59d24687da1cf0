// AWS Signature Version 4 for S3 requests: a pure function of the request, the
// credentials and the time, checked against botocore's signatures for fixed inputs.

import Overtime

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Signs S3 requests (`AWS4-HMAC-SHA256`, service `s3`) with fixed credentials and region.
struct SignatureV4: Sendable {
    let credentials: S3Credentials
    let region: String

    /// What is signed: the request line, its headers and the hash of its body.
    struct Request {
        var method: String
        /// The `Host` header's value (with a port other than the scheme's default).
        var host: String
        /// The path, already URI-encoded (``SignatureV4/encode(_:keepingSlashes:)``).
        var encodedPath: String
        /// Query parameters, not encoded.
        var query: [(name: String, value: String)] = []
        /// Headers beyond `Host` and the `x-amz-*` ones the signer adds.
        var headers: [(name: String, value: String)] = []
        /// Lowercase hex SHA-256 of the body.
        var payloadHash: String
    }

    /// Every header to send, `Name: value`: the request's own, `Host`, `x-amz-date`,
    /// `x-amz-content-sha256`, `x-amz-security-token` when there is a session token, and
    /// `Authorization`.
    func headers(for request: Request, at time: WallClockInstant) throws(SinkError) -> [String] {
        let (date, stamp) = Self.dateAndStamp(time)
        var headers = request.headers
        headers.append(("Host", request.host))
        headers.append(("x-amz-content-sha256", request.payloadHash))
        headers.append(("x-amz-date", stamp))
        if let token = credentials.sessionToken { headers.append(("x-amz-security-token", token)) }
        let canonicalHeaders = headers.map { (name: $0.name.lowercased(), value: Self.trimmed($0.value)) }
            .sorted { $0.name < $1.name }
        let signedHeaders = canonicalHeaders.map(\.name).joined(separator: ";")
        let encodedQuery: [(name: String, value: String)] = request.query.map {
            (Self.encode($0.name), Self.encode($0.value))
        }
        let sortedQuery = encodedQuery.sorted { $0.name == $1.name ? $0.value < $1.value : $0.name < $1.name }
        let canonicalQuery = sortedQuery.map { $0.name + "=" + $0.value }.joined(separator: "&")
        let headerBlock = canonicalHeaders.map { $0.name + ":" + $0.value + "\n" }.joined()
        let canonicalRequest: String = [
            request.method, request.encodedPath, canonicalQuery, headerBlock, signedHeaders, request.payloadHash,
        ].joined(separator: "\n")
        let scope = "\(date)/\(region)/s3/aws4_request"
        let stringToSign = [
            "AWS4-HMAC-SHA256", stamp, scope, Digests.hex(try Digests.sha256(Array(canonicalRequest.utf8))),
        ].joined(separator: "\n")
        var key = Array(("AWS4" + credentials.secretAccessKey).utf8)
        for part in [date, region, "s3", "aws4_request"] { key = try Digests.hmacSHA256(key: key, Array(part.utf8)) }
        let signature = Digests.hex(try Digests.hmacSHA256(key: key, Array(stringToSign.utf8)))
        let authorization =
            "AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyID)/\(scope), "
            + "SignedHeaders=\(signedHeaders), Signature=\(signature)"
        return headers.map { $0.name + ": " + $0.value } + ["Authorization: " + authorization]
    }

    /// URI-encodes `text` as SigV4 asks: everything but `A-Z a-z 0-9 - _ . ~` as `%XX`
    /// (uppercase), and `/` too unless `keepingSlashes` (a path).
    static func encode(_ text: String, keepingSlashes: Bool = false) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        var encoded = [UInt8]()
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."),
                UInt8(ascii: "~"):
                encoded.append(byte)
            case UInt8(ascii: "/") where keepingSlashes:
                encoded.append(byte)
            default:
                encoded += [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 0xF)]]
            }
        }
        return String(decoding: encoded, as: UTF8.self)
    }

    /// `yyyyMMdd` and `yyyyMMdd'T'HHmmss'Z'` of `time`, in UTC.
    static func dateAndStamp(_ time: WallClockInstant) -> (date: String, stamp: String) {
        var seconds = time_t(time.nanosecondsSinceEpoch / 1_000_000_000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let date = "\(parts.tm_year + 1900)" + two(parts.tm_mon + 1) + two(parts.tm_mday)
        return (date, date + "T" + two(parts.tm_hour) + two(parts.tm_min) + two(parts.tm_sec) + "Z")
    }

    /// A header value as signed: outer spaces removed, inner runs of spaces made one.
    private static func trimmed(_ value: String) -> String {
        value.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
    }
}
