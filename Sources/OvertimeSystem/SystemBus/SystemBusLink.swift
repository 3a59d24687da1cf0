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

/// Connects to the system bus and, when it is not there or goes away, waits for its socket
/// to be made again (inotify on its folder: no polling, no wake-up while it is gone). A
/// connection refused right after (the daemon not yet listening) is tried again a few
/// times, 100 ms apart. Loop thread only.
final class SystemBusLink {
    private let context: DriverContext
    private let address: String?
    private let logger: Logger
    private let connected: (SystemBus) -> Void
    private let lost: (String) -> Void
    private let unusable: (String) -> Void
    private(set) var bus: SystemBus?
    private var socketWatch: UnsafeMutablePointer<uv_fs_event_t>?
    private var retry: UnsafeMutablePointer<uv_timer_t>?
    private var retriesLeft = 0
    private var stopped = false

    /// A link to the bus at `address` (`nil`: `$DBUS_SYSTEM_BUS_ADDRESS`, else the
    /// standard socket). `connected` is called with each new connection, `lost` when one
    /// ends, `unusable` when a bus that is there cannot be used (libsystemd cannot be
    /// loaded, the connection is refused).
    init(
        context: DriverContext, address: String?, logger: Logger, connected: @escaping (SystemBus) -> Void,
        lost: @escaping (String) -> Void, unusable: @escaping (String) -> Void = { _ in }
    ) {
        self.context = context
        self.address = address
        self.logger = logger
        self.connected = connected
        self.lost = lost
        self.unusable = unusable
    }

    /// Connects, or waits for the bus.
    func start() {
        if !connect() { watchForBus() }
    }

    /// Disconnects and stops waiting; nothing is called back after it.
    func stop() {
        guard !stopped else { return }
        stopped = true
        bus?.close()
        bus = nil
        stopWatching()
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

    /// Connects; `false` when the bus is not there (its socket missing: libsystemd is not
    /// even loaded) or cannot be used.
    private func connect() -> Bool {
        guard Self.exists(address: address) else { return false }
        let made: SystemBus
        do {
            made = try SystemBus(context: context, address: address) { [weak self] reason in
                self?.connectionLost(reason)
            }
        } catch {
            logger.debug("\(error)")
            unusable("\(error)")
            return false
        }
        bus = made
        connected(made)
        return true
    }

    private func connectionLost(_ reason: String) {
        bus = nil
        logger.warning("the system bus went away (\(reason)); waiting for it to come back")
        lost(reason)
        if !stopped { watchForBus() }
    }

    private func watchForBus() {
        let socketPath = Self.socketPath(ofAddress: Self.effectiveAddress(address))
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
                Unmanaged<SystemBusLink>.fromOpaque(handle!.pointee.data).takeUnretainedValue().busFolderChanged()
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
                Unmanaged<SystemBusLink>.fromOpaque(handle!.pointee.data).takeUnretainedValue().attemptReconnect()
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
}
