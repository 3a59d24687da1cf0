// The span of a scheduled run: from its start to its end, the parent of its grant's.

import Tracing

/// `overtime.scheduled_run`: one span per attempt of a run, a trace of its own (a run is
/// started by the schedule, not by whoever submitted it); the run's grant
/// (`overtime.grant`) and whatever its handler traces are its children.
///
/// | attribute | value |
/// |---|---|
/// | `overtime.run.identifier` | the request's identifier |
/// | `overtime.run.handler` | the handler's name (a prefix handler's prefix) |
/// | `overtime.run.id` | the run's ID (the same for every attempt of a run) |
/// | `overtime.run.attempt` | the attempt, from 1 |
/// | `overtime.run.instance` | in a fleet, the instance that ran it |
/// | `overtime.run.result` | how the attempt ended (`succeeded`, `failed`, `expired`, …) |
/// | `overtime.run.stop_reason` | why it stopped, when it did not succeed |
enum RunSpan {
    static func start(
        _ tracer: any Tracer, _ stored: StoredRequest, runID: Int64, attempt: Int, handler: String, instance: String?
    ) -> any Span {
        let span = tracer.startSpan("overtime.scheduled_run", context: .topLevel)
        span.attributes["overtime.run.identifier"] = stored.request.identifier
        span.attributes["overtime.run.handler"] = handler
        span.attributes["overtime.run.id"] = Int(runID)
        span.attributes["overtime.run.attempt"] = attempt
        if let instance { span.attributes["overtime.run.instance"] = instance }
        return span
    }

    /// The attempt ended as `record` says.
    static func end(_ span: any Span, _ record: RunRecord) {
        span.attributes["overtime.run.result"] = "\(record.result)"
        if let reason = record.stopReason { span.attributes["overtime.run.stop_reason"] = reason }
        if record.result != .succeeded {
            span.setStatus(SpanStatus(code: .error, message: record.stopReason ?? "\(record.result)"))
        }
        span.end()
    }

    /// Runs `body` with `span` as the current context; without a span (no tracer: the path
    /// every run takes then), just runs it, with no task-local binding to push and pop.
    static func within<T>(_ span: (any Span)?, _ body: () -> T) -> T {
        guard let span else { return body() }
        return InstrumentationContext.withValue(span.context, operation: body)
    }

    /// The runtime gave the run no grant: it did not start.
    static func refused(_ span: any Span, _ why: String) {
        span.attributes["overtime.run.result"] = "refused"
        span.setStatus(SpanStatus(code: .error, message: why))
        span.end()
    }
}
