import CLibCurl
import Overtime

#if canImport(Glibc)
    import Glibc
#endif

/// One HTTP PUT of a sealed segment: the easy handle, the file it reads from, and the
/// continuation waiting for the answer. Finishes exactly once.
final class CurlTransfer: @unchecked Sendable {  // its mutable state is touched on the loop thread only
    let easy: UnsafeMutableRawPointer
    private let file: UnsafeMutablePointer<FILE>?
    private var headers: UnsafeMutablePointer<curl_slist>?
    private var retryAfter: Duration?
    private let continuation: Locked<CheckedContinuation<Result<Void, SinkError>, Never>?>

    /// Prepares `PUT url` with the body read from `path`.
    init(url: String, path: String, bytes: Int, continuation: CheckedContinuation<Result<Void, SinkError>, Never>) {
        easy = curl_easy_init()
        file = fopen(path, "rb")
        self.continuation = Locked(continuation)
        let context = Unmanaged.passUnretained(self).toOpaque()
        overtime_easy_setopt_string(easy, CURLOPT_URL, url)
        overtime_easy_setopt_long(easy, CURLOPT_UPLOAD, 1)
        overtime_easy_setopt_offset(easy, CURLOPT_INFILESIZE_LARGE, curl_off_t(bytes))
        overtime_easy_setopt_pointer(easy, CURLOPT_READDATA, UnsafeMutableRawPointer(file))
        overtime_easy_setopt_read_function(easy) { buffer, size, count, file in
            fread(buffer, size, count, file!.assumingMemoryBound(to: FILE.self))
        }
        // Small segments: no Nagle delay, and no "Expect: 100-continue" round trip.
        overtime_easy_setopt_long(easy, CURLOPT_TCP_NODELAY, 1)
        // A segment in few large reads and sends (libcurl's default buffer is 64 KiB).
        overtime_easy_setopt_long(easy, CURLOPT_UPLOAD_BUFFERSIZE, 512 * 1024)
        overtime_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        overtime_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, 5000)
        // A collector that stops answering (under 1 byte/s for 30 s) is a retryable failure;
        // in the background, expiration cancels sooner.
        overtime_easy_setopt_long(easy, CURLOPT_LOW_SPEED_LIMIT, 1)
        overtime_easy_setopt_long(easy, CURLOPT_LOW_SPEED_TIME, 30)
        headers = curl_slist_append(nil, "Expect:")
        headers = curl_slist_append(headers, "Content-Type: application/octet-stream")
        overtime_easy_setopt_pointer(easy, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(headers))
        overtime_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, context)
        overtime_easy_setopt_header_function(easy) { line, size, count, context in
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue()
            transfer.header(String(decoding: UnsafeRawBufferPointer(start: line, count: size * count), as: UTF8.self))
            return size * count
        }
        overtime_easy_setopt_write_function(easy) { _, size, count, _ in size * count }  // the body is not needed
    }

    deinit {
        curl_easy_cleanup(easy)
        curl_slist_free_all(headers)
        if let file { fclose(file) }
    }

    var canStart: Result<Void, SinkError>? {
        file == nil ? .failure(.permanent("cannot read the segment: \(errnoDescription())")) : nil
    }

    private func header(_ line: String) {
        let parts = line.split(separator: ":", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "retry-after",
            let seconds = Int(parts[1].trimmingCharacters())
        else { return }
        retryAfter = .seconds(max(0, min(seconds, 3600)))
    }

    /// curl finished the transfer: map the outcome to stored, retry, or refused for good.
    func completed(_ result: CURLcode) {
        guard result == CURLE_OK else {
            finish(.failure(.retryable(String(cString: curl_easy_strerror(result)), retryAfter: nil)))
            return
        }
        var status = 0
        overtime_easy_getinfo_response_code(easy, &status)
        switch status {
        case 200, 201, 204:
            finish(.success(()))
        case 408, 425, 429, 500...599:
            finish(.failure(.retryable("HTTP \(status)", retryAfter: retryAfter)))
        default:
            finish(.failure(.permanent("HTTP \(status)")))
        }
    }

    /// Resumes the waiting upload, once.
    func finish(_ outcome: Result<Void, SinkError>) {
        let waiting = continuation.withLock { continuation in
            defer { continuation = nil }
            return continuation
        }
        waiting?.resume(returning: outcome)
    }
}

extension Substring {
    fileprivate func trimmingCharacters() -> String {
        String(drop { $0.isWhitespace }.reversed().drop { $0.isWhitespace }.reversed())
    }
}
