import CCurlPeer
import Foundation
import Logging
import Overtime
import OvertimeLogUploader

/// `upload_lines_per_sec`: a spool of 200-byte lines in sealed 1 MiB segments (the
/// default size), uploaded with HTTP PUT to a local nginx. `overtime` is the
/// `LogUploader` draining inside its grant after `requestBackground()` (best of three
/// drains); `ceiling` is a
/// plain libcurl loop PUTting the same segment files, read into memory beforehand, over
/// one kept-alive connection, best of three passes: the most this nginx takes from one
/// sender.
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
            directory: scratch + "/\(name)-\(UUID().uuidString)", configuration: configuration,
            logger: Logger(label: "overtime-bench") { _ in SwiftLogNoOpLogHandler() })
    }

    /// The `LogUploader` with `HTTPSink`, from the background request until the spool is
    /// empty; the best of three drains, each from a spool and a runtime of its own.
    public static func overtime(baseURL: String, lines: Int, scratch: String) throws -> Double {
        var best = 0.0
        for _ in 0..<3 {
            // The same names each pass: nginx replaces the files instead of keeping every copy.
            best = max(best, try drainOnce(baseURL: baseURL + "/overtime", lines: lines, scratch: scratch))
        }
        return best
    }

    private static func drainOnce(baseURL: String, lines: Int, scratch: String) throws -> Double {
        let spool = try filledSpool(lines: lines, scratch: scratch)
        defer { try? FileManager.default.removeItem(atPath: spool.directory) }
        let runtime = try BenchmarkRuntime.start(lead: .seconds(5), budget: .seconds(600))
        defer { BenchmarkRuntime.stop(runtime) }
        let uploader = LogUploader(
            runtime: runtime, spool: spool, sink: HTTPSink(baseURL: baseURL, runtime: runtime),
            logger: Logger(label: "overtime-bench") { _ in SwiftLogNoOpLogHandler() })
        uploader.start()
        defer { uploader.stop() }
        runtime.waitForQueuedRequests()
        let start = monotonicNanoseconds()
        runtime.requestBackground()
        while spool.pendingLines > 0 {
            let statistics = uploader.statistics
            if statistics.failedAttempts > 0 || statistics.deadLetteredSegments > 0 {
                throw ScenarioError("upload failed: \(statistics.lastError ?? "?")")
            }
            usleep(200)
        }
        let elapsed = monotonicNanoseconds() - start
        return Double(uploader.statistics.uploadedLines) * 1e9 / Double(elapsed)
    }

    /// libcurl's easy interface PUTting pre-built bodies back to back.
    public static func ceiling(baseURL: String, lines: Int, scratch: String) throws -> Double {
        let spool = try filledSpool(lines: lines, scratch: scratch)
        defer { try? FileManager.default.removeItem(atPath: spool.directory) }
        let segments = spool.sealedSegments
        let bodies = try segments.map { try Data(contentsOf: URL(fileURLWithPath: $0.path)) }
        settleDisk()
        guard let curl = curl_easy_init() else { throw ScenarioError("curl_easy_init failed") }
        defer { curl_easy_cleanup(curl) }
        let headers = curl_slist_append(nil, "Expect:")  // no 100-continue round trip
        defer { curl_slist_free_all(headers) }
        bench_easy_setopt_pointer(curl, CURLOPT_HTTPHEADER, headers)
        bench_easy_setopt_pointer(curl, CURLOPT_CUSTOMREQUEST, "PUT")
        bench_easy_setopt_long(curl, CURLOPT_TCP_NODELAY, 1)
        bench_easy_setopt_write_function(curl) { _, size, count, _ in size * count }
        // The best of three passes: the most this nginx takes, not one pass's luck.
        var best = 0.0
        for _ in 0..<3 {
            let rate = try putAll(bodies, curl: curl, baseURL: baseURL + "/ceiling")
            best = max(best, Double(segments.reduce(0) { $0 + $1.records }) * 1e9 / Double(rate))
        }
        return best
    }

    /// PUTs every body in turn; returns the nanoseconds it took.
    private static func putAll(_ bodies: [Data], curl: UnsafeMutableRawPointer, baseURL: String) throws -> Int64 {
        let start = monotonicNanoseconds()
        for (index, body) in bodies.enumerated() {
            let url = "\(baseURL)/\(index).log"
            let code = url.withCString { url in
                body.withUnsafeBytes { bytes in
                    bench_easy_setopt_pointer(curl, CURLOPT_URL, url)
                    bench_easy_setopt_pointer(curl, CURLOPT_POSTFIELDS, bytes.baseAddress)
                    bench_easy_setopt_offset(curl, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bytes.count))
                    return curl_easy_perform(curl)
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
