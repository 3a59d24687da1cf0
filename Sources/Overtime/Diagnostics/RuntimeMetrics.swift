import CoreMetrics

/// The runtime's counters and timers (swift-metrics).
///
/// Counts from the loop's hot path are accumulated in plain integers and handed to
/// the metrics backend once per loop turn, so a backend with locks never sits on the
/// begin/end path. Counts that can happen on any thread go straight to the backend.
///
/// | metric | kind | dimensions |
/// |---|---|---|
/// | `overtime_background_tasks_begun_total` | counter | |
/// | `overtime_background_tasks_ended_total` | counter | `reason`: completed, expired, terminated |
/// | `overtime_background_tasks_expired_total` | counter (expiration handlers asked to run) | |
/// | `overtime_background_tasks_refused_total` | counter | `reason` |
/// | `overtime_misuse_total` | counter (bad end calls, dropped grants) | `kind` |
/// | `overtime_control_errors_total` | counter (control-socket errors) | `kind` |
/// | `overtime_background_duration_seconds` | timer (time spent per background period) | |
/// | `overtime_handler_duration_seconds` | timer | `handler`: expiration, end, observer (one event to all observers) |
struct RuntimeMetrics {
    let shared: SharedMetrics
    private let begun: Counter
    private let endedCompleted: Counter
    private let endedExpired: Counter
    private let endedTerminated: Counter
    private let expired: Counter
    let backgroundDuration: Timer
    let expirationHandlerDuration: Timer
    let endHandlerDuration: Timer
    let observerDuration: Timer

    var pendingBegun = 0
    var pendingCompleted = 0
    var pendingExpiredEnds = 0
    var pendingTerminated = 0
    var pendingExpirations = 0

    init(factory: (any MetricsFactory)?) {
        let factory = factory ?? MetricsSystem.factory
        self.shared = SharedMetrics(factory: factory)
        begun = Counter(label: "overtime_background_tasks_begun_total", factory: factory)
        let ended = "overtime_background_tasks_ended_total"
        endedCompleted = Counter(label: ended, dimensions: [("reason", "completed")], factory: factory)
        endedExpired = Counter(label: ended, dimensions: [("reason", "expired")], factory: factory)
        endedTerminated = Counter(label: ended, dimensions: [("reason", "terminated")], factory: factory)
        expired = Counter(label: "overtime_background_tasks_expired_total", factory: factory)
        backgroundDuration = Timer(label: "overtime_background_duration_seconds", factory: factory)
        let handler = "overtime_handler_duration_seconds"
        expirationHandlerDuration = Timer(label: handler, dimensions: [("handler", "expiration")], factory: factory)
        endHandlerDuration = Timer(label: handler, dimensions: [("handler", "end")], factory: factory)
        observerDuration = Timer(label: handler, dimensions: [("handler", "observer")], factory: factory)
    }

    /// Hands the accumulated counts to the backend. Loop thread, once per turn.
    /// When the program left the foreground, for `overtime_background_duration_seconds`.
    private var backgroundEnteredAt: MonotonicInstant?

    /// Times each stay out of the foreground (until back in it, or terminated).
    mutating func noteStateChange(from previous: LifecycleState, to state: LifecycleState, at now: MonotonicInstant) {
        if previous.isForeground, !state.isForeground {
            backgroundEnteredAt = now
        } else if state.isForeground || state == .terminated, let since = backgroundEnteredAt {
            backgroundDuration.recordNanoseconds(Int64(clamping: (now - since).clampedNanoseconds))
            backgroundEnteredAt = nil
        }
    }

    mutating func flush() {
        func drain(_ count: inout Int, into counter: Counter) {
            if count > 0 {
                counter.increment(by: Int64(count))
                count = 0
            }
        }
        drain(&pendingBegun, into: begun)
        drain(&pendingCompleted, into: endedCompleted)
        drain(&pendingExpiredEnds, into: endedExpired)
        drain(&pendingTerminated, into: endedTerminated)
        drain(&pendingExpirations, into: expired)
    }
}

/// The counts that can happen on any thread; they go straight to the backend.
struct SharedMetrics: Sendable {
    let factory: any MetricsFactory

    /// Counts a refusal.
    func countRefusal(_ refusal: BackgroundTaskRefusal) {
        Counter(
            label: "overtime_background_tasks_refused_total",
            dimensions: [("reason", refusal.metricLabel)], factory: factory
        ).increment()
    }

    /// Counts a control-socket error (`kind`: bad_request, too_large, peer_refused).
    func countControlError(_ kind: String) {
        Counter(label: "overtime_control_errors_total", dimensions: [("kind", kind)], factory: factory).increment()
    }

    /// Counts a memory warning delivered to observers.
    func countMemoryWarning() {
        Counter(label: "overtime_memory_warnings_total", factory: factory).increment()
    }

    /// Counts a system-bus signal not acted on, by the bus name it claimed to come from.
    func countIgnoredSystemBusSignal(_ claimedSender: String) {
        Counter(
            label: "overtime_system_bus_ignored_signals_total", dimensions: [("claimed_sender", claimedSender)],
            factory: factory
        ).increment()
    }

    /// Counts a misuse (`kind`: unknown_id, invalid_id, dropped_grant).
    func countMisuse(_ kind: String) {
        Counter(label: "overtime_misuse_total", dimensions: [("kind", kind)], factory: factory).increment()
    }
}
