import CLibUV
import Logging
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// systemd's notify protocol, spoken directly over `NOTIFY_SOCKET` (no libsystemd).
///
/// - `READY=1` once the loop runs; `STATUS=` on every lifecycle event;
/// - `STOPPING=1` on `willTerminate`, then `EXTEND_TIMEOUT_USEC=` at most once a second
///   while grants remain open: the time left to the budget's deadline plus
///   ``exitAllowance`` — what the final drain can use and the moment to exit after it,
///   no more — so `TimeoutStopSec` shorter than the budget does not cut the work off, and
///   a program that overruns is still killed soon after its budget;
/// - `WATCHDOG=1` every `WATCHDOG_USEC / 2` from a timer on the loop: a loop held by a
///   callback sends nothing, so systemd's watchdog sees exactly what ours sees.
///
/// The timer runs only when there is something to send: an idle program with no
/// systemd watchdog is never woken by it.
final class SystemdNotifier {
    private let context: DriverContext
    private let address: UnixSocketAddress
    private let socket: Int32
    private let watchdogInterval: Duration?
    private var timer: UnsafeMutablePointer<uv_timer_t>?
    private var stopping = false
    private var lastExtension: MonotonicInstant?

    /// Added to the time left in the budget in `EXTEND_TIMEOUT_USEC`: termination reports
    /// are written and the process exits after the deadline, and that takes a moment.
    static let exitAllowance: Duration = .milliseconds(500)

    /// `nil` unless `NOTIFY_SOCKET` names a usable socket.
    init?(context: DriverContext, environment: (String) -> String?) {
        guard let path = environment("NOTIFY_SOCKET") else { return nil }
        guard let address = UnixSocketAddress(path) else {
            context.logger.error("NOTIFY_SOCKET is not a usable Unix socket address", metadata: ["value": "\(path)"])
            return nil
        }
        let socket = makeUnixSocket(datagram: true, nonBlocking: true)
        guard socket >= 0 else {
            context.logger.error("cannot create the systemd notify socket: \(errnoDescription())")
            return nil
        }
        self.context = context
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
        let handle = context.makeHandle(uv_timer_t.self)
        uv_timer_init(context.loop, handle)
        handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        timer = handle
        send("READY=1\nSTATUS=\(status())")
        if watchdogInterval != nil { send("WATCHDOG=1") }
        rearm()
        context.onLifecycleEvent { [self] event in observe(event) }  // keeps it until shutdown
        context.onStatusChange { [self] in send("STATUS=\(status())") }
    }

    /// Called for every lifecycle event, before observers see it.
    private func observe(_ event: LifecycleEvent) {
        if event == .willTerminate {
            stopping = true
            send("STOPPING=1\nSTATUS=\(status())")
            rearm(soon: true)  // after willTerminate observers had their chance to begin grants
        } else {
            send("STATUS=\(status())")
        }
    }

    private func tick() {
        context.turn {
            if watchdogInterval != nil { send("WATCHDOG=1") }
            let snapshot = context.snapshot
            let now = snapshot.now
            let due = lastExtension.map { now - $0 >= .seconds(1) } ?? true
            if stopping, due, snapshot.openBackgroundTasks > 0, let deadline = snapshot.budgetDeadline {
                lastExtension = now
                let extended = max(deadline - now, .zero) + Self.exitAllowance
                send("EXTEND_TIMEOUT_USEC=\(extended.clampedNanoseconds / 1000)\nSTATUS=\(status())")
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
        uv_update_time(context.loop)
        uv_timer_start(
            timer,
            { handle in Unmanaged<SystemdNotifier>.fromOpaque(handle!.pointee.data).takeUnretainedValue().tick() },
            max(next.clampedNanoseconds / 1_000_000, soon ? 0 : 1), 0)
    }

    private func status() -> String {
        let snapshot = context.snapshot
        let open = snapshot.openBackgroundTasks
        // Termination passes through the background: say where it is going from the start.
        var text =
            (snapshot.isTerminating ? "terminating (\(snapshot.state))" : "\(snapshot.state)")
            + ", \(open) background task\(open == 1 ? "" : "s") open"
        if let deadline = snapshot.budgetDeadline {
            let left = max(deadline - snapshot.now, .zero)
            text += ", \(Double(left.clampedNanoseconds / 100_000_000) / 10) s left"
        }
        for part in context.statusParts { text += "; " + part }
        return text
    }

    private func send(_ message: String) {
        let sent = address.withSockAddr { pointer, length in
            message.utf8CString.withUnsafeBytes { bytes in
                sendto(socket, bytes.baseAddress, bytes.count - 1, Int32(MSG_NOSIGNAL), pointer, length)
            }
        }
        if sent < 0 {
            context.logger.warning("systemd notify failed: \(errnoDescription())", metadata: ["message": "\(message)"])
        }
    }
}
