// The peer of `sigterm_to_exit_ms`: the smallest swift-service-lifecycle program — one
// service in a ServiceGroup that stops gracefully on SIGTERM. It says READY=1 on
// NOTIFY_SOCKET once its service runs (the group's signal handling is set up by then).

import Logging
import ReadyNotification
import ServiceLifecycle

struct Idle: Service {
    func run() async throws {
        notifyReady()
        try? await gracefulShutdown()
    }
}

let group = ServiceGroup(
    configuration: ServiceGroupConfiguration(
        services: [.init(service: Idle())], gracefulShutdownSignals: [.sigterm],
        logger: Logger(label: "peer") { _ in SwiftLogNoOpLogHandler() }))
try await group.run()
