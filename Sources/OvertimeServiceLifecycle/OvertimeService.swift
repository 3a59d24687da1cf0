import Overtime
import ServiceLifecycle

/// An Overtime `Runtime` as a swift-service-lifecycle `Service`, so a `ServiceGroup`
/// runs it beside the program's other services.
///
/// The group's graceful shutdown (its signals, or `triggerGracefulShutdown()`) becomes
/// `Runtime.requestTermination()`: observers see `willTerminate`, grants get their
/// budget, and `run()` returns once the runtime has terminated. Cancelling the service
/// expires every grant at once.
///
/// ```swift
/// let overtime = try OvertimeService(configuration: RuntimeConfiguration())
/// let group = ServiceGroup(configuration: .init(
///     services: [.init(service: overtime), .init(service: httpServer)],
///     gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
/// try await group.run()
/// ```
///
/// Let the group own the signals: the runtime's own signal handling is switched off by
/// ``init(configuration:clock:)``; with ``init(runtime:)`` set
/// `RuntimeConfiguration.signalHandling` to `nil` yourself.
public struct OvertimeService: Service {
    /// The runtime this service runs.
    public let runtime: Runtime

    /// Wraps an existing runtime (not yet started).
    public init(runtime: Runtime) {
        self.runtime = runtime
    }

    /// Creates the runtime with signal handling left to the service group.
    public init(configuration: RuntimeConfiguration, clock: any RuntimeClock = SystemClock()) throws {
        var configuration = configuration
        configuration.signalHandling = nil
        self.runtime = try Runtime(configuration: configuration, clock: clock)
    }

    /// Starts the runtime's loop on its own thread and returns when it has terminated.
    public func run() async throws {
        let runtime = self.runtime
        runtime.start()
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                await runtime.waitUntilTerminated()
            } onGracefulShutdown: {
                runtime.requestTermination()
            }
        } onCancel: {
            runtime.requestTermination()
            runtime.expireBackgroundTasks()
        }
    }
}
