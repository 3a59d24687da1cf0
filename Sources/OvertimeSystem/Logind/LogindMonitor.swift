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
/// returns to the foreground if it was there. `PrepareForShutdown(true)` starts the work
/// early: the program enters the background with its own budget, the lock goes when
/// nothing runs or logind's delay is up, and the SIGTERM the service manager sends next
/// ends what still runs, with the stop's budget.
///
/// Only logind moves the program: a signal is acted on when its sender is the connection
/// that owns `org.freedesktop.login1` now (any local client can address a signal to the
/// program's connection); others are ignored and counted (``Status/ignoredSignals``,
/// `overtime_system_bus_ignored_signals_total`).
///
/// sd-bus (libsystemd, loaded once a system bus is there) talks to the bus on the runtime's
/// loop: no thread of its own. A bus that is not there yet, or goes away, is waited for
/// (its socket's folder watched; a socket that stays but refuses tried again with a
/// backoff); connected, nothing polls.
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
        /// The logind session (its ID, as `loginctl list-sessions` shows it, e.g.
        /// `$XDG_SESSION_ID`) whose screen the program lives on, for a kiosk: while it is
        /// switched away (not `Active`) or locked (`Lock`, `LockedHint`) the program is in the
        /// background, and it returns to the foreground when the session is active and
        /// unlocked again. `nil` (the default): no session moves the program.
        public var session: String?

        /// The defaults.
        public init() {}

        /// Throws ``LogindError`` for an empty or NUL-containing text or a negative margin.
        public func validate() throws(LogindError) {
            for (field, text) in [("who", who), ("why", why)] where text.isEmpty || text.utf8.contains(0) {
                throw LogindError("invalid configuration: \(field) must be non-empty text without NUL")
            }
            if margin < .zero { throw LogindError("invalid configuration: margin must not be negative, got \(margin)") }
            if let session, session.isEmpty || session.utf8.contains(0) {
                throw LogindError("invalid configuration: session must be a non-empty session ID without NUL")
            }
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
        /// The last thing logind said (`PrepareForSleep(true)`, `session locked`, …), if any.
        public var lastEvent: String?
        /// How long the last sleep waited for the program: from `PrepareForSleep(true)`
        /// arriving to the lock let go.
        public var lastSleepWait: Duration?
        /// The configured session is active (on its seat's screen); `nil` when not
        /// followed or not yet read.
        public var sessionActive: Bool?
        /// The configured session is locked; `nil` when not followed or not yet read.
        public var sessionLocked: Bool?
        /// Signals not acted on: sent by a connection that does not own the bus name they
        /// claimed to come from (a forgery by a local client).
        public var ignoredSignals = 0

        /// One line, as `overtimectl status` shows it: `lock held (delay 5 s); last
        /// PrepareForSleep(false)`.
        public var summary: String {
            var parts = [
                !connected ? "no system bus" : holdsLock ? "delay lock held" : "no delay lock"
            ]
            if let delay { parts[0] += " (logind waits \(delay))" }
            if let sessionActive {
                parts.append(
                    "session \(sessionActive ? "active" : "inactive")\(sessionLocked == true ? ", locked" : "")")
            }
            if let lastEvent { parts.append("last: \(lastEvent)") }
            if let lastSleepWait { parts.append("last sleep waited \(lastSleepWait)") }
            if ignoredSignals > 0 { parts.append("\(ignoredSignals) forged signals ignored") }
            return parts.joined(separator: "; ")
        }
    }

    /// The runtime moved.
    public let runtime: Runtime
    /// The lock's texts and the margin.
    public let configuration: Configuration
    private let logger: Logger
    private let published = Locked(Status())
    private let slot: LoopDriverSlot<LogindDriver>

    /// A monitor for `runtime`; nothing happens until ``start()``.
    public init(runtime: Runtime, configuration: Configuration = .init(), logger: Logger? = nil) {
        self.runtime = runtime
        self.configuration = configuration
        self.logger = logger ?? Logger(label: "overtime.logind")
        slot = LoopDriverSlot(runtime: runtime)
    }

    /// Connects on the runtime's loop, loading libsystemd. Throws when the configuration is
    /// invalid, or when a system bus is there and libsystemd cannot be loaded; a system bus
    /// that is not there (yet) is waited for, not an error, and libsystemd is loaded only
    /// once it appears (a machine without a bus maps none of it). A second call does nothing.
    public func start() throws(LogindError) {
        try configuration.validate()
        var failure = [CChar](repeating: 0, count: 256)
        if SystemBusLink.exists(address: configuration.busAddress), overtime_bus_load(&failure, failure.count) != 0 {
            throw LogindError("libsystemd cannot be loaded: \(Self.text(failure))")
        }
        let (runtime, configuration, logger, published) = (runtime, configuration, logger, published)
        let installed = slot.install(
            { context in
                context.addStatusPart { "logind: " + published.withLock { $0.summary } }
                return LogindDriver(
                    context: context, runtime: runtime, configuration: configuration, logger: logger,
                    published: published)
            }, start: { $0.start() }, stop: { $0.stop() })
        if installed == nil { throw LogindError("the runtime has shut down") }
    }

    /// Lets go of the lock and disconnects. From any thread; again is nothing.
    public func stop() {
        slot.stop { $0.stop() }
    }

    /// What it holds and last heard.
    public var status: Status { published.withLock { $0 } }

    /// Whether this machine has a system bus to ask: the socket `$DBUS_SYSTEM_BUS_ADDRESS`
    /// names, else `/run/dbus/system_bus_socket`, exists. (Containers and minimal images
    /// often have none; a program can then skip the monitor.)
    public static var systemBusExists: Bool {
        SystemBusLink.exists(address: nil)
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

/// The monitor's loop side: the bus, the lock's descriptor, the session, and the decisions
/// about them. Loop only.
final class LogindDriver {
    private let context: DriverContext
    private let runtime: Runtime
    private let configuration: LogindMonitor.Configuration
    private let logger: Logger
    private let published: Locked<LogindMonitor.Status>
    private var decisions: SleepDecisions
    private var session = SessionDecisions()
    private var link: SystemBusLink!
    private var lock: Int32 = -1
    private var releaseTimer: LoopTimer?
    private var sleepBegan: MonotonicInstant?
    private var stopped = false
    private var saidUnusable = false

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
        link = SystemBusLink(
            context: context, address: configuration.busAddress, logger: logger,
            connected: { [unowned self] bus in self.connected(bus) }, lost: { [unowned self] _ in self.lost() },
            unusable: { [unowned self] reason in self.unusable(reason) },
            ignored: { [unowned self] service in
                context.countIgnoredSystemBusSignal(claimedSender: service)
                self.published.withLock { $0.ignoredSignals += 1 }
            })
    }

    private var bus: SystemBus? { link.bus }

    func start() {
        context.onLifecycleEvent { [weak self] event in
            guard let self, !self.stopped, event == .didSuspend else { return }
            self.perform(self.decisions.nothingRuns())
        }
        link.start()
    }

    func stop() {
        guard !stopped else { return }
        stopped = true
        releaseLock()
        link.stop()
        published.withLock {
            $0.connected = false
            $0.holdsLock = false
        }
    }

    // MARK: The connection

    private func connected(_ bus: SystemBus) {
        saidUnusable = false
        published.withLock { $0.connected = true }
        bus.onManagerSignal("PrepareForSleep") { [weak self] starting in self?.prepareForSleep(starting) }
        bus.onManagerSignal("PrepareForShutdown") { [weak self] starting in self?.prepareForShutdown(starting) }
        // Everything waits for logind's owner to be known: it is the only sender heard.
        bus.onNameOwnerChange(Logind.name) { [weak self] present in
            guard let self, present else { return }
            self.readDelay()
            self.perform(self.decisions.logindAvailable())
            self.followSession()
        }
        logger.info("connected to the system bus for logind's sleep and shutdown")
    }

    /// A bus that is there cannot be used (libsystemd missing, the connection refused):
    /// said once until a connection is made.
    private func unusable(_ reason: String) {
        guard !saidUnusable else { return }
        saidUnusable = true
        logger.warning("sleep and shutdown from logind: the system bus cannot be used (\(reason)); trying again")
    }

    private func readDelay() {
        bus?.managerProperty("InhibitDelayMaxUSec") { [weak self] result in
            guard let self, case .success(let microseconds) = result else { return }
            let delay = Duration.microseconds(Int64(clamping: microseconds))
            self.decisions.delayRead(delay)
            self.published.withLock { $0.delay = delay }
        }
    }

    private func lost() {
        closeLockDescriptor()
        decisions.lockLost()
        session.forgotten()
        published.withLock {
            $0.connected = false
            $0.holdsLock = false
            $0.sessionActive = nil
            $0.sessionLocked = nil
        }
    }

    // MARK: The session

    /// Finds the configured session's object and follows its `Active` and lock state.
    private func followSession() {
        guard let id = configuration.session, let bus else { return }
        bus.sessionPath(id) { [weak self] result in
            guard let self, let bus = self.bus else { return }
            switch result {
            case .failure(let error):
                self.logger.warning("logind has no session '\(id)' to follow: \(error)")
            case .success(let path):
                bus.onSignal(from: Logind.name, path: path, interface: Logind.session, "Lock", read: { _ in () }) {
                    [weak self] in self?.sessionEvent("session locked") { $0.lockRequested() }
                }
                bus.onSignal(from: Logind.name, path: path, interface: Logind.session, "Unlock", read: { _ in () }) {
                    [weak self] in self?.sessionEvent("session unlocked") { $0.unlockRequested() }
                }
                bus.onPropertiesChanged(of: Logind.name, path: path) { [weak self] in
                    self?.readSession(path, id: id)
                }
                self.readSession(path, id: id)
            }
        }
    }

    private func readSession(_ path: String, id: String) {
        let readBool: (OpaquePointer) -> Bool? = { message in
            let value = overtime_bus_read_variant_bool(message)
            return value >= 0 ? value != 0 : nil
        }
        bus?.property(of: Logind.name, at: path, interface: Logind.session, "Active", read: readBool) {
            [weak self] result in
            guard let self else { return }
            guard case .success(let active) = result else {
                if case .failure(let error) = result {
                    self.logger.warning("logind has no session '\(id)' to follow: \(error)")
                }
                return
            }
            if self.session.active != active, self.session.active != nil {
                self.note(active ? "session active" : "session switched away")
            }
            self.sessionEvent(nil) { $0.activeRead(active) }
        }
        bus?.property(of: Logind.name, at: path, interface: Logind.session, "LockedHint", read: readBool) {
            [weak self] result in
            guard let self, case .success(let hint) = result else { return }
            self.sessionEvent(nil) { $0.lockedHintRead(hint) }
        }
    }

    private func sessionEvent(_ event: String?, _ decide: (inout SessionDecisions) -> [SessionDecisions.Action]) {
        guard !stopped else { return }
        if let event { note(event) }
        let actions = decide(&session)
        published.withLock { [session] in
            $0.sessionActive = session.active
            $0.sessionLocked = session.active == nil ? nil : session.locked
        }
        for action in actions {
            switch action {
            case .enterBackground:
                context.request(.background, from: "logind: the session was switched away or locked")
            case .returnToForeground:
                context.request(.foreground, from: "logind: the session is active and unlocked")
            }
        }
    }

    // MARK: What logind says

    private func prepareForSleep(_ starting: Bool) {
        note(starting ? "PrepareForSleep(true)" : "PrepareForSleep(false)")
        if starting {
            sleepBegan = sleepBegan ?? context.snapshot.now
            perform(decisions.sleepComing(state: context.snapshot.state))
        } else {
            sleepBegan = nil
            perform(decisions.resumed())
            // The monotonic clock stood still while the system slept: plans in wall-clock
            // time (the scheduler's) are due again, as after a step of the wall clock.
            context.announceWallClockStep(because: "the system resumed from sleep")
        }
    }

    private func prepareForShutdown(_ starting: Bool) {
        note(starting ? "PrepareForShutdown(true)" : "PrepareForShutdown(false)")
        perform(starting ? decisions.shutdownComing(state: context.snapshot.state) : decisions.shutdownCalledOff())
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
                let source =
                    decisions.announced == .shutdown
                    ? "logind: the system prepares to shut down" : "logind: the system prepares for sleep"
                context.request(.background, from: source)
                if let budget { context.request(.capBackgroundBudget(budget), from: source) }
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
        close(lock)
        lock = -1
        let waited = sleepBegan.map { context.snapshot.now - $0 }
        // Published together: whoever sees the lock gone sees how long the sleep waited.
        published.withLock {
            $0.holdsLock = false
            if let waited { $0.lastSleepWait = waited }
        }
        if let waited {
            logger.info("let go of logind's delay lock \(waited) after the sleep was announced: the system may sleep")
        } else {
            logger.info("let go of logind's delay lock")
        }
    }

    private func closeLockDescriptor() {
        if lock >= 0 { close(lock) }
        lock = -1
        published.withLock { $0.holdsLock = false }
    }
}
