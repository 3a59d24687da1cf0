import InMemoryTracing
import Overtime
import OvertimeSupport
import OvertimeTestSupport
import OvertimeTesting
import Testing
import Tracing

@Suite(
    "Grants as spans: one per grant, its outcome, under the context it began in", .blocksBriefly,
    .timeLimit(.minutes(2)))
struct GrantTracingTests {
    private func span(_ tracer: InMemoryTracer, named name: String) -> FinishedInMemorySpan? {
        tracer.finishedSpans.first { $0.attributes["overtime.grant.name"]?.toSpanAttribute() == .string(name) }
    }

    @Test func eachGrantIsASpanThatSaysHowItEnded() throws {
        let tracer = InMemoryTracer()
        let env = try VirtualRuntime(budget: .seconds(30), lead: .seconds(5)) { $0.tracer = tracer }
        let runtime = env.runtime
        // Completed, under a parent span the caller opened.
        let parent = tracer.startSpan("request")
        let completed = InstrumentationContext.withValue(parent.context) {
            runtime.beginBackgroundTask(name: "completed")
        }
        runtime.endBackgroundTask(completed)
        parent.end()
        // Expired: its handler ends it. Terminated: never ended.
        let expired = Recorder<BackgroundTaskID>()
        let expiring = runtime.beginBackgroundTask(name: "expired") { expired.append(.invalid) }
        _ = runtime.beginBackgroundTask(name: "terminated")
        // Begun off the loop, and ended there at once.
        try onOwnThreadSync {
            let queued = runtime.beginBackgroundTask(name: "queued")
            runtime.endBackgroundTask(queued)
        }
        env.waitForQueuedRequests()
        runtime.requestBackground()
        env.waitForQueuedRequests()
        env.clock.advance(by: .seconds(25))
        #expect(expired.count == 1)
        runtime.endBackgroundTask(expiring)
        env.clock.advance(by: .seconds(5))

        let request = try #require(tracer.finishedSpans.first { $0.operationName == "request" })
        let first = try #require(span(tracer, named: "completed"))
        #expect(first.operationName == "overtime.grant")
        #expect(first.parentSpanID == request.spanID && first.traceID == request.traceID)
        #expect(first.attributes["overtime.grant.outcome"]?.toSpanAttribute() == .string("completed"))
        #expect(first.attributes["overtime.grant.expired"]?.toSpanAttribute() == .bool(false))
        #expect(first.attributes["overtime.grant.terminated"]?.toSpanAttribute() == .bool(false))
        #expect(first.attributes["overtime.grant.id"]?.toSpanAttribute() == .string("\(completed)"))
        let callSite = first.attributes["overtime.grant.call_site"]?.toSpanAttribute()
        #expect(
            callSite.map { "\($0)".contains("GrantTracingTests.swift:") } == true, "\(String(describing: callSite))")
        #expect(first.status == nil)

        let second = try #require(span(tracer, named: "expired"))
        #expect(second.parentSpanID == nil, "a grant begun outside any span starts a trace")
        #expect(second.attributes["overtime.grant.outcome"]?.toSpanAttribute() == .string("expired"))
        #expect(second.attributes["overtime.grant.expired"]?.toSpanAttribute() == .bool(true))
        #expect(second.events.map(\.name) == ["expiration"])

        let third = try #require(span(tracer, named: "terminated"))
        #expect(third.attributes["overtime.grant.outcome"]?.toSpanAttribute() == .string("terminated"))
        #expect(third.attributes["overtime.grant.terminated"]?.toSpanAttribute() == .bool(true))
        #expect(third.attributes["overtime.grant.expired"]?.toSpanAttribute() == .bool(true))
        #expect(third.status?.code == .error)

        let queued = try #require(span(tracer, named: "queued"))
        #expect(queued.attributes["overtime.grant.outcome"]?.toSpanAttribute() == .string("completed"))
        #expect(tracer.activeSpans.isEmpty, "every span ended: \(tracer.activeSpans.map(\.operationName))")
        #expect(tracer.finishedSpans.count == 5)
        env.shutDown()
    }

    @Test func withoutATracerNoSpanIsMade() throws {
        // The bootstrapped tracer is the no-op one here: nothing is recorded, and nothing fails.
        let env = try VirtualRuntime()
        let id = env.runtime.beginBackgroundTask(name: "plain")
        env.runtime.endBackgroundTask(id)
        env.waitForQueuedRequests()
        #expect(env.counter("overtime_background_tasks_begun_total") == 1)
        env.shutDown()
    }
}

/// Runs `body` on a thread of its own and waits for it (a begin off the loop).
private func onOwnThreadSync(_ body: @escaping @Sendable () -> Void) throws {
    let done = Locked(false)
    spawnThread(name: "test-begin") {
        body()
        done.withLock { $0 = true }
        done.broadcast()
    }
    done.withLock(waitingUntil: { $0 }) { _, _ in }
}
