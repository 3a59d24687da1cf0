import Logging
import Overtime
import OvertimeSupport

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
/// **Large objects in parts.** An object over ``S3SinkConfiguration/multipartThresholdBytes``
/// goes in a multipart upload of ``S3SinkConfiguration/partBytes`` parts, each with its
/// own CRC-32C, completed with `If-None-Match: *` — the same exactly-once rule. An upload
/// that cannot complete is aborted. Unfinished uploads a crash left under a stream's keys
/// (`<prefix>/<stream-id>/`, which only this spool's owner writes) are aborted before the
/// sink's first segment of that stream; a store that refuses the listing only costs a
/// warning (a bucket lifecycle rule `AbortIncompleteMultipartUpload` does the same job).
///
/// A segment is read into memory to be hashed and sent (segments are small: the spool
/// seals at ``SpoolConfiguration/segmentBytes``).
public final class S3Sink: LogSink {
    /// Where segments go.
    public let configuration: S3SinkConfiguration
    private let bucket: S3Bucket
    private let logger: Logger
    /// Each stream's sweep of leftover multipart uploads, once begun.
    private let sweeps = Locked<[Substring: Sweep]>([:])

    /// Where a stream's sweep stands: being made (other stores wait for it), or done.
    private enum Sweep: Sendable {
        case running(waiting: [CheckedContinuation<Void, Never>])
        case done
    }

    /// Stores under `configuration`, on `runtime`'s loop, signing with `runtime`'s wall
    /// clock; says on `logger` what it cleans up.
    ///
    /// - Throws: ``S3ConfigurationError`` when the configuration cannot work.
    public init(
        configuration: S3SinkConfiguration, runtime: Runtime, logger: Logger = Logger(label: "overtime.s3-sink")
    ) throws(S3ConfigurationError) {
        bucket = try S3Bucket(configuration: configuration, runtime: runtime)
        self.configuration = configuration
        self.logger = logger
    }

    /// The bucket, prefix and endpoint; never the secret.
    public var description: String { configuration.description }

    /// Any number: each store is a transfer of its own on libcurl's multi handle, on the
    /// runtime's loop (the uploader's ``UploaderConfiguration/maximumUploadsInFlight`` limits).
    public var concurrentStores: Int { .max }

    /// Why the libraries the sink needs (libcurl, libcrypto) cannot be loaded, or `nil` once
    /// they are. A program may ask at start to fail early; until they load, uploads are retried.
    public static var librariesUnavailable: String? { HTTPClient.libcurlUnavailable ?? Digests.libcryptoUnavailable }

    /// The key `segment` is stored under.
    public func objectKey(for segment: SealedSegment) -> String {
        keyPrefix + segment.name + configuration.encoding.fileExtension
    }

    /// What every key starts with: the prefix and a slash, or nothing.
    private var keyPrefix: String { configuration.prefix.isEmpty ? "" : configuration.prefix + "/" }

    /// Uploads the segment unless its name is taken by the same content; returns once the
    /// store holds it under ``objectKey(for:)``.
    public func store(_ segment: SealedSegment) async throws(SinkError) {
        try await abortLeftoverUploads(of: segment)
        let key = objectKey(for: segment)
        let content = try segment.readBytes()
        let encoding = configuration.encoding
        let object = try encoding.encode(content)
        var headers = [(name: "Content-Type", value: "application/octet-stream")]
        if let contentEncoding = encoding.contentEncoding { headers.append(("Content-Encoding", contentEncoding)) }
        let outcome =
            object.count > configuration.multipartThresholdBytes
            ? try await bucket.putInParts(object, key: key, headers: headers, partBytes: configuration.partBytes)
            : try await bucket.put(object, key: key, headers: headers)
        if outcome == .nameTaken { try await verifyStored(content, key: key) }
    }

    /// Once per stream, before its first upload here: aborts the multipart uploads a crash
    /// left under the stream's keys. A failure is logged and tried again with the next
    /// segment (or, refused for good, not again); it never holds the segment back.
    /// Stores that run at once share one sweep, made by the first of them (in its own task:
    /// no task of the global executor, whose threads would wake an idle daemon): a second
    /// sweep listing the first store's multipart upload would abort it.
    private func abortLeftoverUploads(of segment: SealedSegment) async throws(SinkError) {
        let stream = segment.name.prefix { $0 != "/" }
        let first = sweeps.withLock { sweeps in
            guard sweeps[stream] == nil else { return false }
            sweeps[stream] = .running(waiting: [])
            return true
        }
        if first {
            let done = await sweep(stream)
            let waiting = sweeps.withLock { sweeps -> [CheckedContinuation<Void, Never>] in
                defer { sweeps[stream] = done ? .done : nil }  // nil: tried again with the next segment
                if case .running(let waiting) = sweeps[stream] { return waiting }
                return []
            }
            for waiter in waiting { waiter.resume() }
        } else {
            await withCheckedContinuation { continuation in
                let running = sweeps.withLock { sweeps in
                    guard case .running(var waiting) = sweeps[stream] else { return false }
                    waiting.append(continuation)
                    sweeps[stream] = .running(waiting: waiting)
                    return true
                }
                if !running { continuation.resume() }
            }
        }
        if Task.isCancelled { throw .cancelled }
    }

    /// Aborts what a previous run left under `stream`'s keys; whether the stream needs no
    /// other sweep (done, or refused for good).
    private func sweep(_ stream: Substring) async -> Bool {
        let streamPrefix = keyPrefix + stream + "/"
        do {
            let aborted = try await bucket.abortUnfinishedUploads(under: streamPrefix)
            if aborted > 0 {
                logger.notice(
                    "aborted \(aborted) unfinished multipart upload(s) a previous run left under \(streamPrefix)")
            }
            return true
        } catch {
            if error.code == .cancelled { return false }
            logger.warning("cannot look for unfinished multipart uploads under \(streamPrefix): \(error)")
            return error.code == .permanent
        }
    }

    /// The name is taken: stored when the object holds our content, refused for good otherwise.
    private func verifyStored(_ content: [UInt8], key: String) async throws(SinkError) {
        let encoding = configuration.encoding
        let get = try await bucket.send(
            "GET", key: key, responseLimit: encoding.largestObject(contentBytes: content.count))
        guard (200...299).contains(get.status) else { throw bucket.failure(get, asking: "GET", key: key) }
        guard try encoding.object(get.body, holds: content) else {
            throw .permanent(
                "a different object (\(get.body.count) bytes) is already stored as \(key) in \(bucket.name); "
                    + "not overwritten")
        }
    }
}
