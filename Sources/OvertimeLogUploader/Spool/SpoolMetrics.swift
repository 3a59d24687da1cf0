// The spool's counters, and the levels it reports when metrics are collected.

import CoreMetrics
import Overtime

/// The spool's counters (swift-metrics, global factory), counted as things happen.
struct SpoolCounters: Sendable {
    let appended = Counter(label: "overtime_spool_appended_lines_total")
    let droppedLines = Counter(label: "overtime_spool_dropped_lines_total")
    let writeErrors = Counter(label: "overtime_spool_write_errors_total")
    let quotaRejections = Counter(label: "overtime_spool_quota_rejections_total")
    let sealed = Counter(label: "overtime_spool_segments_sealed_total")
    let deadLettered = Counter(label: "overtime_spool_dead_lettered_segments_total")
    let redriven = Counter(label: "overtime_spool_redriven_segments_total")
}

/// What the spool holds that no sink has acknowledged, recorded when metrics are collected
/// (``MetricSamplers``), not at every append: `overtime_spool_pending_bytes`,
/// `overtime_spool_pending_segments`, `overtime_spool_pending_lines` and
/// `overtime_spool_oldest_pending_timestamp_seconds` (when the oldest line not yet
/// uploaded was spooled; its age is `time() -` it; absent while nothing is pending).
struct SpoolLevels: Sendable {
    let bytes = Gauge(label: "overtime_spool_pending_bytes")
    let segments = Gauge(label: "overtime_spool_pending_segments")
    let lines = Gauge(label: "overtime_spool_pending_lines")
    let oldest = Gauge(label: "overtime_spool_oldest_pending_timestamp_seconds")

    /// Records `state`'s levels.
    func record(_ state: Spool.State) {
        let waiting = state.resend + state.sealed
        bytes.record(state.storedBytes)
        segments.record(waiting.count + (state.active.map { $0.records > 0 ? 1 : 0 } ?? 0))
        lines.record(waiting.reduce(0) { $0 + $1.records } + (state.active?.records ?? 0))
        // Spooled times are nanoseconds since 1970, the lowest bit a flag.
        let first = waiting.first?.firstLineTime ?? (state.active.flatMap { $0.records > 0 ? $0.firstLineTime : nil })
        oldest.record(first.map { Double($0 & ~1) / 1e9 } ?? 0)
    }
}
