import Logging
import MetricsTestKit
import Overtime
import OvertimeSupport
import OvertimeTesting

/// A thread-safe list that tests append to from handlers on the loop thread.
package final class Recorder<Element: Sendable>: Sendable {
    private let items = Locked<[Element]>([])

    package init() {}

    package func append(_ element: Element) { items.withLock { $0.append(element) } }
    /// Appends `elements` at once: no reader sees some of them without the others.
    package func append(contentsOf elements: [Element]) { items.withLock { $0.append(contentsOf: elements) } }
    package var all: [Element] { items.withLock { $0 } }
    package var count: Int { items.withLock { $0.count } }
    package func removeAll() { items.withLock { $0.removeAll() } }
}

/// Captures what the runtime logs.
package final class LogCapture: Sendable {
    package struct Entry: Sendable {
        package let level: Logger.Level
        package let message: String
        package let metadata: [String: String]
    }

    package let entries = Recorder<Entry>()

    package init() {}

    package var logger: Logger {
        Logger(label: "test") { _ in CaptureHandler(capture: self, forward: nil) }
    }

    /// A logger labelled `label` that captures each record and also hands it to `forward`,
    /// as a bootstrapped `MultiplexLogHandler` would hand it to a second handler.
    package func logger(label: String, forwardingTo forward: @escaping @Sendable (LogEvent) -> Void) -> Logger {
        Logger(label: label) { _ in CaptureHandler(capture: self, forward: forward) }
    }

    package func messages(at level: Logger.Level) -> [Entry] { entries.all.filter { $0.level == level } }

    private struct CaptureHandler: LogHandler {
        let capture: LogCapture
        let forward: (@Sendable (LogEvent) -> Void)?
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
            forward?(event)
        }
    }
}

/// A runtime on virtual time, started on its own loop thread, with logs and metrics captured.
package struct VirtualRuntime {
    package let runtime: Runtime
    package let clock: ManualClock
    package let logs: LogCapture
    package let metrics: TestMetrics

    package init(
        budget: Duration = .seconds(30), lead: Duration = .seconds(5), maximumOpen: Int = 100_000,
        wallClock: WallClockInstant = ManualClock.defaultWallClockStart,
        configure: (inout RuntimeConfiguration) -> Void = { _ in }
    ) throws {
        clock = ManualClock(now: MonotonicInstant(nanoseconds: 1_000_000_000), wallClock: wallClock)
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
    package func at(_ offset: Duration) -> MonotonicInstant { MonotonicInstant(nanoseconds: 1_000_000_000) + offset }

    /// Applies queued requests.
    package func waitForQueuedRequests() { clock.waitForQueuedRequests() }

    /// Ends the runtime and waits for its loop to close.
    package func shutDown() {
        runtime.requestTermination()
        runtime.expireBackgroundTasks()
        clock.advance(by: .seconds(3600))
        runtime.waitUntilTerminated()
    }

    /// The value of counter `label` with `dimensions`, or 0.
    package func counter(_ label: String, _ dimensions: [(String, String)] = []) -> Int64 {
        (try? metrics.expectCounter(label, dimensions).totalValue) ?? 0
    }
}
