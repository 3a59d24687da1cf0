#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// What a Unix signal does to the runtime.
public enum SignalAction: Sendable, Hashable, CustomStringConvertible {
    /// Graceful termination inside the budget; the same kind of signal again, while
    /// terminating, expires every grant now (see ``Runtime/expireBackgroundTasks()``).
    case terminate
    /// ``Runtime/requestBackground()``.
    case background
    /// ``Runtime/requestForeground()``.
    case foreground
    /// ``Runtime/requestReload()``: a ``LifecycleEvent/reload`` event.
    case reload
    /// ``Runtime/expireBackgroundTasks()``.
    case expireNow

    /// The action's name, e.g. `terminate`.
    public var description: String {
        switch self {
        case .terminate: "terminate"
        case .background: "background"
        case .foreground: "foreground"
        case .reload: "reload"
        case .expireNow: "expireNow"
        }
    }
}

extension SignalAction {
    /// What the action asks of the runtime.
    var request: RuntimeRequest {
        switch self {
        case .terminate: .terminate
        case .background: .background
        case .foreground: .foreground
        case .reload: .reload
        case .expireNow: .expireAll
        }
    }
}

/// Which signals the runtime handles (through libuv, on the loop thread) and how.
///
/// Set ``RuntimeConfiguration/signalHandling`` to `nil` when the host program owns its
/// signals (or runs under swift-service-lifecycle, which handles them itself).
public struct SignalHandling: Sendable, Hashable {
    /// Signal number → action.
    public var actions: [Int32: SignalAction]

    /// Creates a mapping.
    public init(actions: [Int32: SignalAction]) {
        self.actions = actions
    }

    /// The design's mapping: SIGTERM and SIGINT terminate (again: expire now), SIGUSR1
    /// backgrounds, SIGUSR2 foregrounds, SIGHUP reloads.
    public static let `default` = SignalHandling(actions: [
        SIGTERM: .terminate, SIGINT: .terminate, SIGUSR1: .background, SIGUSR2: .foreground, SIGHUP: .reload,
    ])

    /// Blocks these signals on the calling thread, and so on every thread it starts from
    /// then on (a new thread inherits its creator's mask).
    ///
    /// Call it first thing in `main`, before anything makes a thread (Dispatch, a logging
    /// backend, a client library), in a program that creates its ``Runtime`` later: a
    /// signal sent while the program still sets up — a service manager stopping a service
    /// it has just started — then waits, pending, until the runtime's loop watches it, and
    /// gets the program's documented stop. Without it the signal finds a thread that does
    /// not block it and ends the process by the signal's default action. The runtime
    /// unblocks them on its loop thread only; ``Runtime/start()`` gives the creating thread
    /// back the mask it had, blocked. A program that goes on without a runtime (a
    /// one-shot subcommand) calls ``unblockOnThisThread()``.
    public func blockOnThisThread() {
        var set = Self.signalSet(actions.keys)
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    /// Unblocks these signals on the calling thread (after ``blockOnThisThread()``, in a
    /// program that ends up not creating a runtime).
    public func unblockOnThisThread() {
        var set = Self.signalSet(actions.keys)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
    }

    static func signalSet(_ signals: some Sequence<Int32>) -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in signals where signal >= 1 && signal <= 64 { sigaddset(&set, signal) }
        return set
    }

    /// Linux numbers signals 1 to 64 (SIGRTMAX); SIGKILL and SIGSTOP cannot be caught.
    func validate() throws(RuntimeError) {
        for signal in actions.keys.sorted() {
            if signal < 1 || signal > 64 || signal == SIGKILL || signal == SIGSTOP {
                throw .invalidConfiguration(
                    field: "signalHandling", reason: "cannot handle \(signalName(signal)) (\(signal))")
            }
        }
    }
}

/// `SIGTERM` for the common signals, `signal 40` for others. A switch, not a table: it
/// runs on the way to exit, where building a dictionary was a visible part of the stop.
func signalName(_ signal: Int32) -> String {
    switch signal {
    case SIGTERM: "SIGTERM"
    case SIGINT: "SIGINT"
    case SIGHUP: "SIGHUP"
    case SIGUSR1: "SIGUSR1"
    case SIGUSR2: "SIGUSR2"
    case SIGQUIT: "SIGQUIT"
    case SIGKILL: "SIGKILL"
    case SIGSTOP: "SIGSTOP"
    case SIGWINCH: "SIGWINCH"
    default: "signal \(signal)"
    }
}
