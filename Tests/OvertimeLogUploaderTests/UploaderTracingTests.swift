import InMemoryTracing
import Overtime
import OvertimeTestSupport
import Testing
import Tracing

@testable import OvertimeLogUploader

@Suite("Uploaded segments as spans, under the grant they were sent in", .timeLimit(.minutes(2)))
struct UploaderTracingTests {
    @Test func eachSegmentIsASpanUnderTheUploadGrantWithItsAttempts() async throws {
        let tracer = InMemoryTracer()
        let sink = ScriptedSink([.fail(.retryable("connection reset", retryAfter: nil))])
        let setup = try UploaderTests.Setup(sink: { _ in sink }, tracer: tracer)
        let segments = setup.spool.sealedSegments.count + 1  // the active one is sealed by the drain
        setup.env.runtime.requestBackground()
        setup.env.waitForQueuedRequests()
        await setup.waitForDrain()
        #expect(setup.spool.pendingLines == 0)

        let grant = try #require(tracer.finishedSpans.first { $0.operationName == "overtime.grant" })
        #expect(grant.attributes["overtime.grant.name"]?.toSpanAttribute() == .string("log-upload"))
        let uploads = tracer.finishedSpans.filter { $0.operationName == "overtime.upload_segment" }
        #expect(uploads.count == segments, "one span per segment")
        #expect(uploads.allSatisfy { $0.parentSpanID == grant.spanID && $0.traceID == grant.traceID })
        func value(_ span: FinishedInMemorySpan, _ name: String) -> SpanAttribute? {
            span.attributes[name]?.toSpanAttribute()
        }
        #expect(uploads.allSatisfy { value($0, "overtime.upload.sink") == .string("custom") })
        #expect(uploads.allSatisfy { value($0, "overtime.upload.result") == .string("stored") })
        let lines = uploads.reduce(Int64(0)) { total, span in
            if case .int64(let count) = value(span, "overtime.upload.lines") { return total + count }
            return total
        }
        #expect(lines == 300)
        let names = Set(
            uploads.compactMap { span -> String? in
                if case .string(let name) = value(span, "overtime.upload.segment") { return name }
                return nil
            })
        #expect(names == Set(sink.stored.all))
        // The first attempt of the oldest failed: that span says two attempts and why.
        let retried = uploads.filter { value($0, "overtime.upload.attempts") == .int64(2) }
        #expect(retried.count == 1, "\(uploads.map { value($0, "overtime.upload.attempts") })")
        #expect(retried.first?.events.map(\.name) == ["attempt failed"])
        #expect(tracer.activeSpans.isEmpty)
        setup.finish()
    }
}
