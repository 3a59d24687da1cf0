import Logging
import MetricsTestKit
import Overtime
import OvertimeTesting

/// A thread-safe list that tests append to from handlers on the loop thread.
final class Recorder<Element: Sendable>: Sendable {
    private let items = Locked<[Element]>([])

    func append(_ element: Element) { items.withLock { $0.append(element) } }
    var all: [Element] { items.withLock { $0 } }
    var count: Int { items.withLock { $0.count } }
    func removeAll() { items.withLock { $0.removeAll() } }
}

/// Captures what the runtime logs.
final class LogCapture: Sendable {
    struct Entry: Sendable {
        let level: Logger.Level
        let message: String
        let metadata: [String: String]
    }

    let entries = Recorder<Entry>()

    var logger: Logger {
        Logger(label: "test") { _ in CaptureHandler(capture: self) }
    }

    func messages(at level: Logger.Level) -> [Entry] { entries.all.filter { $0.level == level } }

    private struct CaptureHandler: LogHandler {
        let capture: LogCapture
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            var flat: [String: String] = [:]
            for (key, value) in event.metadata ?? [:] { flat[key] = "\(value)" }
            capture.entries.append(Entry(level: event.level, message: "\(event.message)", metadata: flat))
        }
    }
}

/// A runtime on virtual time, started on its own loop thread, with logs and metrics captured.
struct VirtualRuntime {
    let runtime: Runtime
    let clock: ManualClock
    let logs: LogCapture
    let metrics: TestMetrics

    init(
        budget: Duration = .seconds(30), lead: Duration = .seconds(5), maximumOpen: Int = 100_000,
        configure: (inout RuntimeConfiguration) -> Void = { _ in }
    ) throws {
        clock = ManualClock(now: MonotonicInstant(nanoseconds: 1_000_000_000))
        logs = LogCapture()
        metrics = TestMetrics()
        var configuration = RuntimeConfiguration()
        configuration.backgroundBudget = budget
        configuration.expirationLeadTime = lead
        configuration.maximumOpenBackgroundTasks = maximumOpen
        configuration.logger = logs.logger
        configuration.metricsFactory = metrics
        configuration.watchdogTimeout = nil
        configuration.signalHandling = nil  // many runtimes share the test process
        configure(&configuration)
        runtime = try Runtime(configuration: configuration, clock: clock)
        runtime.start()
    }

    /// The instant `offset` after the clock's start.
    func at(_ offset: Duration) -> MonotonicInstant { MonotonicInstant(nanoseconds: 1_000_000_000) + offset }

    /// Applies queued requests.
    func waitForQueuedRequests() { clock.waitForQueuedRequests() }

    /// Ends the runtime and waits for its loop to close.
    func shutDown() {
        runtime.requestTermination()
        runtime.expireBackgroundTasks()
        clock.advance(by: .seconds(3600))
        runtime.waitUntilTerminated()
    }

    /// The value of counter `label` with `dimensions`, or 0.
    func counter(_ label: String, _ dimensions: [(String, String)] = []) -> Int64 {
        (try? metrics.expectCounter(label, dimensions).totalValue) ?? 0
    }
}
