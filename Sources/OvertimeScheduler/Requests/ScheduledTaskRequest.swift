import Overtime

/// What to run, and when: one request per identifier.
///
/// ```swift
/// var request = ScheduledTaskRequest(identifier: "com.example.refresh")
/// request.repetition = Repetition(every: .seconds(3600), flex: .seconds(600))
/// request.randomizedDelay = .seconds(60)           // a fleet does not start at once
/// try scheduler.submit(request)
/// ```
public struct ScheduledTaskRequest: Sendable, Hashable {
    /// The identifier a handler was registered under; unique among requests.
    public var identifier: String
    /// Never run before this wall-clock time (not by a nanosecond). `nil`: from submission.
    public var earliestBegin: WallClockInstant?
    /// Run again and again, anchored to planned times; `nil`: once.
    public var repetition: Repetition?
    /// What a repeating request does about runs missed while the program was not running.
    public var catchUp = CatchUpPolicy.once
    /// The first planned time is moved later by a random amount up to this, drawn at
    /// submission; later planned times keep that offset on the grid. Devices of a fleet
    /// submitting the same request so stay spread instead of starting together. Default zero.
    public var randomizedDelay: Duration = .zero
    /// The grant each run gets. Default 10 minutes (as WorkManager's).
    public var maximumDuration: Duration = .seconds(600)
    /// What follows a failed or expired run.
    public var retry = RetryPolicy()
    /// What runs need (network, power, storage, the background): none by default.
    public var requirements: Set<Requirement> = []
    /// Wake the system from suspend for its runs, as systemd's `WakeSystem=`: while it is
    /// pending, the scheduler keeps a `CLOCK_REALTIME_ALARM` timer at the earliest next run
    /// of such requests. That needs `CAP_WAKE_ALARM` (`AmbientCapabilities=CAP_WAKE_ALARM`
    /// in a unit); without it, submitting one is refused with
    /// ``SchedulerError/Code/wakeUnavailable``. A run woken for holds the system awake only
    /// as long as something takes a sleep inhibitor. Default `false`.
    public var wakesSystem = false
    /// Where a store that several instances share keeps it: one schedule for the fleet
    /// (the default) or one per instance. The same for a store one instance owns.
    public var scope = RequestScope.shared
    /// Bytes handed to every run's handler as ``ScheduledTask/input`` (what to work on: a
    /// file name, an encoded value). At most ``ScheduleLimits/maximumDataBytes``; empty by
    /// default.
    public var input: [UInt8] {
        get { extras?.input ?? [] }
        set { setExtras { $0.input = newValue } }
    }
    /// Names for groups of requests, to find and cancel them together
    /// (`Scheduler.pendingRequests(tag:)`, `Scheduler.cancel(tag:)`), as WorkManager's
    /// tags: at most 16, each 1 to 64 bytes, without commas or control characters.
    public var tags: Set<String> {
        get { extras?.tags ?? [] }
        set { setExtras { $0.tags = newValue } }
    }

    /// The identifiers of one-shot requests that must succeed before this one becomes due,
    /// as a link of a chain (WorkManager's `beginWith(…).then(…)`, systemd's `Requires=` with
    /// `After=`); several make a fan-in. Their outputs reach the run as
    /// ``ScheduledTask/prerequisiteOutputs``. One that fails for good or is cancelled fails
    /// or cancels this request in turn, and what waits on it (``WorkInfo/stoppedBy``).
    ///
    /// At most ``ScheduleLimits/maximumPrerequisites``; each submitted before this request
    /// (or earlier in the same `submit(contentsOf:)`); this request a one-shot in the shared
    /// scope. Empty by default.
    public var prerequisites: Set<String> {
        get { extras?.prerequisites ?? [] }
        set { setExtras { $0.prerequisites = newValue } }
    }

    /// The input, the tags and the prerequisites, behind one optional reference (none
    /// while all are empty): a request is copied many times a run, and most have none.
    private var extras: Extras?

    private struct ExtraValues: Hashable {
        var input: [UInt8] = []
        var tags: Set<String> = []
        var prerequisites: Set<String> = []
    }

    private final class Extras: Sendable, Hashable {
        let values: ExtraValues
        var input: [UInt8] { values.input }
        var tags: Set<String> { values.tags }
        var prerequisites: Set<String> { values.prerequisites }
        init(_ values: ExtraValues) { self.values = values }
        static func == (lhs: Extras, rhs: Extras) -> Bool { lhs.values == rhs.values }
        func hash(into hasher: inout Hasher) { hasher.combine(values) }
    }

    private mutating func setExtras(_ change: (inout ExtraValues) -> Void) {
        var values = extras?.values ?? ExtraValues()
        change(&values)
        extras = values == ExtraValues() ? nil : Extras(values)
    }

    /// A one-shot request due at once.
    public init(identifier: String) {
        self.identifier = identifier
    }
}

/// A repeating schedule: a run is planned every `interval`, or at each time a calendar
/// expression names, at the end of a window of `flex` in which it may start (WorkManager's
/// flex interval). Planned times stay on the grid — `first + k × interval`, or the
/// calendar's times — whatever the runs take: they never drift.
///
/// ```swift
/// request.repetition = Repetition(every: .seconds(3600), flex: .seconds(600))
/// request.repetition = Repetition(on: try CalendarSchedule("*-*-* 02:30 Europe/Berlin"))
/// ```
public struct Repetition: Sendable, Hashable {
    // An interval and an optional calendar (one reference), not an enum of the two: a
    // request is copied many times a run, and a plain field copies faster than an enum
    // that holds a reference.
    private var every: Duration
    /// The calendar whose times are the planned runs, or `nil` for a repetition by interval.
    public private(set) var calendar: CalendarSchedule?

    /// The time between planned runs; zero for a calendar repetition. Setting it makes the
    /// repetition one by interval.
    public var interval: Duration {
        get { calendar == nil ? every : .zero }
        set {
            every = newValue
            calendar = nil
        }
    }

    /// How long before each planned time a run may start: at most `interval` (at most the
    /// time since the calendar's previous time).
    public var flex: Duration

    /// Every `interval`, free to start up to `flex` early.
    public init(every interval: Duration, flex: Duration = .zero) {
        self.every = interval
        self.flex = flex
    }

    /// At each time `calendar` names (`OnCalendar=`), free to start up to `flex` early.
    /// Runs missed while the program was not running follow the request's ``CatchUpPolicy``
    /// as with intervals (systemd's `Persistent=` is `.once`); its randomized delay moves
    /// every planned time by the same drawn amount (`RandomizedDelaySec=` with
    /// `FixedRandomDelay=`).
    public init(on calendar: CalendarSchedule, flex: Duration = .zero) {
        self.every = .zero
        self.calendar = calendar
        self.flex = flex
    }
}

extension Repetition: CustomStringConvertible {
    /// As `overtimectl` shows it: `every 3600 s`, `on *-*-* 02:30 Europe/Berlin`, with
    /// `, up to 600 s early` when it has a flex.
    public var description: String {
        let when = calendar.map { "on \($0)" } ?? "every \(interval.compactDescription)"
        return flex > .zero ? "\(when), up to \(flex.compactDescription) early" : when
    }
}

/// Whose schedule a request is in when several instances share a store (a fleet on
/// PostgreSQL). A struct over a private enum, so that scopes can be added without breaking
/// code that switches over them.
public struct RequestScope: Sendable, Hashable, CustomStringConvertible {
    enum Kind: Hashable {
        case shared
        case perInstance
    }

    let kind: Kind

    /// One schedule for every instance: each planned time runs once, on whichever instance
    /// claims it. The default.
    public static let shared = RequestScope(kind: .shared)
    /// A schedule of each instance's own, kept under its instance name: every instance that
    /// submits the request runs it at each planned time (local work: its own logs, its own
    /// cache). Other instances neither see nor take it.
    public static let perInstance = RequestScope(kind: .perInstance)

    /// `shared` or `perInstance`.
    public var description: String { kind == .shared ? "shared" : "perInstance" }
}

/// What a repeating request does about runs that fell due while the program was not
/// running (or the machine slept). A struct over a private enum, so that policies can be
/// added without breaking code that switches over them.
public struct CatchUpPolicy: Sendable, Hashable, CustomStringConvertible {
    enum Kind: Hashable {
        case once
        case every(maximum: Int)
        case none
    }

    let kind: Kind

    /// One run for all that were missed, then back on the grid. The default.
    public static let once = CatchUpPolicy(kind: .once)
    /// One run for each missed one, up to `maximum`, one after another.
    public static func every(maximum: Int) -> CatchUpPolicy { CatchUpPolicy(kind: .every(maximum: max(1, maximum))) }
    /// No run for missed times: the next run is the next planned time from now.
    public static let none = CatchUpPolicy(kind: .none)

    /// `once`, `every(maximum: N)` or `none`.
    public var description: String {
        switch kind {
        case .once: "once"
        case .every(let maximum): "every(maximum: \(maximum))"
        case .none: "none"
        }
    }
}

/// What follows a failed or expired run: a retry after a backoff, up to a number of
/// attempts, then failed for good (kept, visible, not deleted). WorkManager's defaults.
public struct RetryPolicy: Sendable, Hashable {
    /// How the delay grows from one attempt to the next.
    public struct Backoff: Sendable, Hashable, CustomStringConvertible {
        enum Kind: Hashable { case linear, exponential }
        let kind: Kind

        /// `initialDelay × attempt`.
        public static let linear = Backoff(kind: .linear)
        /// `initialDelay × 2^(attempt − 1)`. The default.
        public static let exponential = Backoff(kind: .exponential)

        /// `linear` or `exponential`.
        public var description: String { kind == .linear ? "linear" : "exponential" }
    }

    /// Default ``Backoff/exponential``.
    public var backoff = Backoff.exponential
    /// The delay after the first failure. Default 30 s; never below 10 s.
    public var initialDelay: Duration = .seconds(30)
    /// The longest delay. Default 5 hours.
    public var maximumDelay: Duration = .seconds(5 * 3600)
    /// Attempts in all (the first run included) before the run is failed for good.
    /// Default 10.
    public var maximumAttempts = 10

    /// The shortest initial delay accepted.
    public static let minimumDelay: Duration = .seconds(10)

    /// WorkManager's defaults.
    public init() {}

    /// The delay before attempt `attempt + 1`, after `attempt` attempts failed (1 or more).
    public func delay(afterFailedAttempts attempt: Int) -> Duration {
        let initial = max(initialDelay, Self.minimumDelay)
        let attempts = max(1, attempt)
        let delay: Duration
        switch backoff.kind {
        case .linear: delay = initial * attempts
        case .exponential: delay = initial * (1 << min(attempts - 1, 40))
        }
        return min(delay, max(maximumDelay, initial))
    }
}
