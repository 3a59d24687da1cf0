// One HTTP request on libcurl's easy interface: PUT of a file, HEAD, or GET into memory.
// The transfer only speaks HTTP; what a status means for a segment is `HTTPSink`'s call.

import CLibCurl
import Overtime

#if canImport(Glibc)
    import Glibc
#endif

/// What a collector answered.
struct HTTPResponse: Sendable {
    /// The status code.
    let status: Int
    /// `Retry-After` in seconds, if the collector sent one.
    let retryAfter: Duration?
    /// The body, for a GET (at most the request's limit plus one byte).
    let body: [UInt8]
}

/// One request: the easy handle, the file a PUT reads from, and the continuation waiting
/// for the answer. Finishes exactly once.
///
/// Made, driven and finished on the loop thread (checked in debug builds); `Sendable` only
/// so that a cancellation handler can carry it back to the loop.
final class CurlTransfer: @unchecked Sendable {  // confined to the loop thread
    /// What to ask.
    enum Method {
        /// Upload the file at `path` (`bytes` long), with `If-None-Match: *`.
        case put(path: String, bytes: Int)
        case head
        /// Download at most `limit` bytes (one more marks "longer than expected").
        case get(limit: Int)
    }

    let easy: UnsafeMutableRawPointer
    private var file: UnsafeMutablePointer<FILE>?
    private var headers: UnsafeMutablePointer<curl_slist>?
    private var retryAfter: Duration?
    private var body: [UInt8] = []
    private var bodyLimit = 0
    private var continuation: CheckedContinuation<Result<HTTPResponse, SinkError>, Never>?
    private let context: DriverContext

    /// Prepares `method url`, on the loop thread.
    init(
        url: String, method: Method, context: DriverContext,
        continuation: CheckedContinuation<Result<HTTPResponse, SinkError>, Never>
    ) {
        context.assertOnLoop()
        easy = overtime_curl_easy_init()
        self.context = context
        self.continuation = continuation
        let context = Unmanaged.passUnretained(self).toOpaque()
        overtime_easy_setopt_string(easy, CURLOPT_URL, url)
        headers = overtime_curl_slist_append(nil, "Expect:")  // no "100-continue" round trip
        switch method {
        case .put(let path, let bytes):
            file = fopen(path, "rb")
            if file == nil { cannotStart = .retryable("cannot read \(path): \(errnoDescription())", retryAfter: nil) }
            overtime_easy_setopt_long(easy, CURLOPT_UPLOAD, 1)
            overtime_easy_setopt_offset(easy, CURLOPT_INFILESIZE_LARGE, curl_off_t(bytes))
            overtime_easy_setopt_pointer(easy, CURLOPT_READDATA, UnsafeMutableRawPointer(file))
            overtime_easy_setopt_read_function(easy) { buffer, size, count, file in
                fread(buffer, size, count, file!.assumingMemoryBound(to: FILE.self))
            }
            // A segment in few large reads and sends (libcurl's default buffer is 64 KiB).
            overtime_easy_setopt_long(easy, CURLOPT_UPLOAD_BUFFERSIZE, 512 * 1024)
            headers = overtime_curl_slist_append(headers, "Content-Type: application/octet-stream")
            // A collector that honours it refuses (412) to replace what it stores.
            headers = overtime_curl_slist_append(headers, "If-None-Match: *")
        case .head:
            overtime_easy_setopt_long(easy, CURLOPT_NOBODY, 1)
        case .get(let limit):
            bodyLimit = limit
        }
        // Small segments: no Nagle delay.
        overtime_easy_setopt_long(easy, CURLOPT_TCP_NODELAY, 1)
        overtime_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        overtime_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, 5000)
        // A collector that stops answering (under 1 byte/s for 30 s) is a retryable failure;
        // in the background, expiration cancels sooner.
        overtime_easy_setopt_long(easy, CURLOPT_LOW_SPEED_LIMIT, 1)
        overtime_easy_setopt_long(easy, CURLOPT_LOW_SPEED_TIME, 30)
        overtime_easy_setopt_pointer(easy, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(headers))
        overtime_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, context)
        overtime_easy_setopt_header_function(easy) { line, size, count, context in
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue()
            transfer.header(String(decoding: UnsafeRawBufferPointer(start: line, count: size * count), as: UTF8.self))
            return size * count
        }
        overtime_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, context)
        overtime_easy_setopt_write_function(easy) { data, size, count, context in
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue()
            let room = max(0, transfer.bodyLimit + 1 - transfer.body.count)
            transfer.body += UnsafeRawBufferPointer(start: data, count: min(size * count, room))
            return size * count
        }
    }

    deinit {
        overtime_curl_easy_cleanup(easy)
        overtime_curl_slist_free_all(headers)
        if let file { fclose(file) }
    }

    /// A failure known before starting (the file to upload cannot be read), or nil.
    private(set) var cannotStart: SinkError?

    private func header(_ line: String) {
        let parts = line.split(separator: ":", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "retry-after",
            let seconds = Int(parts[1].trimmingCharacters())
        else { return }
        // A day at most: a number, not a way to park the uploader (it caps by its budget too).
        retryAfter = .seconds(max(0, min(seconds, 86_400)))
    }

    /// curl finished the transfer: the collector's answer, or the transport's failure.
    func completed(_ result: CURLcode) {
        guard result == CURLE_OK else {
            finish(.failure(.retryable(String(cString: overtime_curl_easy_strerror(result)), retryAfter: nil)))
            return
        }
        var status = 0
        overtime_easy_getinfo_response_code(easy, &status)
        finish(.success(HTTPResponse(status: status, retryAfter: retryAfter, body: body)))
    }

    /// Resumes the waiting request, once.
    func finish(_ outcome: Result<HTTPResponse, SinkError>) {
        context.assertOnLoop()
        let waiting = continuation
        continuation = nil
        waiting?.resume(returning: outcome)
    }
}

extension Substring {
    fileprivate func trimmingCharacters() -> String {
        String(drop { $0.isWhitespace }.reversed().drop { $0.isWhitespace }.reversed())
    }
}
