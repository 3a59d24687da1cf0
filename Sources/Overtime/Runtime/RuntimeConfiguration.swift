import CLibUV
import CoreMetrics
import Logging
import Tracing

/// How a ``Runtime`` behaves. Every field has the default the design gives.
///
/// ```swift
/// var configuration = RuntimeConfiguration()
/// configuration.backgroundBudget = .seconds(25)      // container: SIGKILL after 30 s
/// configuration.terminationPolicy = .exitProcess(status: 1)
/// let runtime = try Runtime(configuration: configuration)
/// ```
public struct RuntimeConfiguration: Sendable {
    /// Time granted on each entry into the background (and on termination from the
    /// foreground or from suspension). Default 30 s.
    public var backgroundBudget: Duration = .seconds(30)
    /// How long before a deadline the expiration handlers run. Default 5 s; must be
    /// shorter than the budget.
    public var expirationLeadTime: Duration = .seconds(5)
    /// The cap on open grants; a begin beyond it is refused. It counts grants begun and not
    /// yet ended by their owners, on every thread. Default 100,000.
    public var maximumOpenBackgroundTasks: Int = 100_000
    /// What happens to a grant still open at its deadline. Default ``TerminationPolicy/endTask``.
    public var terminationPolicy: TerminationPolicy = .endTask
    /// How long one callback may hold the loop before the watchdog reports it;
    /// `nil` switches the watchdog off. Default 10 s.
    public var watchdogTimeout: Duration? = .seconds(10)
    /// What the watchdog does after reporting. Default: exit with
    /// ``WatchdogPolicy/defaultExitStatus``.
    public var watchdogPolicy: WatchdogPolicy = .exitProcess(status: WatchdogPolicy.defaultExitStatus)
    /// Where the runtime logs (refusals, misuse, termination reports, watchdog trips).
    public var logger = Logger(label: "overtime")
    /// The metrics backend; `nil` uses the one bootstrapped in `MetricsSystem`.
    public var metricsFactory: (any MetricsFactory)?
    /// Where spans of grants go (`overtime.grant`; the scheduler's runs and the uploader's
    /// segments beside them); `nil` uses the tracer bootstrapped in `InstrumentationSystem`
    /// when the runtime is created. With none (the no-op tracer) no span is made and
    /// nothing is spent on them.
    public var tracer: (any Tracer)?
    /// Which Unix signals move the lifecycle; `nil` leaves signals to the host program.
    /// Default ``SignalHandling/default``. Watched while the loop runs; from the runtime's
    /// creation until then they are blocked on the creating thread (and the threads it
    /// starts meanwhile), so one sent while the program still sets up waits for the loop
    /// instead of killing the process. ``Runtime/start()`` gives the creating thread its
    /// own mask back.
    public var signalHandling: SignalHandling? = .default
    /// Whether to speak systemd's notify protocol when `NOTIFY_SOCKET` is set (READY,
    /// STATUS, STOPPING, EXTEND_TIMEOUT_USEC, and WATCHDOG when `WATCHDOG_USEC` is set).
    /// Default `true`; nothing is sent without `NOTIFY_SOCKET`.
    public var systemdNotify = true
    /// Where to listen for `overtimectl`; `nil` (the default) opens no socket.
    ///
    /// A path (``SocketEndpoint/path(_:)``; a Unix socket, mode 0600, owner or root only;
    /// at most 103 bytes) is claimed race-free when the runtime is created — a lock file
    /// `<path>.lock` held for the runtime's life, the socket renamed into place with its
    /// final mode — and refused when taken: another runtime holds its lock, or it is
    /// anything but a stale socket (a file, a symlink, a socket that answers). Prefer a
    /// folder of the daemon's own: a path in a folder every user may write to (`/tmp`) is
    /// warned about. A passed socket (``SocketEndpoint/inherited(name:)``) is the service
    /// manager's: its `.socket` unit sets the path and mode, and creating the runtime fails
    /// when no listening Unix stream socket was passed under that name.
    public var controlSocket: SocketEndpoint?
    /// The path of ``controlSocket``, or `nil` when there is none or it is a passed socket.
    @available(*, deprecated, renamed: "controlSocket", message: "set controlSocket = .path(path)")
    public var controlSocketPath: String? {
        get { controlSocket?.path }
        set { controlSocket = newValue.map(SocketEndpoint.path) }
    }
    /// A termination request repeated within this long of the first, whatever made either
    /// (the program's own ``Runtime/requestTermination()``, a signal, the control socket;
    /// `timeout` signalling both a process and its group, an impatient double Ctrl-C), is
    /// the same request; a signal or control command after it means "stop now": every
    /// grant expires at once. Default 1 s.
    public var repeatedTerminationGrace: Duration = .seconds(1)
    /// At most one ``LifecycleEvent/didReceiveMemoryWarning`` per this long: a warning
    /// inside it is delivered once at its end, however many come. Default 10 s.
    public var memoryWarningInterval: Duration = .seconds(10)
    /// Called on the loop thread with each termination report, before the policy acts.
    public var onTermination: (@Sendable (TerminationReport) -> Void)?
    /// Called on the watchdog thread when it trips, before the policy acts.
    public var onWatchdogTrip: (@Sendable (WatchdogReport) -> Void)?

    /// The defaults.
    public init() {}

    /// Throws ``RuntimeError/invalidConfiguration(field:reason:)`` naming the first bad field.
    public func validate() throws(RuntimeError) {
        func fail(_ field: String, _ reason: String) -> RuntimeError {
            .invalidConfiguration(field: field, reason: reason)
        }
        if backgroundBudget <= .zero { throw fail("backgroundBudget", "must be positive, got \(backgroundBudget)") }
        if expirationLeadTime < .zero {
            throw fail("expirationLeadTime", "must not be negative, got \(expirationLeadTime)")
        }
        if expirationLeadTime >= backgroundBudget {
            throw fail(
                "expirationLeadTime",
                "must be shorter than backgroundBudget (\(backgroundBudget)), got \(expirationLeadTime)")
        }
        if maximumOpenBackgroundTasks < 1 {
            throw fail("maximumOpenBackgroundTasks", "must be at least 1, got \(maximumOpenBackgroundTasks)")
        }
        if let watchdogTimeout, watchdogTimeout <= .zero {
            throw fail("watchdogTimeout", "must be positive or nil, got \(watchdogTimeout)")
        }
        try signalHandling?.validate()
        if repeatedTerminationGrace < .zero {
            throw fail("repeatedTerminationGrace", "must not be negative, got \(repeatedTerminationGrace)")
        }
        if memoryWarningInterval < .zero {
            throw fail("memoryWarningInterval", "must not be negative, got \(memoryWarningInterval)")
        }
        if let path = controlSocket?.path,
            path.isEmpty || path.utf8.count > SocketPathClaim.maximumPathBytes || path.hasPrefix("@")
        {
            throw fail(
                "controlSocket",
                "must be a file path of at most \(SocketPathClaim.maximumPathBytes) bytes, got '\(path)'")
        }
        if let name = controlSocket?.inheritedName, !SocketEndpoint.isValidName(name) {
            throw fail(
                "controlSocket", "a passed socket's name is 1 to 255 printable ASCII characters but ':', got '\(name)'")
        }
    }
}
