#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Starting the drivers the configuration asks for, each through the one seam.
extension Runtime {
    /// The seam for drivers in this package's other modules (the HTTP sink's libcurl
    /// driver, the scheduler). Package-only: users never see libuv.
    package var driverContext: DriverContext { drivers }

    /// The runtime's spans, for parts that make their own beside them (the scheduler's
    /// runs, the uploader's segments); `nil` without a tracer.
    package var tracing: RuntimeTracing? { core.tracing }

    /// Starts the configured drivers, on the thread about to run the loop.
    func startDrivers() {
        if let handling = configuration.signalHandling {
            SignalDriver(context: drivers, handling: handling).start()
        }
        if configuration.systemdNotify,
            let notifier = SystemdNotifier(context: drivers, environment: { getenv($0).map { String(cString: $0) } })
        {
            notifier.start()
        }
        if let controlListener {
            ControlSocketServer(context: drivers, listener: controlListener, commands: controlCommands).start()
        }
    }
}
