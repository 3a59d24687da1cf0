import CLibUV
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// systemd's notify protocol, spoken directly over `NOTIFY_SOCKET` (no libsystemd).
///
/// - `READY=1` once the loop runs; `STATUS=` on every lifecycle event;
/// - `STOPPING=1` on `willTerminate`, then `EXTEND_TIMEOUT_USEC=` once a second while
///   grants remain open, never past the budget deadline (plus one second for reports),
///   so `TimeoutStopSec` shorter than the budget does not cut the work off;
/// - `WATCHDOG=1` every `WATCHDOG_USEC / 2` from a timer on the loop: a loop held by a
///   callback sends nothing, so systemd's watchdog sees exactly what ours sees.
///
/// The timer runs only when there is something to send: an idle program with no
/// systemd watchdog is never woken by it.
final class SystemdNotifier {
    private unowned let core: RuntimeCore
    private let address: UnixSocketAddress
    private let socket: Int32
    private let watchdogInterval: Duration?
    private var timer: UnsafeMutablePointer<uv_timer_t>?
    private var stopping = false

    /// `nil` unless `NOTIFY_SOCKET` names a usable socket.
    init?(core: RuntimeCore, environment: (String) -> String?) {
        guard let path = environment("NOTIFY_SOCKET") else { return nil }
        guard let address = UnixSocketAddress(path) else {
            core.logger.error("NOTIFY_SOCKET is not a usable Unix socket address", metadata: ["value": "\(path)"])
            return nil
        }
        let socket = makeUnixSocket(datagram: true, nonBlocking: true)
        guard socket >= 0 else {
            core.logger.error("cannot create the systemd notify socket: \(errnoDescription())")
            return nil
        }
        self.core = core
        self.address = address
        self.socket = socket
        // WATCHDOG_PID, when set, names the process the watchdog is meant for.
        let forUs = environment("WATCHDOG_PID").map { Int32($0) == getpid() } ?? true
        if forUs, let text = environment("WATCHDOG_USEC"), let microseconds = Int64(text), microseconds > 0 {
            watchdogInterval = .microseconds(microseconds / 2)
        } else {
            watchdogInterval = nil
        }
    }

    deinit {
        close(socket)
    }

    /// Runs on the thread about to run the loop.
    func start() {
        let handle = core.loop.makeHandle(uv_timer_t.self)
        uv_timer_init(core.loop.raw, handle)
        handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        timer = handle
        send("READY=1\nSTATUS=\(status())")
        if watchdogInterval != nil { send("WATCHDOG=1") }
        rearm()
    }

    /// Called for every lifecycle event, before observers see it.
    func observe(_ event: LifecycleEvent) {
        if event == .willTerminate {
            stopping = true
            send("STOPPING=1\nSTATUS=\(status())")
            rearm(soon: true)  // after willTerminate observers had their chance to begin grants
        } else {
            send("STATUS=\(status())")
        }
    }

    private func tick() {
        core.turn {
            if watchdogInterval != nil { send("WATCHDOG=1") }
            if stopping, core.grants.openCount > 0, let deadline = core.deadlines.budget?.deadline {
                let remaining = max(deadline - core.now, .zero) + .seconds(1)
                send("EXTEND_TIMEOUT_USEC=\(remaining.clampedNanoseconds / 1000)\nSTATUS=\(status())")
            }
            rearm()
        }
    }

    /// Next tick: the watchdog's half-interval, or a second while stopping, whichever is sooner.
    private func rearm(soon: Bool = false) {
        guard let timer else { return }
        var next = watchdogInterval
        if stopping { next = min(next ?? .seconds(1), .seconds(1)) }
        if soon { next = .zero }
        guard let next else {
            uv_timer_stop(timer)
            return
        }
        uv_update_time(core.loop.raw)
        uv_timer_start(
            timer,
            { handle in Unmanaged<SystemdNotifier>.fromOpaque(handle!.pointee.data).takeUnretainedValue().tick() },
            max(next.clampedNanoseconds / 1_000_000, soon ? 0 : 1), 0)
    }

    private func status() -> String {
        let open = core.grants.openCount
        var text = "\(core.lifecycle.state), \(open) background task\(open == 1 ? "" : "s") open"
        if let deadline = core.deadlines.budget?.deadline {
            let left = max(deadline - core.now, .zero)
            text += ", \(Double(left.clampedNanoseconds / 100_000_000) / 10) s left"
        }
        return text
    }

    private func send(_ message: String) {
        let sent = address.withSockAddr { pointer, length in
            message.utf8CString.withUnsafeBytes { bytes in
                sendto(socket, bytes.baseAddress, bytes.count - 1, Int32(MSG_NOSIGNAL), pointer, length)
            }
        }
        if sent < 0 {
            core.logger.warning("systemd notify failed: \(errnoDescription())", metadata: ["message": "\(message)"])
        }
    }
}
