// The spans of the segments one drain uploads: one per segment, across its attempts.

import Tracing

/// `overtime.upload_segment`: one span per segment a drain sends, from its first attempt
/// to its outcome in that drain, a child of the drain's context (the upload grant's span,
/// or a scheduled run's).
///
/// | attribute | value |
/// |---|---|
/// | `overtime.upload.sink` | the sink's kind (`directory`, `https`, `s3`, …) |
/// | `overtime.upload.segment` | the segment's name (`<stream>/<number>.log`) |
/// | `overtime.upload.bytes` | its size as spooled |
/// | `overtime.upload.lines` | its lines |
/// | `overtime.upload.attempts` | the attempts this drain made |
/// | `overtime.upload.result` | `stored`, `dead_letter`, or `left` (not decided when the drain stopped: sent again next time) |
struct SegmentSpans {
    private let tracer: (any Tracer)?
    private let sink: String
    private let parent: InstrumentationContext
    private var open: [String: (span: any Span, attempts: Int)] = [:]

    /// Spans to `tracer` (none without one), under the current context.
    init(tracer: (any Tracer)?, sink: String) {
        self.tracer = tracer
        self.sink = sink
        parent = InstrumentationContext.current ?? .topLevel
    }

    /// An attempt to store `segment` starts.
    mutating func attemptStarted(_ segment: SealedSegment) {
        guard let tracer else { return }
        if let (span, attempts) = open[segment.path] {
            open[segment.path] = (span, attempts + 1)
            return
        }
        let span = tracer.startSpan("overtime.upload_segment", context: parent)
        span.attributes["overtime.upload.sink"] = sink
        span.attributes["overtime.upload.segment"] = segment.name
        span.attributes["overtime.upload.bytes"] = segment.bytes
        span.attributes["overtime.upload.lines"] = segment.records
        open[segment.path] = (span, 1)
    }

    /// An attempt failed (`error`); the segment is tried again.
    mutating func attemptFailed(_ segment: SealedSegment, _ error: String) {
        open[segment.path]?.span.addEvent(SpanEvent(name: "attempt failed", attributes: ["error": .string(error)]))
    }

    /// The segment's outcome in this drain: `stored` or `dead_letter`.
    mutating func decided(_ segment: SealedSegment, _ result: String) {
        guard let (span, attempts) = open.removeValue(forKey: segment.path) else { return }
        Self.end(span, attempts: attempts, result)
    }

    /// The drain stopped: what is still open is `left`, sent again by a later drain.
    mutating func endAll() {
        for (span, attempts) in open.values { Self.end(span, attempts: attempts, "left") }
        open = [:]
    }

    private static func end(_ span: any Span, attempts: Int, _ result: String) {
        span.attributes["overtime.upload.attempts"] = attempts
        span.attributes["overtime.upload.result"] = result
        if result == "dead_letter" { span.setStatus(SpanStatus(code: .error, message: "rejected for good")) }
        span.end()
    }
}
