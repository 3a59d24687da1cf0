import Overtime

/// Stores each sealed segment as one object, `<prefix>/<stream-id>/<segment>.log[.zst|.gz]`,
/// in an S3 bucket or an S3-compatible store (MinIO, SeaweedFS, Ceph RGW, Garage), through
/// the same libcurl path on the runtime's loop as ``HTTPSink``. Requests are signed with
/// AWS Signature Version 4 (SHA-256 and HMAC from the system's libcrypto).
///
/// **Exactly once per segment.** Every PUT carries `If-None-Match: *`, so the store refuses
/// (412) to replace an object under the segment's name. After a 412 the object is
/// downloaded and compared with the segment (decoded first, when compressed): the same
/// content counts as stored — an upload before a crash that the checkpoint did not yet
/// record — and anything else is refused for good (``SinkError/permanent(_:)``: the
/// segment goes to the dead-letter folder, loudly) and never overwritten. Every PUT also
/// carries `x-amz-checksum-crc32c` of the object, so the store checks the bytes it got.
///
/// Answers: 2xx stored; 5xx, 404 (no bucket yet), 408, 409, 429, `SlowDown` and the codes in
/// ``S3SinkConfiguration/retryableErrorCodes`` are retried with the uploader's backoff — a
/// `RequestTimeTooSkewed` named as a wrong clock; any other 4xx (a wrong secret or key
/// (`SignatureDoesNotMatch`, `InvalidAccessKeyId`), `AccessDenied`) is refused for good
/// with the store's code and message in the error. Cancelling the upload's task
/// (expiration) aborts the transfer in flight.
///
/// A segment is read into memory to be hashed and sent (segments are small: the spool
/// seals at ``SpoolConfiguration/segmentBytes``).
public final class S3Sink: LogSink {
    /// Where segments go.
    public let configuration: S3SinkConfiguration
    private let client: HTTPClient
    private let clock: any RuntimeClock
    private let signer: SignatureV4
    private let scheme: String
    private let host: String
    private let bucketPath: String

    /// Stores under `configuration`, on `runtime`'s loop, signing with `runtime`'s wall clock.
    ///
    /// - Throws: ``S3ConfigurationError`` when the configuration cannot work.
    public init(configuration: S3SinkConfiguration, runtime: Runtime) throws(S3ConfigurationError) {
        try configuration.validate()
        self.configuration = configuration
        client = HTTPClient(runtime: runtime)
        clock = runtime.clock
        signer = SignatureV4(credentials: configuration.credentials, region: configuration.region)
        let endpoint = configuration.endpoint ?? "https://s3.\(configuration.region).amazonaws.com"
        guard let (scheme, authority) = S3SinkConfiguration.split(endpoint: endpoint) else {
            throw S3ConfigurationError("an endpoint is http(s)://host[:port] without a path; got '\(endpoint)'")
        }
        self.scheme = scheme
        let addressing = configuration.addressing ?? (configuration.endpoint == nil ? .virtualHosted : .path)
        if addressing == .virtualHosted {
            host = configuration.bucket + "." + authority
            bucketPath = ""
        } else {
            host = authority
            bucketPath = "/" + configuration.bucket
        }
    }

    /// The bucket, prefix and endpoint; never the secret.
    public var description: String { configuration.description }

    /// Why the libraries the sink needs (libcurl, libcrypto) cannot be loaded, or `nil` once
    /// they are. A program may ask at start to fail early; until they load, uploads are retried.
    public static var librariesUnavailable: String? { HTTPClient.libcurlUnavailable ?? Digests.libcryptoUnavailable }

    /// The key `segment` is stored under.
    public func objectKey(for segment: SealedSegment) -> String {
        let prefix = configuration.prefix
        return (prefix.isEmpty ? "" : prefix + "/") + segment.name + configuration.encoding.fileExtension
    }

    /// Uploads the segment unless its name is taken by the same content; returns once the
    /// store holds it under ``objectKey(for:)``.
    public func store(_ segment: SealedSegment) async throws(SinkError) {
        let key = objectKey(for: segment)
        let content = try segment.readBytes()
        let encoding = configuration.encoding
        let object = try encoding.encode(content)
        var headers = [
            (name: "Content-Type", value: "application/octet-stream"), (name: "If-None-Match", value: "*"),
            (name: "x-amz-checksum-crc32c", value: Digests.crc32cHeaderValue(object)),
        ]
        if let contentEncoding = encoding.contentEncoding { headers.append(("Content-Encoding", contentEncoding)) }
        let put = try await send("PUT", key: key, headers: headers, body: object)
        switch put.status {
        case 200...299: return
        case 412: try await verifyStored(content, key: key)  // the name is taken
        default: throw failure(put, asking: "PUT", key: key)
        }
    }

    /// The name is taken: stored when the object holds our content, refused for good otherwise.
    private func verifyStored(_ content: [UInt8], key: String) async throws(SinkError) {
        let encoding = configuration.encoding
        let get = try await send(
            "GET", key: key, headers: [], body: [], responseLimit: encoding.largestObject(contentBytes: content.count))
        guard (200...299).contains(get.status) else { throw failure(get, asking: "GET", key: key) }
        guard try encoding.object(get.body, holds: content) else {
            throw .permanent(
                "a different object (\(get.body.count) bytes) is already stored as \(key) in \(configuration.bucket); "
                    + "not overwritten")
        }
    }

    private func failure(_ response: HTTPResponse, asking method: String, key: String) -> SinkError {
        S3ErrorResponse(response).failure(
            asking: method, key: key, retryableCodes: configuration.retryableErrorCodes)
    }

    /// One signed request for `key`.
    private func send(
        _ method: String, key: String, headers: [(name: String, value: String)], body: [UInt8],
        responseLimit: Int = 64 << 10
    ) async throws(SinkError) -> HTTPResponse {
        let path = bucketPath + "/" + SignatureV4.encode(key, keepingSlashes: true)
        let signable = SignatureV4.Request(
            method: method, host: host, encodedPath: path, headers: headers,
            payloadHash: Digests.hex(try Digests.sha256(body)))
        var request = HTTPRequest(method: method, url: scheme + "://" + host + path)
        request.headers = try signer.headers(for: signable, at: clock.wallClockNow)
        if method == "PUT" { request.body = .bytes(body) }
        request.responseLimit = responseLimit
        return try await client.perform(request)
    }
}
