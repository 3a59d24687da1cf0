// Signed requests to one bucket: how it is addressed, signing with the runtime's wall
// clock, and the one HTTP client the sinks share.

import Overtime

/// Sends SigV4-signed requests for keys of one bucket, and words the store's refusals.
struct S3Bucket: Sendable {
    /// The bucket's name.
    let name: String
    private let client: HTTPClient
    private let clock: any RuntimeClock
    /// The runtime's loop, where work that belongs to no task runs (a cancelled upload's
    /// abort: signing a small request and awaiting its transfer never blocks).
    let loopExecutor: LoopExecutor
    private let signer: SignatureV4
    private let scheme: String
    private let host: String
    /// `/bucket` with path-style addressing, empty with virtual-hosted.
    private let bucketPath: String
    private let retryableCodes: Set<String>

    /// The bucket of `configuration`, on `runtime`'s loop.
    ///
    /// - Throws: ``S3ConfigurationError`` when the configuration cannot work.
    init(configuration: S3SinkConfiguration, runtime: Runtime) throws(S3ConfigurationError) {
        try configuration.validate()
        name = configuration.bucket
        client = HTTPClient(runtime: runtime)
        clock = runtime.clock
        loopExecutor = runtime.executor
        signer = SignatureV4(credentials: configuration.credentials, region: configuration.region)
        retryableCodes = configuration.retryableErrorCodes
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

    /// One signed request for `key` (empty: the bucket itself) with `query` parameters
    /// (not encoded); `body` is sent by every method but GET and HEAD.
    func send(
        _ method: String, key: String, query: [(name: String, value: String)] = [],
        headers: [(name: String, value: String)] = [], body: [UInt8] = [], responseLimit: Int = 64 << 10
    ) async throws(SinkError) -> HTTPResponse {
        let path =
            key.isEmpty
            ? (bucketPath.isEmpty ? "/" : bucketPath) : bucketPath + "/" + SignatureV4.encode(key, keepingSlashes: true)
        let signable = SignatureV4.Request(
            method: method, host: host, encodedPath: path, query: query, headers: headers,
            payloadHash: Digests.hex(try Digests.sha256(body)))
        let encodedQuery = query.map { SignatureV4.encode($0.name) + "=" + SignatureV4.encode($0.value) }
        var request = HTTPRequest(
            method: method,
            url: scheme + "://" + host + path + (encodedQuery.isEmpty ? "" : "?" + encodedQuery.joined(separator: "&")))
        request.headers = try signer.headers(for: signable, at: clock.wallClockNow)
        if method != "GET" && method != "HEAD" { request.body = .bytes(body) }
        request.responseLimit = responseLimit
        return try await client.perform(request)
    }

    /// What an answer that is not a success means: retried or refused for good, with the
    /// store's code and message.
    func failure(_ response: HTTPResponse, asking what: String, key: String) -> SinkError {
        S3ErrorResponse(response).failure(asking: what, key: key, retryableCodes: retryableCodes)
    }
}
