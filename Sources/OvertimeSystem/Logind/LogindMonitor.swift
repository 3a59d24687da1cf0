// Sleep and shutdown, as systemd-logind announces them, moving the runtime's lifecycle.

import CLibUV
import CSystemdBus
import Logging
import Overtime
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Lets systemd-logind's sleep and shutdown move the runtime's lifecycle, as iOS moves an
/// app's: the system going to sleep sends the program to the background with the time
/// logind grants, and waits for its grants.
///
/// While it runs, the program holds a *delay* inhibitor lock
/// (`Inhibit("sleep:shutdown", who, why, "delay")`, listed by `systemd-inhibit --list`).
/// On `PrepareForSleep(true)` it enters the background with a budget that ends
/// ``Configuration/margin`` before logind's `InhibitDelayMaxSec`; grants run and expire
/// as usual, and the lock is let go the moment nothing runs (the program suspends) —
/// never later than that budget. On `PrepareForSleep(false)` it takes the lock again and
/// returns to the foreground if it was there. `PrepareForShutdown(true)` is a termination
/// request, as SIGTERM is, in the same budget.
///
/// sd-bus (libsystemd, loaded when ``start()`` runs) talks to the bus on the runtime's
/// loop: no thread of its own. When the bus goes away it waits for its socket to come
/// back (inotify), then connects and takes the lock again: no polling, no wake-up.
public final class LogindMonitor: Sendable {
    /// What the lock says, and how early the budget ends.
    public struct Configuration: Sendable {
        /// Who holds the lock, as `systemd-inhibit --list` shows it. Default: the program's name.
        public var who: String =
            CommandLine.arguments.first.map { String($0.split(separator: "/").last ?? "") }
            ?? "overtime"
        /// Why it holds it.
        public var why: String = "finishing background work first"
        /// How long before logind stops waiting the budget ends. Default 500 ms.
        public var margin: Duration = .milliseconds(500)
        /// The system bus's address (`unix:path=/run/dbus/system_bus_socket`); `nil`:
        /// `$DBUS_SYSTEM_BUS_ADDRESS`, else the standard socket. For a container with the
        /// host's bus socket mounted elsewhere.
        public var busAddress: String?

        /// The defaults.
        public init() {}

        /// Throws ``LogindError`` for an empty or NUL-containing text or a negative margin.
        public func validate() throws(LogindError) {
            for (field, text) in [("who", who), ("why", why)] where text.isEmpty || text.utf8.contains(0) {
                throw LogindError("invalid configuration: \(field) must be non-empty text without NUL")
            }
            if margin < .zero { throw LogindError("invalid configuration: margin must not be negative, got \(margin)") }
        }
    }

    /// What the monitor holds and last heard.
    public struct Status: Sendable, Equatable {
        /// Connected to the system bus.
        public var connected = false
        /// A delay lock is held.
        public var holdsLock = false
        /// logind's `InhibitDelayMaxSec`, once read.
        public var delay: Duration?
        /// The last thing logind said (`PrepareForSleep(true)`, …), if any.
        public var lastEvent: String?
    }

    /// The runtime moved.
    public let runtime: Runtime
    /// The lock's texts and the margin.
    public let configuration: Configuration
    private let logger: Logger
    private let published = Locked(Status())
    private let driver = Locked<LoopBound<LogindDriver?>?>(nil)

    /// A monitor for `runtime`; nothing happens until ``start()``.
    public init(runtime: Runtime, configuration: Configuration = .init(), logger: Logger? = nil) {
        self.runtime = runtime
        self.configuration = configuration
        self.logger = logger ?? Logger(label: "overtime.logind")
    }

    /// Loads libsystemd and connects on the runtime's loop. Throws when libsystemd cannot
    /// be loaded or the configuration is invalid; a system bus that is not there (yet) is
    /// waited for, not an error. A second call does nothing.
    public func start() throws(LogindError) {
        try configuration.validate()
        var failure = [CChar](repeating: 0, count: 256)
        guard overtime_bus_load(&failure, failure.count) == 0 else {
            throw LogindError("libsystemd cannot be loaded: \(Self.text(failure))")
        }
        let context = runtime.driverContext
        let bound = LoopBound<LogindDriver?>(nil, context: context)
        let claimed = driver.withLock { current in
            defer { if current == nil { current = bound } }
            return current == nil
        }
        guard claimed else { return }
        let install: @Sendable () -> Void = { [self] in
            let made = LogindDriver(
                context: context, runtime: runtime, configuration: configuration, logger: logger, published: published)
            bound.value = made
            context.onShutdown { bound.value?.stop() }
            made.start()
        }
        if runtime.isOnLoopThread {
            install()
        } else if !context.execute(install) {
            throw LogindError("the runtime has shut down")
        }
    }

    /// Lets go of the lock and disconnects. From any thread; again is nothing.
    public func stop() {
        guard
            let bound = driver.withLock({ current in
                defer { current = nil }; return current
            })
        else { return }
        if runtime.isOnLoopThread {
            bound.value?.stop()
        } else {
            _ = runtime.driverContext.execute { bound.value?.stop() }
        }
    }

    /// What it holds and last heard.
    public var status: Status { published.withLock { $0 } }

    /// Whether this machine has a system bus to ask: the socket `$DBUS_SYSTEM_BUS_ADDRESS`
    /// names, else `/run/dbus/system_bus_socket`, exists. (Containers and minimal images
    /// often have none; a program can then skip the monitor.)
    public static var systemBusExists: Bool {
        let address = getenv("DBUS_SYSTEM_BUS_ADDRESS").map { String(cString: $0) }
        return LogindDriver.socketPath(ofAddress: address).map { access($0, F_OK) == 0 } ?? true
    }

    /// A NUL-terminated C buffer's text.
    static func text(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// Why a ``LogindMonitor`` cannot start.
public struct LogindError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    public let description: String

    init(_ description: String) { self.description = description }
}

/// The monitor's loop side: the bus, the lock's descriptor and the decisions. Loop only.
final class LogindDriver {
    private let context: DriverContext
    private let runtime: Runtime
    private let configuration: LogindMonitor.Configuration
    private let logger: Logger
    private let published: Locked<LogindMonitor.Status>
    private var decisions: SleepDecisions
    private var bus: SystemBus?
    private var lock: Int32 = -1
    private var releaseTimer: LoopTimer?
    private var socketWatch: UnsafeMutablePointer<uv_fs_event_t>?
    private var retry: UnsafeMutablePointer<uv_timer_t>?
    private var retriesLeft = 0
    private var stopped = false

    init(
        context: DriverContext, runtime: Runtime, configuration: LogindMonitor.Configuration, logger: Logger,
        published: Locked<LogindMonitor.Status>
    ) {
        self.context = context
        self.runtime = runtime
        self.configuration = configuration
        self.logger = logger
        self.published = published
        decisions = SleepDecisions(margin: configuration.margin)
    }

    func start() {
        context.onLifecycleEvent { [weak self] event in
            guard let self, !self.stopped, event == .didSuspend else { return }
            self.perform(self.decisions.nothingRuns())
        }
        if !connect() { watchForBus() }
    }

    func stop() {
        guard !stopped else { return }
        stopped = true
        releaseLock()
        bus?.close()
        bus = nil
        stopWatching()
        published.withLock {
            $0.connected = false
            $0.holdsLock = false
        }
    }

    // MARK: The connection

    /// Connects and subscribes; `false` when the bus is not there.
    @discardableResult
    private func connect() -> Bool {
        let made: SystemBus
        do {
            made = try SystemBus(context: context, address: configuration.busAddress) { [weak self] reason in
                self?.lost(reason)
            }
        } catch {
            logger.debug("\(error)")
            return false
        }
        bus = made
        published.withLock { $0.connected = true }
        made.onManagerSignal("PrepareForSleep") { [weak self] starting in self?.prepareForSleep(starting) }
        made.onManagerSignal("PrepareForShutdown") { [weak self] starting in self?.prepareForShutdown(starting) }
        made.onNameAppearing("org.freedesktop.login1") { [weak self] in
            guard let self else { return }
            self.readDelay()
            self.perform(self.decisions.logindAvailable())
        }
        readDelay()
        perform(decisions.logindAvailable())
        logger.info("connected to the system bus for logind's sleep and shutdown")
        return true
    }

    private func readDelay() {
        bus?.managerProperty("InhibitDelayMaxUSec") { [weak self] result in
            guard let self, case .success(let microseconds) = result else { return }
            let delay = Duration.microseconds(Int64(clamping: microseconds))
            self.decisions.delayRead(delay)
            self.published.withLock { $0.delay = delay }
        }
    }

    private func lost(_ reason: String) {
        bus = nil
        logger.warning("the system bus went away (\(reason)); waiting for it to come back")
        closeLockDescriptor()
        decisions.lockLost()
        published.withLock {
            $0.connected = false
            $0.holdsLock = false
        }
        if !stopped { watchForBus() }
    }

    /// Waits for the bus's socket to be made again (inotify on its folder): no wake-up
    /// while it is gone. A connection refused right after (the daemon not yet listening)
    /// is tried again a few times, 100 ms apart.
    private func watchForBus() {
        let socketPath = Self.socketPath(
            ofAddress: configuration.busAddress ?? getenv("DBUS_SYSTEM_BUS_ADDRESS").map { String(cString: $0) })
        guard socketWatch == nil, let socket = socketPath else {
            if socketPath == nil {
                logger.warning("the system bus address is not a socket path: not reconnecting")
            }
            return
        }
        let folder = socket.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        let watch = context.makeHandle(uv_fs_event_t.self)
        uv_fs_event_init(context.loop, watch)
        watch.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        let started = uv_fs_event_start(
            watch,
            { handle, _, _, _ in
                Unmanaged<LogindDriver>.fromOpaque(handle!.pointee.data).takeUnretainedValue().busFolderChanged()
            }, folder.isEmpty ? "/" : folder, 0)
        guard started == 0 else {
            uv_close(UnsafeMutableRawPointer(watch).assumingMemoryBound(to: uv_handle_t.self), nil)
            logger.warning(
                "cannot watch \(folder) for the system bus to come back: \(String(cString: uv_strerror(started)))")
            return
        }
        socketWatch = watch
    }

    private func busFolderChanged() {
        guard bus == nil, !stopped else { return }
        retriesLeft = 20
        attemptReconnect()
    }

    private func attemptReconnect() {
        guard bus == nil, !stopped else { return }
        if connect() {
            stopWatching()
            return
        }
        retriesLeft -= 1
        guard retriesLeft > 0 else { return }
        if retry == nil {
            let timer = context.makeHandle(uv_timer_t.self)
            uv_timer_init(context.loop, timer)
            timer.pointee.data = Unmanaged.passUnretained(self).toOpaque()
            retry = timer
        }
        uv_timer_start(
            retry,
            { handle in
                Unmanaged<LogindDriver>.fromOpaque(handle!.pointee.data).takeUnretainedValue().attemptReconnect()
            }, 100, 0)
    }

    private func stopWatching() {
        if let socketWatch {
            uv_fs_event_stop(socketWatch)
            uv_close(UnsafeMutableRawPointer(socketWatch).assumingMemoryBound(to: uv_handle_t.self), nil)
        }
        socketWatch = nil
        if let retry {
            uv_timer_stop(retry)
            uv_close(UnsafeMutableRawPointer(retry).assumingMemoryBound(to: uv_handle_t.self), nil)
        }
        retry = nil
    }

    /// The first `unix:path=` of a bus address, the standard socket for none; `nil` for an
    /// address that is not a socket path (abstract, TCP).
    static func socketPath(ofAddress address: String?) -> String? {
        guard let address, !address.isEmpty else { return "/run/dbus/system_bus_socket" }
        for entry in address.split(separator: ";") where entry.hasPrefix("unix:") {
            for key in entry.dropFirst(5).split(separator: ",") where key.hasPrefix("path=") {
                return String(key.dropFirst(5))
            }
        }
        return nil
    }

    // MARK: What logind says

    private func prepareForSleep(_ starting: Bool) {
        note(starting ? "PrepareForSleep(true)" : "PrepareForSleep(false)")
        perform(starting ? decisions.sleepComing(state: context.snapshot.state) : decisions.resumed())
    }

    private func prepareForShutdown(_ starting: Bool) {
        note(starting ? "PrepareForShutdown(true)" : "PrepareForShutdown(false)")
        if starting { perform(decisions.shutdownComing()) }
    }

    private func note(_ event: String) {
        logger.notice("logind: \(event)")
        published.withLock { $0.lastEvent = event }
    }

    // MARK: Performing

    private func perform(_ actions: [SleepDecisions.Action]) {
        for action in actions {
            switch action {
            case .takeLock:
                takeLock()
            case .releaseLock:
                releaseLock()
            case .enterBackground(let budget):
                let source = "logind: the system prepares for sleep"
                context.request(.background, from: source)
                context.request(.capBackgroundBudget(budget), from: source)
                // Applied in order with the requests: nothing may run by then.
                let bound = LoopBound<LogindDriver?>(self, context: context)
                _ = context.execute {
                    guard let driver = bound.value, driver.context.snapshot.state == .suspended else { return }
                    driver.perform(driver.decisions.nothingRuns())
                }
            case .releaseLockAfter(let length):
                let bound = LoopBound<LogindDriver?>(self, context: context)
                releaseTimer?.cancel()
                releaseTimer = runtime.schedule(after: length) {
                    guard let driver = bound.value else { return }
                    driver.perform(driver.decisions.nothingRuns())
                }
            case .returnToForeground:
                context.request(.foreground, from: "logind: the system resumed")
            case .terminate(let budget):
                let source = "logind: the system prepares to shut down"
                context.request(.terminate, from: source)
                context.request(.capBackgroundBudget(budget), from: source)
            }
        }
    }

    private func takeLock() {
        guard let bus else { return decisions.lockLost() }
        bus.inhibit(what: "sleep:shutdown", who: configuration.who, why: configuration.why) { [weak self] result in
            guard let self else { return }
            switch result {
            case .success(let descriptor):
                guard !self.stopped, self.lock < 0 else {
                    close(descriptor)  // a second grant, or one after stop: not needed
                    return
                }
                self.lock = descriptor
                self.published.withLock { $0.holdsLock = true }
                self.logger.info("holding logind's sleep and shutdown delay lock")
                self.perform(self.decisions.lockGranted())
            case .failure(let error):
                self.decisions.lockLost()
                self.logger.warning("logind refused the delay lock: \(error); taken when logind appears")
            }
        }
    }

    private func releaseLock() {
        releaseTimer?.cancel()
        releaseTimer = nil
        guard lock >= 0 else { return }
        closeLockDescriptor()
        logger.info("let go of logind's delay lock: the system may sleep")
    }

    private func closeLockDescriptor() {
        if lock >= 0 { close(lock) }
        lock = -1
        published.withLock { $0.holdsLock = false }
    }
}
