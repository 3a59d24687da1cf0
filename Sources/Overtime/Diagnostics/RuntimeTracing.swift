// Spans of grants (swift-distributed-tracing), and what the scheduler and the uploader
// need to hang their spans under them.

import OvertimeSupport
import Tracing

/// The runtime's spans: one per grant, `overtime.grant`, from its begin to its end, a
/// child of the context the begin was called in (a scheduled run's span, a request's).
///
/// | attribute | value |
/// |---|---|
/// | `overtime.grant.name` | the grant's name |
/// | `overtime.grant.id` | its ID as logs print it |
/// | `overtime.grant.call_site` | where it was begun |
/// | `overtime.grant.outcome` | `completed`, `expired` (ended after its expiration) or `terminated` |
/// | `overtime.grant.expired` | whether its expiration handler was asked to run |
/// | `overtime.grant.terminated` | whether the runtime ended it at its deadline (the span's status is then an error) |
///
/// Made only for a tracer other than the no-op one: a program that bootstraps none pays
/// one branch per begin and end, nothing more.
package final class RuntimeTracing: Sendable {
    /// Where every span of the runtime and its parts goes.
    package let tracer: any Tracer
    /// Open grants' spans, by ID, and what the loop decided of grants whose begin has
    /// not stored its span yet (begun off the loop, applied and ended before the beginning
    /// thread got here).
    private let grants = Locked<Grants>(Grants())

    private struct Grants {
        var spans: [UInt64: any Span] = [:]
        var expiredEarly: Set<UInt64> = []
        var endedEarly: [UInt64: BackgroundTaskEndReason] = [:]
    }

    private init(tracer: any Tracer) {
        self.tracer = tracer
    }

    /// Tracing to `configured`, else to the bootstrapped tracer; `nil` when that is the
    /// no-op tracer.
    static func make(_ configured: (any Tracer)?) -> RuntimeTracing? {
        let tracer = configured ?? InstrumentationSystem.tracer
        return tracer is NoOpTracer ? nil : RuntimeTracing(tracer: tracer)
    }

    /// A grant began (in the caller's context). Any thread.
    func grantBegan(_ id: BackgroundTaskID, name: String, callSite: CallSite) {
        let span = tracer.startSpan("overtime.grant", context: InstrumentationContext.current ?? .topLevel)
        span.attributes["overtime.grant.name"] = name
        span.attributes["overtime.grant.id"] = "\(id)"
        span.attributes["overtime.grant.call_site"] = "\(callSite)"
        let (expired, ended) = grants.withLock { grants -> (Bool, BackgroundTaskEndReason?) in
            let expired = grants.expiredEarly.remove(id.rawValue) != nil
            guard let ended = grants.endedEarly.removeValue(forKey: id.rawValue) else {
                grants.spans[id.rawValue] = span
                return (expired, nil)
            }
            return (expired, ended)
        }
        if expired { Self.markExpiring(span) }
        if let ended { Self.end(span, ended) }
    }

    /// The grant's expiration handler is asked to run. Loop thread.
    func grantExpiring(_ id: BackgroundTaskID) {
        let span = grants.withLock { grants -> (any Span)? in
            guard let span = grants.spans[id.rawValue] else {
                grants.expiredEarly.insert(id.rawValue)
                return nil
            }
            return span
        }
        if let span { Self.markExpiring(span) }
    }

    /// The grant ended. Loop thread.
    func grantEnded(_ id: BackgroundTaskID, _ reason: BackgroundTaskEndReason) {
        let span = grants.withLock { grants -> (any Span)? in
            guard let span = grants.spans.removeValue(forKey: id.rawValue) else {
                grants.endedEarly[id.rawValue] = reason
                return nil
            }
            return span
        }
        if let span { Self.end(span, reason) }
    }

    private static func markExpiring(_ span: any Span) {
        span.addEvent("expiration")
        span.attributes["overtime.grant.expired"] = true
    }

    private static func end(_ span: any Span, _ reason: BackgroundTaskEndReason) {
        span.attributes["overtime.grant.outcome"] = "\(reason)"
        if span.attributes["overtime.grant.expired"] == nil { span.attributes["overtime.grant.expired"] = false }
        span.attributes["overtime.grant.terminated"] = reason == .terminated
        if reason == .terminated {
            span.setStatus(SpanStatus(code: .error, message: "never ended: terminated at its deadline"))
        }
        span.end()
    }

    /// The context of the open grant `id`'s span, for spans of work done inside it.
    package func context(ofGrant id: BackgroundTaskID) -> InstrumentationContext? {
        grants.withLock { $0.spans[id.rawValue]?.context }
    }
}
