// A system bus connection kept up: made when the bus is there, waited for when it is not.

import CLibUV
import Logging
import Overtime
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Connects to the system bus and keeps connecting while it is gone, at no cost at rest.
///
/// Connected, it asks for nothing: no timer, no watch. Disconnected, it waits two ways:
/// - for the socket's folder to change (inotify), watching the nearest folder that exists
///   (`/run` while `/run/dbus` is missing), so a bus that appears after start is used;
/// - while the socket file is there but refuses (a bus restarting behind a socket that
///   stays, as with systemd's `dbus.socket` or dbus-broker; a stale file), by trying again
///   after 100 ms, doubling to at most ``longestRetry``.
///
/// A connection lost is tried again after 100 ms: a socket-activated bus accepts at once
/// and answers once it has started. Loop thread only.
final class SystemBusLink {
    /// The longest wait between two attempts while the socket is there but refuses.
    static let longestRetry: Duration = .seconds(5)

    private let context: DriverContext
    private let address: String?
    private let logger: Logger
    private let connected: (SystemBus) -> Void
    private let lost: (String) -> Void
    private let unusable: (String) -> Void
    private let ignored: (String) -> Void
    private(set) var bus: SystemBus?
    private var folderWatch: UnsafeMutablePointer<uv_fs_event_t>?
    private var watchedFolder: String?
    private var retry: UnsafeMutablePointer<uv_timer_t>?
    private var retryDelay: Duration?
    private var stopped = false
    /// A connection was lost and not made again yet: what `lost` said stands, attempts
    /// refused meanwhile are not news.
    private var reconnecting = false
    /// Signals ignored on every connection so far (see ``SystemBus/onSignal(from:path:interface:_:read:_:)``).
    private(set) var ignoredSignals = 0
    private var ignoredLogged: MonotonicInstant?
    private var ignoredUnlogged = 0

    /// A link to the bus at `address` (`nil`: `$DBUS_SYSTEM_BUS_ADDRESS`, else the
    /// standard socket). `connected` is called with each new connection, `lost` when one
    /// ends, `unusable` when a bus that is there cannot be used (libsystemd cannot be
    /// loaded, the connection is refused), `ignored` with the bus name a signal not acted
    /// on claimed to come from.
    init(
        context: DriverContext, address: String?, logger: Logger, connected: @escaping (SystemBus) -> Void,
        lost: @escaping (String) -> Void, unusable: @escaping (String) -> Void = { _ in },
        ignored: @escaping (String) -> Void = { _ in }
    ) {
        self.context = context
        self.address = address
        self.logger = logger
        self.connected = connected
        self.lost = lost
        self.unusable = unusable
        self.ignored = ignored
    }

    /// Connects, or waits for the bus.
    func start() {
        attempt()
    }

    /// Disconnects and stops waiting; nothing is called back after it.
    func stop() {
        guard !stopped else { return }
        stopped = true
        bus?.close()
        bus = nil
        stopWaiting()
        for handle in [folderWatch.map(UnsafeMutableRawPointer.init), retry.map(UnsafeMutableRawPointer.init)] {
            if let handle { uv_close(handle.assumingMemoryBound(to: uv_handle_t.self), nil) }
        }
        folderWatch = nil
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

    /// The address in effect: the one given, else `$DBUS_SYSTEM_BUS_ADDRESS`.
    static func effectiveAddress(_ address: String?) -> String? {
        address ?? getenv("DBUS_SYSTEM_BUS_ADDRESS").map { String(cString: $0) }
    }

    /// Whether the bus's socket exists (`true` for an address that is not a socket path).
    static func exists(address: String?) -> Bool {
        socketPath(ofAddress: effectiveAddress(address)).map { access($0, F_OK) == 0 } ?? true
    }

    /// The nearest folder of `socket` that exists: its own, else the closest ancestor.
    static func nearestExistingFolder(of socket: String) -> String {
        var folder = socket.split(separator: "/", omittingEmptySubsequences: false).dropLast()
        while !folder.isEmpty {
            let path = folder.joined(separator: "/")
            if !path.isEmpty, access(path, F_OK) == 0 { return path }
            folder = folder.dropLast()
        }
        return "/"
    }

    // MARK: Connecting and waiting

    /// Connects, or waits for the next chance.
    private func attempt() {
        guard bus == nil, !stopped else { return }
        if connect() {
            stopWaiting()
            return
        }
        watchFolder()
        if Self.exists(address: address) {
            retryLater()
        } else {
            retryDelay = nil  // gone: the folder says when it is back
            if let retry { uv_timer_stop(retry) }
        }
    }

    /// Connects; `false` when the bus is not there (its socket missing: libsystemd is not
    /// even loaded) or cannot be used.
    private func connect() -> Bool {
        guard Self.exists(address: address) else { return false }
        let made: SystemBus
        do {
            made = try SystemBus(
                context: context, address: address,
                onLost: { [weak self] reason in self?.connectionLost(reason) },
                onIgnored: { [weak self] claimed, what, sender in
                    self?.noteIgnored(claimed: claimed, what: what, sender: sender)
                })
        } catch {
            logger.debug("\(error)")
            if !reconnecting { unusable("\(error)") }
            return false
        }
        // Lost while it was being made (a peer that accepts and hangs up): not connected.
        guard !made.isClosed else { return false }
        reconnecting = false
        bus = made
        connected(made)
        return true
    }

    private func connectionLost(_ reason: String) {
        bus = nil
        logger.warning("the system bus went away (\(reason)); waiting for it to come back")
        lost(reason)
        reconnecting = true
        // Tried again on the timer, never from inside the loss: a bus that accepts and hangs
        // up at once is then tried with the backoff, not in a loop.
        retryDelay = nil
        watchFolder()
        retryLater()
    }

    /// Tries again after the next delay of the backoff.
    private func retryLater() {
        let delay = retryDelay.map { min($0 * 2, Self.longestRetry) } ?? .milliseconds(100)
        retryDelay = delay
        if retry == nil {
            let timer = context.makeHandle(uv_timer_t.self)
            uv_timer_init(context.loop, timer)
            timer.pointee.data = Unmanaged.passUnretained(self).toOpaque()
            retry = timer
        }
        uv_timer_start(
            retry,
            { handle in
                Unmanaged<SystemBusLink>.fromOpaque(handle!.pointee.data).takeUnretainedValue().attempt()
            }, UInt64(delay.components.seconds * 1000 + delay.components.attoseconds / 1_000_000_000_000_000), 0)
    }

    /// Watches the socket's folder, or the nearest one that exists: moved deeper as the
    /// folders appear (each change is an attempt, which calls this again). A folder made
    /// between the look and the watch is seen by the look after it.
    private func watchFolder() {
        guard let socket = Self.socketPath(ofAddress: Self.effectiveAddress(address)) else { return }
        while true {
            let folder = Self.nearestExistingFolder(of: socket)
            if folder == watchedFolder { return }
            if folderWatch == nil {
                let watch = context.makeHandle(uv_fs_event_t.self)
                uv_fs_event_init(context.loop, watch)
                watch.pointee.data = Unmanaged.passUnretained(self).toOpaque()
                folderWatch = watch
            }
            guard let folderWatch else { return }
            uv_fs_event_stop(folderWatch)
            watchedFolder = nil
            let started = uv_fs_event_start(
                folderWatch,
                { handle, _, _, _ in
                    let link = Unmanaged<SystemBusLink>.fromOpaque(handle!.pointee.data).takeUnretainedValue()
                    link.retryDelay = nil  // something changed: start the backoff afresh
                    link.attempt()
                }, folder, 0)
            guard started == 0 else {
                logger.warning(
                    "cannot watch \(folder) for the system bus to appear: \(String(cString: uv_strerror(started)))")
                return
            }
            watchedFolder = folder
        }
    }

    private func stopWaiting() {
        if let folderWatch { uv_fs_event_stop(folderWatch) }
        watchedFolder = nil
        if let retry { uv_timer_stop(retry) }
        retryDelay = nil
    }

    // MARK: Signals not acted on

    /// Counts a signal not acted on; logs at debug level, at most one line a minute (with
    /// how many were not logged), so a flood of forgeries is never a flood of log lines.
    private func noteIgnored(claimed: String, what: String, sender: String?) {
        ignoredSignals += 1
        ignored(claimed)
        let now = context.snapshot.now
        if let last = ignoredLogged, now - last < .seconds(60) {
            ignoredUnlogged += 1
            return
        }
        ignoredLogged = now
        let more = ignoredUnlogged > 0 ? " (and \(ignoredUnlogged) more since the last such line)" : ""
        ignoredUnlogged = 0
        logger.debug(
            "ignored \(what) claiming to come from \(claimed): sent by \(sender ?? "no sender"), not its owner\(more)")
    }
}
