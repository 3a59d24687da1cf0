import InMemoryTracing
import Overtime
import OvertimeSupport
import OvertimeTestSupport
import OvertimeTesting
import Testing
import Tracing

@_spi(ScheduleStore) @testable import OvertimeScheduler

@Suite(
    "Scheduled runs as spans: the run, its grant and its handler's work", .serialized,
    .timeLimit(.minutes(2)))
struct SchedulerTracingTests {
    private func attribute(_ span: FinishedInMemorySpan, _ name: String) -> SpanAttribute? {
        span.attributes[name]?.toSpanAttribute()
    }

    @Test func eachAttemptIsASpanWithItsGrantAndTheHandlersSpansAsChildren() async throws {
        try await onOwnThread {
            let tracer = InMemoryTracer()
            let env = try VirtualRuntime(budget: .seconds(3600), lead: .seconds(5)) { $0.tracer = tracer }
            let h = try SchedulerHarness(env: env)
            defer { h.finish() }
            // The first attempt fails, the retry succeeds; each opens a span of its own inside.
            h.script.withLock {
                $0 = { attempt in
                    tracer.startSpan("inside the handler", context: InstrumentationContext.current ?? .topLevel)
                        .end()
                    return attempt.attempt == 1 ? .fail : .succeed
                }
            }
            try h.current.start()
            var request = ScheduledTaskRequest(identifier: "job")
            request.retry.initialDelay = .seconds(30)
            try h.current.submit(request)
            h.advance(by: .seconds(120))
            #expect(h.attempts.all.map(\.attempt) == [1, 2])

            let runs = tracer.finishedSpans.filter { $0.operationName == "overtime.scheduled_run" }
                .sorted {
                    "\(String(describing: $0.attributes["overtime.run.attempt"]))"
                        < "\(String(describing: $1.attributes["overtime.run.attempt"]))"
                }
            #expect(runs.count == 2)
            let runID = h.attempts.all[0].runID
            for (index, run) in runs.enumerated() {
                #expect(run.parentSpanID == nil, "a run starts a trace")
                #expect(attribute(run, "overtime.run.identifier") == .string("job"))
                #expect(attribute(run, "overtime.run.handler") == .string("job"))
                #expect(attribute(run, "overtime.run.id") == .int64(runID))
                #expect(attribute(run, "overtime.run.attempt") == .int64(Int64(index + 1)))
                #expect(attribute(run, "overtime.run.instance") == nil, "one scheduler's own store: no instance")
                let grant = try #require(
                    tracer.finishedSpans.first { $0.operationName == "overtime.grant" && $0.parentSpanID == run.spanID }
                )
                #expect(grant.traceID == run.traceID)
                #expect(attribute(grant, "overtime.grant.name") == .string("job"))
                #expect(attribute(grant, "overtime.grant.outcome") == .string("completed"))
                let inside = try #require(
                    tracer.finishedSpans.first {
                        $0.operationName == "inside the handler" && $0.parentSpanID == run.spanID
                    })
                #expect(inside.traceID == run.traceID)
            }
            #expect(attribute(runs[0], "overtime.run.result") == .string("failed"))
            #expect(runs[0].status?.code == .error)
            #expect(attribute(runs[1], "overtime.run.result") == .string("succeeded"))
            #expect(runs[1].status == nil)
            #expect(runs[0].traceID != runs[1].traceID)
        }
    }
}
