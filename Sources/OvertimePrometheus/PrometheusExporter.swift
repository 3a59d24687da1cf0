// The facade: a Prometheus registry as the program's metrics backend, and its exposition
// served over the control socket and, when asked, GET /metrics on the runtime's loop.

import CoreMetrics
import Overtime
import OvertimeSupport
import Prometheus

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Exports a program's metrics in Prometheus' text format.
///
/// ```swift
/// let exporter = PrometheusExporter()
/// MetricsSystem.bootstrap(exporter.factory)  // once, before the runtime and its parts start
/// let runtime = try Runtime(configuration: configuration)
/// try exporter.serve(on: runtime, listeningAt: .loopback(port: 9464))
/// ```
///
/// ``serve(on:listeningAt:)`` adds the `metrics` command to the runtime's control socket
/// (`overtimectl metrics` prints the exposition, no port needed) and, given an address,
/// serves `GET /metrics` there from the runtime's loop: no thread of its own and no
/// SwiftNIO, nothing done while nobody scrapes.
///
/// The exposition is the registry's families, each with its help line (Overtime's own
/// metrics carry theirs; swift-metrics has no place for one), then the process's figures
/// as Prometheus' client libraries name them (`process_cpu_seconds_total`,
/// `process_resident_memory_bytes`, `process_open_fds`, `process_start_time_seconds`, …).
/// Overtime's histograms get buckets that suit them (a scheduler's lateness runs to hours).
/// The metrics an operator alerts on are listed in <doc:Alerting>.
public final class PrometheusExporter: Sendable {
    /// The most clients `GET /metrics` serves at once (more are answered 503 and closed):
    /// the descriptors a program should keep room for, beside the listener's own.
    public static let maximumConnections = MetricsHTTPServer.maximumConnections

    /// The registry the factory records into; add the program's own metrics here or through
    /// swift-metrics.
    public let registry: PrometheusCollectorRegistry
    /// The swift-metrics backend recording into ``registry``: pass it to
    /// `MetricsSystem.bootstrap(_:)`, or to `RuntimeConfiguration.metricsFactory` and the
    /// scheduler's configuration.
    public let factory: PrometheusMetricsFactory
    private let process = ProcessMetrics()
    private let extraHelp: [String: String]
    private let endpointErrors: @Sendable (String) -> Void

    /// An exporter over `registry`.
    ///
    /// - Parameters:
    ///   - registry: Where the metrics are kept (a new registry by default).
    ///   - help: Help lines for the program's own metric families, by name, shown beside
    ///     Overtime's.
    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(), help: [String: String] = [:]) {
        self.registry = registry
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets = MetricCatalog.durationBuckets
        self.factory = factory
        self.extraHelp = help
        self.endpointErrors = { [factory] kind in
            Counter(label: "overtime_metrics_http_errors_total", dimensions: [("kind", kind)], factory: factory)
                .increment()
        }
    }

    /// The exposition as it stands now: Prometheus' text format, version 0.0.4.
    public func exposition() -> String {
        String(decoding: expositionBytes(), as: UTF8.self)
    }

    func expositionBytes() -> [UInt8] {
        MetricSamplers.sampleAll()
        var bytes: [UInt8] = []
        registry.emit(into: &bytes)
        let extraHelp = self.extraHelp
        var result = addingHelpLines(to: bytes) { name in
            MetricCatalog.help[String(name)] ?? extraHelp[String(name)]
        }
        result += process.exposition()
        return result
    }

    /// Serves the exposition from `runtime`'s loop: the control socket's `metrics` command
    /// always, and `GET /metrics` at `address` when one is given.
    ///
    /// The address is bound here, on the caller's thread, so that a bad one fails before
    /// the program goes on; serving starts on the loop.
    ///
    /// - Returns: Where the endpoint listens (the port the kernel chose, for port 0), or
    ///   `nil` without an address.
    /// - Throws: ``MetricsExportError``: `cannotListen` (the address in use, not this
    ///   machine's), or `runtimeShutDown`.
    @discardableResult
    public func serve(on runtime: Runtime, listeningAt address: MetricsListenAddress? = nil) throws
        -> MetricsEndpoint?
    {
        try serve(on: runtime, listeningAt: address, connectionDeadline: MetricsHTTPServer.connectionDeadline)
    }

    /// ``serve(on:listeningAt:)`` with each connection closed `connectionDeadline` after it
    /// was accepted (tests shorten it).
    @discardableResult
    package func serve(
        on runtime: Runtime, listeningAt address: MetricsListenAddress?, connectionDeadline: Duration
    ) throws -> MetricsEndpoint? {
        runtime.addControlCommand("metrics") { [self] in .success(exposition()) }
        guard let address else { return nil }
        let socket = try TCPListeningSocket.bind(address)
        let context = runtime.driverContext
        let errors = endpointErrors
        let start: @Sendable () -> Void = { [self] in
            let server = MetricsHTTPServer(
                runtime: runtime, render: { [self] in expositionBytes() }, errors: errors,
                connectionDeadline: connectionDeadline)
            if server.start(socket) {
                context.logger.info("metrics endpoint listening", metadata: ["address": "\(socket.address)"])
            }
        }
        if runtime.isOnLoopThread {
            start()
        } else if !context.execute(start) {
            close(socket.fd)
            throw MetricsExportError(.runtimeShutDown, "the runtime has shut down; nothing is served from its loop")
        }
        return MetricsEndpoint(address: socket.address)
    }
}

/// Where ``PrometheusExporter/serve(on:listeningAt:)`` serves `GET /metrics`.
public struct MetricsEndpoint: Sendable, Hashable {
    /// The address bound: for port 0, the port the kernel chose.
    public let address: MetricsListenAddress
    /// `http://ADDR:PORT/metrics`.
    public var url: String { "http://\(address)/metrics" }
}
