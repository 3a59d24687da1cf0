// The schedule in a PostgreSQL database that a fleet shares: claims with a time limit,
// due times on the database's clock, and notifications instead of polling.

import Logging
import Metrics
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import Overtime
@_spi(ScheduleStore) import OvertimeScheduler
import PostgresNIO

/// Requests, plans and history in the `overtime` schema of a PostgreSQL database, shared
/// by every instance that opens it.
///
/// - **Claims.** ``due(at:unmet:limit:)`` claims the due requests it returns in one
///   transaction (`FOR UPDATE SKIP LOCKED`: two instances never get the same one); a claim
///   not started by the next commit is released. A started run's claim lasts
///   ``PostgresScheduleConfiguration/claimDuration`` and is renewed every third of it while
///   the run lives; when it cannot be, the run is told to stop before the claim ends.
///   A claim that ended (its instance died) is taken by the next instance that looks: the
///   attempt is recorded as interrupted and retried (same run ID, next attempt).
/// - **One clock.** Due times are compared on the database's clock; the scheduler's own
///   times are the runtime's clock corrected by the offset measured at connection.
/// - **No polling.** Submits, ends that leave something to run, an instance's last run
///   ending and released claims `NOTIFY overtime_schedule`; every other instance decides
///   again when told, and otherwise wakes only when something is due or a claim held
///   elsewhere may end (``nextDue(after:unmet:)``).
///
/// Each call is one operation, async on postgres-nio from connecting to the last answer and
/// run on the store's event loop, within one deadline
/// (``PostgresScheduleConfiguration/operationTimeout``); the scheduler's queue (never the
/// runtime's loop) waits for it, the store's requirements being synchronous. Renewals and
/// notifications use a second connection on the same loop.
final class PostgresScheduleStore: ScheduleStore {
    /// The schema this build writes and reads.
    static let schemaVersion: Int64 = 22
    /// The channel instances notify each other on.
    static let channel = "overtime_schedule"

    let configuration: PostgresScheduleConfiguration
    let recovery = StoreRecovery()
    /// This instance in the database, as claims name it: its name, host and PID, and a
    /// token unique to this opening (a restarted process with the same PID is another
    /// instance).
    let instance: String
    /// The owner of this instance's per-instance requests: its configured name, which
    /// stays across restarts.
    let owner: String
    /// The rows this instance sees, as SQL: the shared requests (owner '') and its own.
    let visible: String
    /// The same of the rows aliased `r`.
    let visibleR: String
    /// The same as a list (`owner IN ('', name)`), which the planner estimates from the owner
    /// column's statistics, for the statements that walk the due index in order. Priced at
    /// its default 0.5 % (``visible``), the claim looked to the planner as if it matched
    /// almost nothing: it read every index entry due so far — 40,752 of them, most of them
    /// dead after a burst — into a bitmap and sorted, 8–10 ms per claim.
    let visibleInDueOrder: String
    let logger: Logger
    /// The runtime's wall clock, which the scheduler's times are on.
    let wallClock: @Sendable () -> WallClockInstant
    let group: MultiThreadedEventLoopGroup
    /// The connection the scheduler's calls use, one operation at a time (``turns``); `nil`
    /// after a failure (the next operation connects again). Read and set under its lock,
    /// never held across I/O.
    let connection = NIOLockedValueBox<PostgresConnection?>(nil)
    /// The operations on ``connection``: one at a time, each within its deadline.
    let operations: ConnectionOperations
    /// The database's clock minus the runtime's, in nanoseconds, measured at connection.
    let clockOffset = NIOLockedValueBox<Int64>(0)
    /// The local wall clock was set since the offset was measured.
    let remeasureClock = NIOLockedValueBox(false)
    /// The schema is made and at this build's version (checked on the first connection).
    let schemaReady = NIOLockedValueBox(false)
    /// The last attempt to connect found no server to answer (down, or not yet up).
    let unreachable = NIOLockedValueBox(false)
    /// Whether an operation may connect now, or fails at once after an attempt the server
    /// never answered.
    let connectAttempts: ConnectAttempts
    /// When the earliest claim held by another instance ends (the database's clock,
    /// nanoseconds; `Int64.max`: none), as ``nextDue(after:unmet:)`` last saw it; `nil` when not
    /// known. Lapsed claims are looked for only from then.
    let foreignClaimEnd = NIOLockedValueBox<Int64?>(nil)
    /// What the last claim (``due(at:unmet:limit:)``) returned, when it took fewer requests
    /// than its limit: a due request it left unclaimed then was passed over (its row locked
    /// for a moment by another transaction, or due only since, on the database's clock), not
    /// left for want of room; one it returned and the scheduler did not start (no handler
    /// here) was not. `nil` when it took as many as its limit. Read and cleared by
    /// ``nextDue(after:unmet:)``.
    let lastClaimWithRoom = NIOLockedValueBox<[String]?>(nil)
    /// How soon to look again for a due request the last claim passed over (nanoseconds).
    static let passedOverRecheck: Int64 = 50_000_000
    let background: NIOLockedValueBox<Background>
    /// Requests this instance's commits finished (ended, failed, cancelled) that others
    /// wait on, as the rows said when they were written: ``dependents(of:)`` asks the
    /// database only about these, so an end that nothing waits on costs no round trip.
    let concludedWithDependents = NIOLockedValueBox<Set<String>>([])
    /// Whether to ask for the next start of requests that wake the system: until the first
    /// answer, and after this instance submitted one. (One another instance submits later
    /// is armed by that instance, and by those that start after.)
    let asksForWaking = NIOLockedValueBox(true)
    var loop: any EventLoop { group.next() }
    /// `overtime_fleet_held_runs{fleet_instance}`: the runs this instance holds claims on.
    let heldRuns: Gauge
    /// `overtime_fleet_reclaimed_runs_total{fleet_instance}`: runs this instance took over from
    /// instances that stopped renewing their claims.
    let reclaimedRuns: Counter
    /// `overtime_fleet_lost_claims_total{fleet_instance}`: runs stopped here because their claims
    /// could not be renewed or were taken.
    let lostClaims: Counter
    /// `overtime_fleet_database_round_trip_seconds`: each statement, sent and answered.
    let roundTrips: Timer
    /// `overtime_fleet_listen_connected`: 1 while notifications from other instances arrive.
    let listenConnected: Gauge

    /// What the event loop owns: the runs this instance holds, and the connection that
    /// renews their claims and listens.
    struct Background: Sendable {
        var events: ScheduleStoreEvents?
        var connection: PostgresConnection?
        var connecting = false
        /// Runs started here and not yet ended: identifier → when its claim was last
        /// renewed (`CLOCK_BOOTTIME`, nanoseconds: ``bootNanoseconds()``).
        var held: [String: Int64] = [:]
        /// Runs held here whose claims a renewal found taken (another instance took them over).
        var lost: Set<String> = []
        var renewal: RepeatedTask?
        /// From a renewal sent until one succeeds (while it waits for its answer, after it
        /// failed or found no connection): the timer that stops the runs whose claims stop
        /// being safe meanwhile (``stopRunsAtTheirSafeTimes(checkedUntil:)``).
        var safeTimes: Scheduled<Void>?
        /// The last renewal succeeded: `held` has the times the database renewed.
        var renewed = true
        /// The next attempt to connect the listening connection again, while one waits.
        var reconnect: Scheduled<Void>?
        /// The connection building indexes beside the fleet's writes, while one does
        /// (``buildConcurrently(_:)``); `true` in `indexBuild` from its start to its end; the
        /// next try while another instance builds them.
        var indexConnection: PostgresConnection?
        var indexBuild = false
        var indexRetry: Scheduled<Void>?
        var closed = false
    }

    init(
        configuration: PostgresScheduleConfiguration, wallClock: @escaping @Sendable () -> WallClockInstant,
        logger: Logger
    ) throws(ScheduleStoreError) {
        guard (configuration.claimMargin < configuration.claimDuration) && (configuration.claimMargin > .zero) else {
            throw ScheduleStoreError("the claim margin must be positive and shorter than the claim duration")
        }
        self.configuration = configuration
        self.wallClock = wallClock
        self.logger = logger
        instance = "\(configuration.holderName) \(UInt32.random(in: 0...UInt32.max))"
        owner = configuration.instanceName
        (visible, visibleR) = (Self.visibility(of: "owner", owner), Self.visibility(of: "r.owner", owner))
        visibleInDueOrder = "owner IN ('', \(Self.literal(owner)))"
        // Not `instance`: Prometheus gives every scraped series an `instance` label of its own.
        let dimensions = [("fleet_instance", configuration.instanceName)]
        heldRuns = Gauge(label: "overtime_fleet_held_runs", dimensions: dimensions)
        reclaimedRuns = Counter(label: "overtime_fleet_reclaimed_runs_total", dimensions: dimensions)
        lostClaims = Counter(label: "overtime_fleet_lost_claims_total", dimensions: dimensions)
        roundTrips = Timer(label: "overtime_fleet_database_round_trip_seconds", dimensions: dimensions)
        listenConnected = Gauge(label: "overtime_fleet_listen_connected", dimensions: dimensions)
        listenConnected.record(0)
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        operations = ConnectionOperations(on: group.next(), timeout: configuration.operationTimeout)
        connectAttempts = ConnectAttempts(
            interval: configuration.reconnectInterval, timeout: configuration.operationTimeout)
        background = NIOLockedValueBox(Background())
    }

    /// A store of the database `configuration` names, connected (the schema made or
    /// migrated) unless the server cannot be reached yet: a program embedding a fleet's
    /// scheduler starts while its database is down, and connects when it comes back (until
    /// then every call fails with the reason, and the scheduler says it waits for its
    /// store). A server that refuses (a password, TLS, a newer schema) is an error here.
    static func open(
        configuration: PostgresScheduleConfiguration, wallClock: @escaping @Sendable () -> WallClockInstant,
        logger: Logger
    ) async throws(ScheduleStoreError) -> PostgresScheduleStore {
        let store = try PostgresScheduleStore(configuration: configuration, wallClock: wallClock, logger: logger)
        do {
            try await store.using { _ in () }
        } catch {
            guard store.unreachable.withLockedValue({ $0 }) else {
                store.close()
                throw error
            }
            logger.warning("the schedule database cannot be reached yet; connecting when it can be: \(error)")
        }
        return store
    }

    /// `column` is empty or `owner`, written `coalesce(nullif(column, ''), owner) = owner`,
    /// which no index answers: the planner took `column = '' OR column = owner` for an
    /// index condition on the primary key's second column and read every row of it (10,000
    /// entries for each claim). The name is a literal, quotes doubled.
    static func visibility(of column: String, _ owner: String) -> String {
        let literal = literal(owner)
        return "coalesce(nullif(\(column), ''), \(literal)) = \(literal)"
    }

    /// `text` as an SQL string literal, quotes doubled.
    static func literal(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
    }

    /// The database's clock, in nanoseconds since 1970, when the transaction began (a
    /// statement outside one is its own). `now()`, not `clock_timestamp()`: a stable value
    /// lets `due_at <= …` walk the due index; a volatile one made the planner read every row
    /// (8 ms per claim at 5,500 rows).
    static let databaseNow = "(extract(epoch FROM now()) * 1000000000)::bigint"

    deinit { close() }

    func close() {
        let (renewal, listener, wasClosed) = background.withLockedValue { background in
            defer { background.closed = true }
            return (background.renewal, background.connection, background.closed)
        }
        guard !wasClosed else { return }
        let timers = background.withLockedValue { [$0.safeTimes, $0.reconnect, $0.indexRetry] }
        for timer in timers { timer?.cancel() }
        background.withLockedValue { background in
            background.renewal = nil
            background.connection = nil
        }
        renewal?.cancel()
        let main = connection.withLockedValue { connection in
            defer { connection = nil }
            return connection
        }
        // An index build stops (it is built again at the next open).
        let building = background.withLockedValue { background in
            defer { background.indexConnection = nil }
            return background.indexConnection
        }
        // Closed before the loop stops, and kept until closed (postgres-nio asserts both):
        // the closes are queued on the loop ahead of its shutdown, which runs them before it
        // ends. Not waited for: nothing of the store's runs on the loop after them.
        for connection in [listener, main, building] {
            connection?.close().whenComplete { _ in withExtendedLifetime(connection) {} }
        }
        group.shutdownGracefully { _ in }
    }

    func localNanoseconds() -> Int64 { wallClock().nanosecondsSinceEpoch }

    /// What the server said, or the error.
    /// Whether a failure to connect means no server is there to answer yet (refused, no
    /// route, no answer, starting up or shutting down), not that one refused us (a
    /// password, TLS, a role): a program may start before its database and wait for it.
    static func isUnreachable(_ error: any Error) -> Bool {
        if isTLSFailure(error) { return false }
        guard let error = error as? PSQLError else { return true }
        if let state = error.serverInfo?[.sqlState] {
            return state.hasPrefix("57") || state.hasPrefix("08")  // operator intervention, connection
        }
        if let underlying = error.underlying, isTLSFailure(underlying) { return false }
        return [.connectionError, .serverClosedConnection, .uncleanShutdown].contains(error.code)
    }

    /// A handshake that failed: the server answered, and the certificates or modes disagree.
    static func isTLSFailure(_ error: any Error) -> Bool {
        error is NIOSSLError || error is BoringSSLError || error is NIOSSLExtraError
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if let message = error.serverInfo?[.message] { return message }
            if error.code == .sslUnsupported { return "the server does not offer TLS, which sslmode requires" }
            if error.code == .authMechanismRequiresPassword {
                return "the server asks for a password and none was found (not in the URL, PGPASSWORD or the"
                    + " password file, PGPASSFILE or ~/.pgpass)"
            }
            // A refused certificate or handshake is the underlying error.
            if let underlying = error.underlying { return "\(error.code): \(underlying)" }
            return "\(error.code)"
        }
        return "\(error)"
    }
}

extension Duration {
    /// Whole nanoseconds, clamped to `Int64`.
    var nanosecondsClamped: Int64 {
        let (seconds, attoseconds) = components
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? (seconds < 0 ? .min : .max) : product &+ attoseconds / 1_000_000_000
    }
}
