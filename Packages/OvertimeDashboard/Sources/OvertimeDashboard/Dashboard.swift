// The dashboard: pages over a schedule an inspector reads, actions through the schedule's
// owner, behind credentials. A facade over its parts: access, pages, the live feed, actions.

import Hummingbird
import Logging
import Mustache
import NIOCore
import NIOPosix
import Overtime
import OvertimeScheduler

/// A browser dashboard of a schedule: what each request waits for, what runs, the history,
/// what failed for good, a fleet's instances, one request's whole story; live as the
/// schedule changes; run now and cancel, confirmed and recorded with who did it.
///
/// Mount it in a Hummingbird application, or run `overtime-dashboard`:
///
/// ```swift
/// let inspector = try ScheduleDatabase.sqlite(path: "/var/lib/app/schedule.db").inspector()
/// var configuration = DashboardConfiguration(credentials: try DashboardCredentials(contentsOf: path))
/// configuration.actions = ControlSocketActions(controlSocket: "/run/app/control.sock")
/// configuration.mountPath = "/dashboard"
/// let dashboard = try Dashboard(inspector: inspector, configuration: configuration)
/// dashboard.addRoutes(to: router.group("dashboard"))
/// ```
public struct Dashboard: Sendable {
    let inspector: any ScheduleInspector
    let configuration: DashboardConfiguration
    let templates: MustacheLibrary
    let sessions = DashboardSessions()
    let feed: ChangeFeed
    let overview: CountedOverview
    let actionLog: ActionLog
    let tickets = ActionTickets()
    let signInThrottle = SignInThrottle()
    let ownerWatch: OwnerWatch
    /// The session cookie's name, this dashboard's own: cookies are not kept apart by port,
    /// and two dashboards on one host must not sign each other's users out.
    let sessionCookie = "overtime_dashboard_" + DashboardSessions.randomToken().prefix(12)
    let logger: Logger
    /// The wall clock pages are read at (a test's may be virtual).
    let now: @Sendable () -> WallClockInstant

    /// A dashboard of the schedule `inspector` reads.
    public init(
        inspector: any ScheduleInspector, configuration: DashboardConfiguration,
        logger: Logger = Logger(label: "overtime.dashboard")
    ) throws(DashboardError) {
        try self.init(inspector: inspector, configuration: configuration, logger: logger) { SystemClock().wallClockNow }
    }

    init(
        inspector: any ScheduleInspector, configuration: DashboardConfiguration, logger: Logger,
        now: @escaping @Sendable () -> WallClockInstant
    ) throws(DashboardError) {
        let mount = configuration.mountPath
        guard mount.isEmpty || (mount.hasPrefix("/") && !mount.hasSuffix("/") && !mount.contains("//")) else {
            throw DashboardError("mountPath '\(mount)': empty, or a path like /dashboard (no trailing slash)")
        }
        guard mount.allSatisfy({ $0.isLetter || $0.isNumber || "/-._~".contains($0) }) else {
            throw DashboardError("mountPath '\(mount)': letters, digits and /-._~ only")
        }
        self.inspector = inspector
        self.configuration = configuration
        self.logger = logger
        self.now = now
        var library = MustacheLibrary()
        for (name, text) in Templates.all {
            do {
                try library.register(text, named: name)
                try library.register("{{#frame}}{{#body}}{{> \(name)}}{{/body}}{{/frame}}", named: "page-" + name)
            } catch {
                throw DashboardError("template \(name): \(error)")
            }
        }
        templates = library
        feed = ChangeFeed(inspector: inspector, interval: configuration.liveCheckInterval)
        overview = CountedOverview(inspector: inspector)
        ownerWatch = OwnerWatch(actions: configuration.actions)
        do {
            actionLog = try ActionLog(path: configuration.actionLogPath)
        } catch {
            throw DashboardError(error.message)
        }
    }

    /// Adds the dashboard's pages under `router` (a router, or a group at
    /// ``DashboardConfiguration/mountPath``).
    public func addRoutes<Context: RequestContext>(to router: some RouterMethods<Context>) {
        DashboardRoutes(dashboard: self).add(to: router)
    }

    /// A Hummingbird application serving the dashboard alone at `host`:`port` (loopback
    /// unless told otherwise); `listening` is told the port once it listens (port 0: one the
    /// system chose).
    public func application(
        host: String = "127.0.0.1", port: Int, listening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let router = Router(context: DashboardRequestContext.self)
        router.add(middleware: ErrorAnswers())
        if configuration.mountPath.isEmpty {
            addRoutes(to: router)
        } else {
            addRoutes(to: router.group(RouterPath(configuration.mountPath)))
        }
        return Application(
            router: router, configuration: .init(address: .hostname(host, port: port), serverName: nil),
            onServerRunning: { channel in await listening(channel.localAddress?.port ?? port) }, logger: logger)
    }
}

/// A request's context in the dashboard's own application: with the peer's address, which
/// a refused sign-in is logged with.
struct DashboardRequestContext: RequestContext, RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    let remoteAddress: SocketAddress?

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}

/// Why a dashboard could not be set up.
public struct DashboardError: Error, Sendable, CustomStringConvertible {
    /// What is wrong.
    public let message: String
    init(_ message: String) { self.message = message }
    /// The message.
    public var description: String { message }
}
