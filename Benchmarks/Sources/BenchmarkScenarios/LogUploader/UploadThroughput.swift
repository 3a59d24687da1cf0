import CCurlPeer
import Foundation
import Logging
import Overtime
import OvertimeLogUploader

/// `upload_lines_per_sec`: a spool of 200-byte lines in sealed 1 MiB segments (the
/// default size), uploaded with HTTP PUT to a local nginx, and to a local SeaweedFS's S3
/// API. `overtime` (`s3_overtime`) is the `LogUploader` with `HTTPSink` (`S3Sink`)
/// draining inside its grant after `requestBackground()` (best of three drains);
/// `ceiling` (`s3_ceiling`) is a plain libcurl loop PUTting the same segment files, read
/// into memory beforehand, over one kept-alive connection (to S3 signed by libcurl's own
/// SigV4 with an unsigned payload), best of three passes: the most this server takes
/// from one sender.
public enum UploadThroughput {
    /// Fills a spool with `lines` lines and seals it.
    static func filledSpool(lines: Int, scratch: String) throws -> Spool {
        let spool = try emptySpool(scratch: scratch, name: "upload")
        let batch = [[UInt8]](repeating: SpoolIngest.line, count: 1_000)
        var written = 0
        while written < lines {
            try spool.append(Array(batch.prefix(lines - written)))
            written += min(1_000, lines - written)
        }
        try spool.sealActiveSegment()
        settleDisk()  // the spool was written without syncs: its writeback is not the upload's
        return spool
    }

    /// A new spool under `scratch` that syncs nothing (filling it is preparation, not
    /// measured) and holds up to 8 GiB.
    static func emptySpool(scratch: String, name: String) throws -> Spool {
        var configuration = SpoolConfiguration()
        configuration.quotaBytes = 8 << 30
        configuration.durability = .operatingSystemBuffer
        return try Spool(
            directory: scratch + "/\(name)-\(UUID().uuidString)", configuration: configuration, clock: SystemClock(),
            logger: Logger(label: "overtime-bench") { _ in SwiftLogNoOpLogHandler() })
    }

    /// The `LogUploader` with `HTTPSink`, from the background request until the spool is
    /// empty; the best of three drains, each from a spool and a runtime of its own.
    public static func overtime(baseURL: String, lines: Int, scratch: String) throws -> Double {
        var best = 0.0
        for _ in 0..<3 {
            // The same names each pass: nginx replaces the files instead of keeping every copy.
            let rate = try drainOnce(lines: lines, scratch: scratch) { runtime in
                HTTPSink(baseURL: baseURL + "/overtime", runtime: runtime)
            }.linesPerSecond
            best = max(best, rate)
        }
        return best
    }

    /// `upload_context_switches_per_segment`: one drain as `overtime`'s, at the uploader's
    /// defaults, and the context switches of every thread of this process but the caller's
    /// (which only polls) per segment uploaded; also by thread name: which threads a
    /// segment touches.
    public static func contextSwitchesPerSegment(baseURL: String, lines: Int, scratch: String) throws -> (
        perSegment: Double, byThread: [String: Int], segments: Int
    ) {
        let drain = try drainOnce(lines: lines, scratch: scratch) { runtime in
            HTTPSink(baseURL: baseURL + "/overtime", runtime: runtime)
        }
        let total = drain.switchesByThread.values.reduce(0, +)
        return (Double(total) / Double(max(drain.segments, 1)), drain.switchesByThread, drain.segments)
    }

    /// The `LogUploader` with `S3Sink` (no compression) into `bucket` at `endpoint`; the
    /// best of three drains, each a new stream, so each pass's keys are new.
    public static func overtimeS3(store: S3Store, lines: Int, scratch: String) throws -> Double {
        var best = 0.0
        for _ in 0..<3 {
            let rate = try drainOnce(lines: lines, scratch: scratch) { runtime in
                var configuration = S3SinkConfiguration(
                    bucket: store.bucket, prefix: "overtime", credentials: store.credentials)
                configuration.endpoint = store.endpoint
                return try S3Sink(configuration: configuration, runtime: runtime)
            }.linesPerSecond
            best = max(best, rate)
        }
        return best
    }

    /// A local S3 store: its endpoint, a bucket in it, and keys it takes.
    public struct S3Store: Sendable {
        /// `http://127.0.0.1:<port>`.
        public var endpoint: String
        /// A bucket that exists.
        public var bucket: String
        /// Keys the store takes.
        public var credentials: S3Credentials

        /// The store at `endpoint` with the keys in `AWS_ACCESS_KEY_ID` and
        /// `AWS_SECRET_ACCESS_KEY`; nil without them.
        public init?(endpoint: String, bucket: String) {
            guard let credentials = try? S3Credentials.fromEnvironment() else { return nil }
            self.endpoint = endpoint
            self.bucket = bucket
            self.credentials = credentials
        }
    }

    /// What one drain measured.
    private struct Drain {
        var linesPerSecond: Double
        var segments: Int
        /// Every thread's context switches but the caller's, from the background request
        /// to the empty spool.
        var switchesByThread: [String: Int]
    }

    private static func drainOnce(
        lines: Int, scratch: String, sink makeSink: (Runtime) throws -> any LogSink
    ) throws -> Drain {
        let spool = try filledSpool(lines: lines, scratch: scratch)
        defer { try? FileManager.default.removeItem(atPath: spool.directory) }
        let runtime = try BenchmarkRuntime.start(lead: .seconds(5), budget: .seconds(600))
        defer { BenchmarkRuntime.stop(runtime) }
        let uploader = LogUploader(
            runtime: runtime, spool: spool, sink: try makeSink(runtime),
            logger: Logger(label: "overtime-bench") { _ in SwiftLogNoOpLogHandler() })
        uploader.start()
        defer { uploader.stop() }
        runtime.waitForQueuedRequests()
        var elapsed: Int64 = 0
        let switches = try MeasuredProcess.switchesOfOtherThreads {
            let start = monotonicNanoseconds()
            runtime.requestBackground()
            while spool.pendingLines > 0 {
                let statistics = uploader.statistics
                if statistics.failedAttempts > 0 || statistics.deadLetteredSegments > 0 {
                    throw ScenarioError("upload failed: \(statistics.lastError ?? "?")")
                }
                usleep(200)
            }
            elapsed = monotonicNanoseconds() - start
        }
        let statistics = uploader.statistics
        return Drain(
            linesPerSecond: Double(statistics.uploadedLines) * 1e9 / Double(elapsed),
            segments: statistics.uploadedSegments, switchesByThread: switches)
    }

    /// libcurl's easy interface PUTting pre-built bodies back to back to nginx.
    public static func ceiling(baseURL: String, lines: Int, scratch: String) throws -> Double {
        // No 100-continue round trip.
        try ceiling(
            lines: lines, scratch: scratch, url: baseURL + "/ceiling", headers: ["Expect:"], readCallback: false
        ) { _ in }
    }

    /// libcurl's easy interface PUTting pre-built bodies back to back to S3, signed by libcurl.
    public static func ceilingS3(store: S3Store, lines: Int, scratch: String) throws -> Double {
        let keys = store.credentials.accessKeyID + ":" + store.credentials.secretAccessKey
        // libcurl signs the method it would send without CURLOPT_CUSTOMREQUEST: the body
        // goes by the read callback (a PUT), not as POST fields. It also signs an emptied
        // "Expect:" it does not send (7.88): the 100-continue wait is cut to nothing instead.
        let url = store.endpoint + "/" + store.bucket + "/ceiling"
        return try ceiling(
            lines: lines, scratch: scratch, url: url, headers: ["x-amz-content-sha256: UNSIGNED-PAYLOAD"],
            readCallback: true
        ) {
            bench_easy_setopt_pointer($0, CURLOPT_AWS_SIGV4, "aws:amz:us-east-1:s3")
            bench_easy_setopt_pointer($0, CURLOPT_USERPWD, keys)
            bench_easy_setopt_long($0, CURLOPT_EXPECT_100_TIMEOUT_MS, 0)
            bench_easy_setopt_long($0, CURLOPT_UPLOAD_BUFFERSIZE, 512 * 1024)  // as the sink reads
        }
    }

    private static func ceiling(
        lines: Int, scratch: String, url baseURL: String, headers headerLines: [String], readCallback: Bool,
        configure: (UnsafeMutableRawPointer) -> Void
    ) throws -> Double {
        let spool = try filledSpool(lines: lines, scratch: scratch)
        defer { try? FileManager.default.removeItem(atPath: spool.directory) }
        let segments = spool.sealedSegments
        let bodies = try segments.map { try Data(contentsOf: URL(fileURLWithPath: $0.path)) }
        settleDisk()
        guard let curl = curl_easy_init() else { throw ScenarioError("curl_easy_init failed") }
        defer { curl_easy_cleanup(curl) }
        let headers = headerLines.reduce(nil) { curl_slist_append($0, $1) }
        defer { curl_slist_free_all(headers) }
        bench_easy_setopt_pointer(curl, CURLOPT_HTTPHEADER, headers)
        if !readCallback { bench_easy_setopt_pointer(curl, CURLOPT_CUSTOMREQUEST, "PUT") }
        bench_easy_setopt_long(curl, CURLOPT_TCP_NODELAY, 1)
        bench_easy_setopt_write_function(curl) { _, size, count, _ in size * count }
        configure(curl)
        // The best of three passes: the most this nginx takes, not one pass's luck.
        var best = 0.0
        for _ in 0..<3 {
            let rate = try putAll(bodies, curl: curl, baseURL: baseURL, readCallback: readCallback)
            best = max(best, Double(segments.reduce(0) { $0 + $1.records }) * 1e9 / Double(rate))
        }
        return best
    }

    /// PUTs every body in turn (as POST fields, or through the read callback); returns the
    /// nanoseconds it took.
    private static func putAll(
        _ bodies: [Data], curl: UnsafeMutableRawPointer, baseURL: String, readCallback: Bool
    ) throws -> Int64 {
        let start = monotonicNanoseconds()
        for (index, body) in bodies.enumerated() {
            let url = "\(baseURL)/\(index).log"
            let code = url.withCString { url in
                body.withUnsafeBytes { bytes in
                    bench_easy_setopt_pointer(curl, CURLOPT_URL, url)
                    guard readCallback else {
                        bench_easy_setopt_pointer(curl, CURLOPT_POSTFIELDS, bytes.baseAddress)
                        bench_easy_setopt_offset(curl, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bytes.count))
                        return curl_easy_perform(curl)
                    }
                    var reader = BodyReader(bytes: bytes)
                    return withUnsafeMutablePointer(to: &reader) { reader in
                        bench_easy_setopt_long(curl, CURLOPT_UPLOAD, 1)
                        bench_easy_setopt_offset(curl, CURLOPT_INFILESIZE_LARGE, curl_off_t(bytes.count))
                        bench_easy_setopt_pointer(curl, CURLOPT_READDATA, reader)
                        bench_easy_setopt_read_function(curl) { buffer, size, count, context in
                            context!.assumingMemoryBound(to: BodyReader.self).pointee.read(into: buffer!, size * count)
                        }
                        return curl_easy_perform(curl)
                    }
                }
            }
            var status = 0
            bench_easy_getinfo_response_code(curl, &status)
            guard code == CURLE_OK, (200..<300).contains(status) else {
                throw ScenarioError("ceiling PUT failed: curl \(code.rawValue), HTTP \(status)")
            }
        }
        return monotonicNanoseconds() - start
    }
}

/// A body in memory handed to libcurl's read callback piece by piece.
private struct BodyReader {
    let bytes: UnsafeRawBufferPointer
    var offset = 0

    mutating func read(into buffer: UnsafeMutablePointer<CChar>, _ room: Int) -> Int {
        let count = min(room, bytes.count - offset)
        UnsafeMutableRawPointer(buffer).copyMemory(from: bytes.baseAddress! + offset, byteCount: count)
        offset += count
        return count
    }
}
