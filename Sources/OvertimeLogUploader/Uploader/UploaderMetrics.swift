// The uploader's counters and upload durations, labelled by the sink's kind.

import CoreMetrics

/// The uploader's metrics (swift-metrics, global factory), each with `sink`: the sink's
/// kind, never its URL, bucket or folder (a label's values must stay few).
///
/// | metric | type | labels |
/// |---|---|---|
/// | `overtime_uploader_segments_total` | counter | `sink`, `result`: stored, dead_letter |
/// | `overtime_uploader_failed_attempts_total` | counter | `sink` |
/// | `overtime_uploader_upload_duration_seconds` | timer | `sink` (attempts that stored) |
/// | `overtime_uploader_lines_total` | counter | `sink` (lines in acknowledged segments) |
/// | `overtime_uploader_stored_bytes_total` | counter | `sink` (segment bytes, before compression) |
struct UploaderMetrics: Sendable {
    let stored: Counter
    let deadLettered: Counter
    let failures: Counter
    let duration: Timer
    let lines: Counter
    let bytes: Counter
    /// The sink's kind, as the `sink` label says it.
    let sinkKind: String

    init(sink: any LogSink) {
        sinkKind = Self.kind(of: sink)
        let dimensions = [("sink", sinkKind)]
        let segments = "overtime_uploader_segments_total"
        stored = Counter(label: segments, dimensions: dimensions + [("result", "stored")])
        deadLettered = Counter(label: segments, dimensions: dimensions + [("result", "dead_letter")])
        failures = Counter(label: "overtime_uploader_failed_attempts_total", dimensions: dimensions)
        duration = Timer(label: "overtime_uploader_upload_duration_seconds", dimensions: dimensions)
        lines = Counter(label: "overtime_uploader_lines_total", dimensions: dimensions)
        bytes = Counter(label: "overtime_uploader_stored_bytes_total", dimensions: dimensions)
    }

    /// `directory`, `http`, `https`, `s3`, `syslog`, `relp` — the part of the sink's
    /// description before its first `:` when that is a short lowercase word — else `custom`.
    static func kind(of sink: any LogSink) -> String {
        let description = sink.description
        guard let colon = description.firstIndex(of: ":") else { return "custom" }
        let scheme = description[..<colon]
        guard (1...16).contains(scheme.count),
            scheme.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber) })
        else { return "custom" }
        return String(scheme)
    }
}
