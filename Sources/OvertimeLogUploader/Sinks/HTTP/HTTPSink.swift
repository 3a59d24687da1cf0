import CLibCurl
import Overtime
import OvertimeSupport

/// Stores segments with HTTP PUT under stable names, `<base>/<stream-id>/<segment>.log`
/// (`.log.zst` or `.log.gz` with ``HTTPSinkConfiguration/encoding``), through libcurl's
/// multi-socket interface on the runtime's own loop.
///
/// **Never overwrites a stored segment with different bytes.** Every PUT carries
/// `If-None-Match: *`; a collector that honours it answers 412 instead of replacing. Not
/// every collector does (nginx's WebDAV module ignores it and replaces), so by default
/// the sink first asks (`HEAD`) whether the name is taken — for every segment a collector
/// may already hold: one found when the spool was opened or queued to be sent again
/// (``SealedSegment/mayAlreadyBeStored``), and one whose earlier request went out without
/// an answer. A segment sealed in this run, on its first attempt, cannot be stored under
/// a numbering the checkpoint proves, so it goes straight to the PUT (no extra round
/// trip on the common path). Whenever a name is taken, the stored object is downloaded
/// and compared (decoded first, when compressed): the same bytes count as stored (a retry after a crash), different bytes
/// are refused for good and never overwritten (``SinkError/permanent(_:)``: the segment
/// goes to the dead-letter folder, loudly). See ``HTTPSinkConfiguration/OverwriteProtection``.
///
/// 200, 201 and 204 mean stored; a status in ``HTTPSinkConfiguration/permanentStatuses``
/// is refused for good; every other status and every connection error is retried
/// (honouring `Retry-After`). Cancelling the upload's task (expiration) aborts the
/// transfer in flight.
///
/// nginx from Debian stores these with `dav_methods PUT; create_full_put_path on;` (its
/// worker user must own the target folder).
///
/// Never blocks the thread it is called on: an unencoded segment is read as it is sent,
/// by libcurl on the loop (it was just written: from the page cache); reading a segment
/// whole — to encode it, or to compare it with an object stored under its name — runs on
/// a thread of the sink's own, started the first time it is needed.
public final class HTTPSink: LogSink, NonBlockingLogSink {
    /// The URL segments are stored under, without a trailing slash.
    public let baseURL: String
    /// How statuses are read and overwrites prevented.
    public let configuration: HTTPSinkConfiguration
    private let client: HTTPClient
    /// Names whose request went out without a known outcome: asked about before the next try.
    private let uncertain = Locked<Set<String>>([])
    /// Where a segment is read whole (and encoded, or compared), off the caller's thread.
    private let reading = SerialWorkQueue(name: "overtime-http")

    /// Stores under `baseURL` (`http://host:port/prefix`) using `runtime`'s loop.
    public init(baseURL: String, runtime: Runtime, configuration: HTTPSinkConfiguration = .init()) {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.baseURL = base
        self.client = HTTPClient(runtime: runtime)
        self.configuration = configuration
    }

    /// The base URL, its password (if it names one) hidden: what logs and errors show.
    public var description: String { Self.redacting(baseURL) }

    /// `url` with the password of its user-info replaced by `***` (`http://user:***@host/…`),
    /// for every message a program writes: warnings are spooled and uploaded too.
    public static func redacting(_ url: String) -> String {
        guard let scheme = url.firstRange(of: "://") else { return url }
        let rest = url[scheme.upperBound...]
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? url.endIndex
        // A password holding an unencoded '/', '?' or '#' ends the authority early, and its
        // '@' is further on: a ':' before the end and an '@' after it may be a password cut
        // there. Everything from the ':' to the last '@' is hidden then (a path with an '@'
        // loses more of itself from the message, never a secret).
        let early = rest[..<authorityEnd]
        let at: Substring.Index? =
            early.lastIndex(of: "@") ?? (early.contains(":") ? rest[authorityEnd...].lastIndex(of: "@") : nil)
        guard let at else { return url }
        let userInfo = rest[..<at]
        let user = userInfo.firstIndex(of: ":").map { userInfo[..<$0] } ?? userInfo
        let hidden = userInfo.contains(":") ? "\(user):***" : "\(user)"
        return String(url[..<scheme.upperBound]) + hidden + String(url[at...])
    }

    /// Any number: each store is a transfer of its own on libcurl's multi handle, on the
    /// runtime's loop (the uploader's ``UploaderConfiguration/maximumUploadsInFlight`` limits).
    public var concurrentStores: Int { .max }

    /// Why libcurl cannot be loaded (it is loaded when the first request needs it, so a
    /// program that never uploads over HTTP does not load it), or `nil` once it is. A
    /// program may ask at start to fail early; until it loads, every upload is retried.
    public static var libcurlUnavailable: String? { HTTPClient.libcurlUnavailable }

    /// Uploads the segment's file unless the collector already stores it; returns once the
    /// collector holds exactly these bytes under the segment's name.
    public func store(_ segment: SealedSegment) async throws(SinkError) {
        let encoding = configuration.encoding
        let name = segment.name + encoding.fileExtension
        let url = baseURL + "/" + name
        let mayBeTaken = segment.mayAlreadyBeStored || uncertain.withLock { $0.contains(name) }
        if configuration.overwriteProtection == .checkBeforeUpload, mayBeTaken {
            let head = try await client.perform(HTTPRequest(method: "HEAD", url: url))
            switch head.status {
            case 200...299: return try await verifyStored(segment, name: name, url: url)
            case 404, 410: break
            default: throw failure(head, asking: "HEAD")
            }
        }
        var put = HTTPRequest(method: "PUT", url: url)
        // A collector that honours it refuses (412) to replace what it stores.
        put.headers = ["Content-Type: application/octet-stream", "If-None-Match: *"]
        if let contentEncoding = encoding.contentEncoding {
            put.headers.append("Content-Encoding: " + contentEncoding)
            put.body = .bytes(
                try await offCallersThread { () throws(SinkError) in try encoding.encode(try segment.readBytes()) })
        } else if segment.files.areOnDisk {
            put.body = .file(path: segment.path, bytes: segment.bytes)
        } else {
            put.body = .bytes(try segment.readBytes())  // a spool in memory: no file to stream
        }
        uncertain.withLock { _ = $0.insert(name) }
        let answer = try await client.perform(put)
        switch answer.status {
        case 200, 201, 204: uncertain.withLock { _ = $0.remove(name) }
        case 412: try await verifyStored(segment, name: name, url: url)  // the name is taken
        default: throw failure(answer, asking: "PUT")
        }
    }

    /// The name is taken: stored when the object holds our bytes, refused for good otherwise.
    private func verifyStored(_ segment: SealedSegment, name: String, url: String) async throws(SinkError) {
        var request = HTTPRequest(method: "GET", url: url)
        request.responseLimit = configuration.encoding.largestObject(contentBytes: segment.bytes)
        let get = try await client.perform(request)
        guard (200...299).contains(get.status) else { throw failure(get, asking: "GET") }
        let encoding = configuration.encoding
        guard
            try await offCallersThread({ () throws(SinkError) in
                try encoding.object(get.body, holds: try segment.readBytes())
            })
        else {
            throw .permanent(
                "a different object (\(get.body.count) bytes) is already stored as \(name); not overwritten")
        }
        uncertain.withLock { _ = $0.remove(name) }
    }

    /// Runs file reading (and the CPU work on what it read) on the sink's own thread.
    private func offCallersThread<T: Sendable>(_ work: () throws(SinkError) -> T) async throws(SinkError) -> T {
        let result: Result<T, SinkError> = await withTaskExecutorPreference(reading) {
            do throws(SinkError) { return .success(try work()) } catch { return .failure(error) }
        }
        return try result.get()
    }

    private func failure(_ response: HTTPResponse, asking method: String) -> SinkError {
        if configuration.permanentStatuses.contains(response.status) {
            return .permanent("\(method) answered HTTP \(response.status)")
        }
        return .retryable("\(method) answered HTTP \(response.status)", retryAfter: response.retryAfter)
    }
}

/// How an ``HTTPSink`` reads statuses and keeps from overwriting.
public struct HTTPSinkConfiguration: Sendable {
    /// How the sink makes sure it never replaces an object stored under a segment's name.
    public struct OverwriteProtection: Sendable, Hashable, CustomStringConvertible {
        private enum Kind: Hashable {
            case checkBeforeUpload, serverPrecondition
        }

        private let kind: Kind

        /// `HEAD` before the `PUT` (which also carries `If-None-Match: *`) of every segment
        /// a collector may already hold: safe with any collector. The default.
        public static let checkBeforeUpload = OverwriteProtection(kind: .checkBeforeUpload)
        /// `If-None-Match: *` alone: for collectors that answer 412 when the name is taken
        /// (S3 and S3-compatible stores, Apache's WebDAV; nginx only with the recipe in
        /// README). A collector that ignores the header would be overwritten.
        public static let serverPrecondition = OverwriteProtection(kind: .serverPrecondition)

        /// The name, as written in code.
        public var description: String { kind == .checkBeforeUpload ? "checkBeforeUpload" : "serverPrecondition" }
    }

    /// Statuses that mean "this request can never succeed": the segment is dead-lettered.
    /// Default 400, 411, 413, 414, 415 and 422 (the request itself is wrong). Everything
    /// else is retried: 401, 403 and 404 usually mean a collector or proxy not (yet) set up
    /// for us, which an operator fixes; dead-lettering on them would stop a whole fleet's
    /// uploads for good during a brief misconfiguration. The segments wait in the spool.
    public var permanentStatuses: Set<Int> = [400, 411, 413, 414, 415, 422]
    /// Default ``OverwriteProtection/checkBeforeUpload``.
    public var overwriteProtection = OverwriteProtection.checkBeforeUpload
    /// How segments are sent and named: default ``SegmentEncoding/identity``.
    public var encoding = SegmentEncoding.identity

    /// The defaults.
    public init() {}
}
