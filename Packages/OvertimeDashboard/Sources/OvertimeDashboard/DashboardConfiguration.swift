// How a dashboard is set up: who may use it, whether it may act, where it is mounted.

/// A dashboard's settings. Safe by default: credentials are required, and without
/// ``actions`` it only reads.
public struct DashboardConfiguration: Sendable {
    /// Who may sign in (and is recorded with each action).
    public var credentials: DashboardCredentials
    /// What the action buttons do; `nil`: the dashboard only reads (no buttons, every
    /// action refused).
    public var actions: (any ScheduleActions)?
    /// Shows the schedule and refuses every action, even with ``actions``.
    public var readOnly = false
    /// Where the dashboard is mounted in an application's routes: `""` at the root, or a
    /// path like `/dashboard` (no trailing slash).
    public var mountPath = ""
    /// A file each action is appended to (one JSON object per line, synced): who, what,
    /// which request, the outcome; its latest 200 are read back at start. `nil`: kept in
    /// memory only (the latest 200).
    public var actionLogPath: String?
    /// How often the live feed looks for changes to the schedule.
    public var liveCheckInterval: Duration = .milliseconds(200)
    /// The host names the dashboard answers to, besides addresses and `localhost` (a
    /// request naming another host in its Host header is refused: 421). Add the name a
    /// reverse proxy passes on, such as `dashboard.example.com`; a page of another site made
    /// to point at this machine (DNS rebinding) is refused by it.
    public var allowedHosts: [String] = []
    /// The name in the pages' header and titles.
    public var siteName = "Overtime"

    /// A configuration letting in `credentials`.
    public init(credentials: DashboardCredentials) {
        self.credentials = credentials
    }
}
