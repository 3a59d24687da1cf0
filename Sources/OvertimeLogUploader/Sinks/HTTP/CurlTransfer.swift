// One HTTP request on libcurl's easy interface: any method, a body from a file or memory,
// the answer into memory. The transfer only speaks HTTP; what a status means is the sink's call.

import CLibCurl
import Overtime
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#endif

/// One request: the easy handle, the file a PUT reads from, and the continuation waiting
/// for the answer. Finishes exactly once.
///
/// Made, driven and finished on the loop thread (checked in debug builds); `Sendable` only
/// so that a cancellation handler can carry it back to the loop.
final class CurlTransfer: @unchecked Sendable {  // confined to the loop thread
    let easy: UnsafeMutableRawPointer
    private var file: UnsafeMutablePointer<FILE>?
    private var upload: [UInt8] = []
    private var uploaded = 0
    private var headers: UnsafeMutablePointer<curl_slist>?
    private var retryAfter: Duration?
    private var responseHeaders: [String: String] = [:]
    private var body: [UInt8] = []
    private let bodyLimit: Int
    private var continuation: CheckedContinuation<Result<HTTPResponse, SinkError>, Never>?
    private let context: DriverContext

    /// Prepares `request`, on the loop thread.
    init(
        _ request: HTTPRequest, context: DriverContext,
        continuation: CheckedContinuation<Result<HTTPResponse, SinkError>, Never>
    ) {
        context.assertOnLoop()
        easy = overtime_curl_easy_init()
        self.context = context
        self.continuation = continuation
        bodyLimit = request.responseLimit
        let context = Unmanaged.passUnretained(self).toOpaque()
        overtime_easy_setopt_string(easy, CURLOPT_URL, request.url)
        headers = overtime_curl_slist_append(nil, "Expect:")  // no "100-continue" round trip
        for line in request.headers { headers = overtime_curl_slist_append(headers, line) }
        switch request.method {
        case "HEAD": overtime_easy_setopt_long(easy, CURLOPT_NOBODY, 1)
        case "GET", "PUT": break
        default: overtime_easy_setopt_string(easy, CURLOPT_CUSTOMREQUEST, request.method)
        }
        let length: Int
        switch request.body {
        case .none:
            length = request.method == "GET" || request.method == "HEAD" ? -1 : 0
        case .file(let path, let bytes):
            file = fopen(path, "rb")
            if file == nil { cannotStart = .retryable("cannot read \(path): \(errnoDescription())", retryAfter: nil) }
            length = bytes
        case .bytes(let bytes):
            upload = bytes
            length = bytes.count
        }
        if length >= 0 {
            // PUT semantics (a body of known length read by the callback); another method's
            // name is sent instead when one was set above.
            overtime_easy_setopt_long(easy, CURLOPT_UPLOAD, 1)
            overtime_easy_setopt_offset(easy, CURLOPT_INFILESIZE_LARGE, curl_off_t(length))
            overtime_easy_setopt_pointer(easy, CURLOPT_READDATA, context)
            overtime_easy_setopt_read_function(easy) { buffer, size, count, context in
                Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue().read(into: buffer!, size * count)
            }
            // The body from its start again when curl must send it twice (an authentication
            // challenge, a redirect, a reused connection the server had closed).
            overtime_easy_setopt_pointer(easy, CURLOPT_SEEKDATA, context)
            overtime_easy_setopt_seek_function(easy) { context, offset, origin in
                Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue().seek(to: offset, origin: origin)
            }
            // A segment in few large reads and sends (libcurl's default buffer is 64 KiB).
            overtime_easy_setopt_long(easy, CURLOPT_UPLOAD_BUFFERSIZE, 512 * 1024)
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

    /// Moves the body's read position (curl asks for `SEEK_SET` only): 0 done, 1 failed.
    private func seek(to offset: curl_off_t, origin: Int32) -> Int32 {
        guard origin == SEEK_SET, offset >= 0 else { return 1 }  // CURL_SEEKFUNC_FAIL
        if let file { return fseeko(file, off_t(offset), SEEK_SET) == 0 ? 0 : 1 }
        guard offset <= upload.count else { return 1 }
        uploaded = Int(offset)
        return 0  // CURL_SEEKFUNC_OK
    }

    /// The next part of the body into curl's buffer: how many bytes were written.
    private func read(into buffer: UnsafeMutablePointer<CChar>, _ room: Int) -> Int {
        if let file { return fread(buffer, 1, room, file) }
        let count = min(room, upload.count - uploaded)
        guard count > 0 else { return 0 }
        upload.withUnsafeBytes { bytes in
            UnsafeMutableRawPointer(buffer).copyMemory(from: bytes.baseAddress! + uploaded, byteCount: count)
        }
        uploaded += count
        return count
    }

    /// curl's failure in an operator's words where curl's own are about its insides.
    static func describe(_ result: CURLcode) -> String {
        let curl = String(cString: overtime_curl_easy_strerror(result))
        switch result {
        case CURLE_SEND_FAIL_REWIND:
            return "the collector needed the upload sent again and it could not be (\(curl))"
        case CURLE_COULDNT_RESOLVE_HOST: return "the collector's host name does not resolve (\(curl))"
        case CURLE_COULDNT_CONNECT: return "the collector refuses connections or cannot be reached (\(curl))"
        case CURLE_OPERATION_TIMEDOUT: return "the collector did not answer in time (\(curl))"
        default: return curl
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
        guard parts.count == 2 else {
            // A status line starts the headers of a response (again after an interim one).
            if line.hasPrefix("HTTP/") { responseHeaders = [:] }
            return
        }
        let name = parts[0].lowercased()
        let value = parts[1].trimmingCharacters()
        responseHeaders[name] = value
        guard name == "retry-after", let seconds = Int(value) else { return }
        // A day at most: a number, not a way to park the uploader (it caps by its budget too).
        retryAfter = .seconds(max(0, min(seconds, 86_400)))
    }

    /// curl finished the transfer: the collector's answer, or the transport's failure.
    func completed(_ result: CURLcode) {
        guard result == CURLE_OK else {
            finish(.failure(.retryable(Self.describe(result), retryAfter: nil)))
            return
        }
        var status = 0
        overtime_easy_getinfo_response_code(easy, &status)
        finish(.success(HTTPResponse(status: status, retryAfter: retryAfter, headers: responseHeaders, body: body)))
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
