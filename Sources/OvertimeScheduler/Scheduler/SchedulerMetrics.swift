// The scheduler's counters: into the runtime's metrics factory, labelled by handler.

import CoreMetrics

/// The scheduler's metrics (swift-metrics), made through the runtime's factory
/// (`RuntimeConfiguration.metricsFactory`, else the bootstrapped system), like the
/// runtime's own. Runs are labelled by the handler that serves them — its identifier, or
/// its prefix for identifiers served by prefix — never by a free-form identifier, so the
/// number of series stays that of the handlers registered (`thumbnail.4711` counts under
/// `thumbnail.`).
///
/// | metric | type | dimensions |
/// |---|---|---|
/// | `overtime_scheduler_runs_total` | counter | `handler`, `result` |
/// | `overtime_scheduler_lateness_seconds` | timer | `handler` |
/// | `overtime_scheduler_misuse_total` | counter | `kind` |
/// | `overtime_scheduler_superseded_total` | counter | `handler` |
/// | `overtime_scheduler_run_progress_ratio` | gauge | `handler` |
/// | `overtime_scheduler_failed_for_good_total` | counter | `handler` |
/// | `overtime_scheduler_requests` | gauge (when collected) | `state`: enqueued, blocked, running |
extension RunResult {
    /// A failure, an expiration or a termination: an attempt that counts against the retries.
    var isFailure: Bool {
        switch self {
        case .failed, .expired, .terminated: true
        default: false
        }
    }
}

struct SchedulerMetrics: Sendable {
    let factory: any MetricsFactory

    init(factory: (any MetricsFactory)?) {
        self.factory = factory ?? MetricsSystem.factory
    }

    func countRun(handler: String, result: RunResult) {
        Counter(
            label: "overtime_scheduler_runs_total", dimensions: [("handler", handler), ("result", "\(result)")],
            factory: factory
        ).increment()
    }

    /// How long after its due time a run started.
    func recordLateness(handler: String, _ lateness: Duration) {
        Timer(label: "overtime_scheduler_lateness_seconds", dimensions: [("handler", handler)], factory: factory)
            .recordNanoseconds(lateness.saturatingNanoseconds)
    }

    /// A run ended after its claim had been taken over elsewhere (a fleet's store).
    func countSuperseded(handler: String) {
        Counter(label: "overtime_scheduler_superseded_total", dimensions: [("handler", handler)], factory: factory)
            .increment()
    }

    /// The progress a run of the handler last reported (0…1): with runs of one handler at
    /// once, the latest report of any of them.
    func recordProgress(handler: String, _ fraction: Double) {
        Gauge(label: "overtime_scheduler_run_progress_ratio", dimensions: [("handler", handler)], factory: factory)
            .record(fraction)
    }

    /// A run failed with no retry left: its request failed for good (a repeating one goes
    /// on to its next planned run).
    func countFailedForGood(handler: String) {
        Counter(label: "overtime_scheduler_failed_for_good_total", dimensions: [("handler", handler)], factory: factory)
            .increment()
    }

    /// The requests not finished, by state (see ``WorkInfo/State``).
    func recordRequests(enqueued: Int, blocked: Int, running: Int) {
        let label = "overtime_scheduler_requests"
        Gauge(label: label, dimensions: [("state", "enqueued")], factory: factory).record(enqueued)
        Gauge(label: label, dimensions: [("state", "blocked")], factory: factory).record(blocked)
        Gauge(label: label, dimensions: [("state", "running")], factory: factory).record(running)
    }

    func countMisuse(_ kind: String) {
        Counter(label: "overtime_scheduler_misuse_total", dimensions: [("kind", kind)], factory: factory).increment()
    }
}
