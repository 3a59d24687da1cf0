// The schedule in a PostgreSQL database that a fleet shares: claims with a time limit,
// due times on the database's clock, and notifications instead of polling.

import Dispatch
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
/// Calls block the scheduler's queue (never the loop) on a connection of their own;
/// renewals and notifications use a second one on the store's event loop.
final class PostgresScheduleStore: ScheduleStore {
    /// The schema this build writes and reads.
    static let schemaVersion: Int64 = 8
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
    private let owner: String
    /// The rows this instance sees, as SQL: the shared requests (owner '') and its own.
    private let visible: String
    /// The same of the rows aliased `r`.
    private let visibleR: String
    /// The same as a list (`owner IN ('', name)`), which the planner estimates from the owner
    /// column's statistics, for the statements that walk the due index in order. Priced at
    /// its default 0.5 % (``visible``), the claim looked to the planner as if it matched
    /// almost nothing: it read every index entry due so far — 40,752 of them, most of them
    /// dead after a burst — into a bitmap and sorted, 8–10 ms per claim.
    private let visibleInDueOrder: String
    private let logger: Logger
    /// The runtime's wall clock, which the scheduler's times are on.
    private let wallClock: @Sendable () -> WallClockInstant
    private let group: MultiThreadedEventLoopGroup
    /// The connection the scheduler's calls use, one call at a time; `nil` after a
    /// failure (the next call connects again).
    private let connection = NIOLockedValueBox<PostgresConnection?>(nil)
    /// The database's clock minus the runtime's, in nanoseconds, measured at connection.
    private let clockOffset = NIOLockedValueBox<Int64>(0)
    /// The local wall clock was set since the offset was measured.
    private let remeasureClock = NIOLockedValueBox(false)
    /// The schema is made and at this build's version (checked on the first connection).
    private let schemaReady = NIOLockedValueBox(false)
    /// The last attempt to connect found no server to answer (down, or not yet up).
    private let unreachable = NIOLockedValueBox(false)
    /// When the earliest claim held by another instance ends (the database's clock,
    /// nanoseconds; `Int64.max`: none), as ``nextDue(after:unmet:)`` last saw it; `nil` when not
    /// known. Lapsed claims are looked for only from then.
    private let foreignClaimEnd = NIOLockedValueBox<Int64?>(nil)
    /// What the last claim (``due(at:unmet:limit:)``) returned, when it took fewer requests
    /// than its limit: a due request it left unclaimed then was passed over (its row locked
    /// for a moment by another transaction, or due only since, on the database's clock), not
    /// left for want of room; one it returned and the scheduler did not start (no handler
    /// here) was not. `nil` when it took as many as its limit. Read and cleared by
    /// ``nextDue(after:unmet:)``.
    private let lastClaimWithRoom = NIOLockedValueBox<[String]?>(nil)
    /// How soon to look again for a due request the last claim passed over (nanoseconds).
    static let passedOverRecheck: Int64 = 50_000_000
    private let background: NIOLockedValueBox<Background>
    /// Requests this instance's commits finished (ended, failed, cancelled) that others
    /// wait on, as the rows said when they were written: ``dependents(of:)`` asks the
    /// database only about these, so an end that nothing waits on costs no round trip.
    private let concludedWithDependents = NIOLockedValueBox<Set<String>>([])
    /// Whether to ask for the next start of requests that wake the system: until the first
    /// answer, and after this instance submitted one. (One another instance submits later
    /// is armed by that instance, and by those that start after.)
    private let asksForWaking = NIOLockedValueBox(true)
    private var loop: any EventLoop { group.next() }
    /// `overtime_fleet_held_runs{fleet_instance}`: the runs this instance holds claims on.
    private let heldRuns: Gauge
    /// `overtime_fleet_reclaimed_runs_total{fleet_instance}`: runs this instance took over from
    /// instances that stopped renewing their claims.
    private let reclaimedRuns: Counter
    /// `overtime_fleet_lost_claims_total{fleet_instance}`: runs stopped here because their claims
    /// could not be renewed or were taken.
    private let lostClaims: Counter
    /// `overtime_fleet_database_round_trip_seconds`: each statement, sent and answered.
    private let roundTrips: Timer
    /// `overtime_fleet_listen_connected`: 1 while notifications from other instances arrive.
    private let listenConnected: Gauge

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
        background = NIOLockedValueBox(Background())
        do {
            try using { _ in () }  // connects, and makes or migrates the schema
        } catch {
            guard unreachable.withLockedValue({ $0 }) else {
                close()
                throw error
            }
            // A program embedding a fleet's scheduler starts while its database is down, and
            // connects (making the schema) when it comes back; until then every call fails
            // with the reason, and the scheduler says it waits for its store.
            logger.warning("the schedule database cannot be reached yet; connecting when it can be: \(error)")
        }
    }

    // MARK: Schema

    /// Makes the schema, or migrates it to this build's version, in one transaction on
    /// `connection` (the first of every connection until it is done once).
    private func migrate(_ connection: PostgresConnection) throws {
        _ = try run(connection, "BEGIN")
        do {
            try migrateInTransaction(connection)
            _ = try run(connection, "COMMIT")
        } catch {
            if (try? run(connection, "ROLLBACK")) == nil { try? connection.close().wait() }
            throw error
        }
        schemaReady.withLockedValue { $0 = true }
    }

    private func migrateInTransaction(_ connection: PostgresConnection) throws {
        do {
            // One instance migrates at a time; the others find it done.
            _ = try run(connection, "SELECT pg_advisory_xact_lock(hashtext('overtime schema'))")
            // A schema named `overtime` that is not Overtime's is refused and left as it was:
            // ours holds `overtime.meta` and only the tables these migrations make.
            let existing = try run(
                connection,
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'overtime' AND c.relkind IN ('r', 'p', 'v', 'm', 'f')"
            )
            let tables = Set(try existing.map { try $0.decode(String.self) })
            if !tables.isEmpty, !tables.contains("meta") || !tables.isSubset(of: Self.tables) {
                throw ScheduleStoreError(
                    "schedule database \(configuration.serverName): the schema 'overtime' exists and is not an Overtime "
                        + "schedule store (tables \(tables.sorted().joined(separator: ", "))); left as it was")
            }
            _ = try run(connection, "CREATE SCHEMA IF NOT EXISTS overtime")
            _ = try run(
                connection, "CREATE TABLE IF NOT EXISTS overtime.meta (name text PRIMARY KEY, value bigint NOT NULL)")
            let rows = try run(connection, "SELECT value FROM overtime.meta WHERE name = 'schema_version'")
            let version = try rows.first.map { try $0.decode(Int64.self) } ?? 0
            if version > Self.schemaVersion {
                throw ScheduleStoreError(
                    "schedule database \(configuration.serverName): written by a newer Overtime (schema version \(version));"
                        + " this build reads up to version \(Self.schemaVersion)")
            }
            for (target, statements) in [
                (1, Self.schemaVersion1), (2, Self.schemaVersion2), (3, Self.schemaVersion3), (4, Self.schemaVersion4),
                (5, Self.schemaVersion5), (6, Self.schemaVersion6), (7, Self.schemaVersion7), (8, Self.schemaVersion8),
            ] where version < target {
                for statement in statements { _ = try run(connection, PostgresQuery(unsafeSQL: statement)) }
            }
            _ = try run(
                connection,
                """
                INSERT INTO overtime.meta (name, value) VALUES ('schema_version', \(Self.schemaVersion))
                ON CONFLICT (name) DO UPDATE SET value = excluded.value
                """)
        }
    }

    /// The tables the migrations make in the `overtime` schema.
    static let tables: Set<String> = ["meta", "requests", "history", "prerequisites"]

    static let schemaVersion1 = [
        "CREATE SEQUENCE overtime.run_ids",
        "CREATE SEQUENCE overtime.submissions",
        """
        CREATE TABLE overtime.requests (
            identifier text PRIMARY KEY, sequence bigint NOT NULL, submitted_at bigint NOT NULL,
            earliest_begin bigint, interval_ns bigint, flex_ns bigint, catch_up text NOT NULL,
            catch_up_maximum bigint NOT NULL, randomized_delay_ns bigint NOT NULL, maximum_duration_ns bigint NOT NULL,
            backoff text NOT NULL, initial_delay_ns bigint NOT NULL, maximum_delay_ns bigint NOT NULL,
            maximum_attempts bigint NOT NULL, requirements text NOT NULL, anchor bigint NOT NULL, owed bigint NOT NULL,
            retry_at bigint, failed_attempts bigint NOT NULL, finished boolean NOT NULL, current_run_id bigint,
            due_at bigint, requirement_mask bigint NOT NULL, running boolean NOT NULL DEFAULT false,
            active_run_id bigint, active_attempt bigint, active_started_at bigint,
            claimed_by text, claim_until timestamptz)
        """,
        "CREATE INDEX requests_due ON overtime.requests (due_at, sequence) WHERE due_at IS NOT NULL AND NOT running",
        "CREATE INDEX requests_claims ON overtime.requests (claim_until) WHERE running",
        // pendingRequests and their count read only what is not finished (in submission order).
        "CREATE INDEX requests_pending ON overtime.requests (sequence) WHERE NOT finished",
        "CREATE INDEX requests_claimed_by ON overtime.requests (claimed_by) WHERE claimed_by IS NOT NULL",
        """
        CREATE TABLE overtime.history (
            identifier text NOT NULL, run_id bigint NOT NULL, attempt bigint NOT NULL, started_at bigint NOT NULL,
            ended_at bigint, result text NOT NULL, stop_reason text, instance text,
            PRIMARY KEY (identifier, run_id, attempt))
        """,
    ]

    /// Per-instance requests: a row's owner is the instance name whose schedule it is in,
    /// empty for the fleet's shared schedule. An instance sees the shared rows and its own.
    static let schemaVersion2 = [
        "ALTER TABLE overtime.requests ADD COLUMN owner text NOT NULL DEFAULT ''",
        "ALTER TABLE overtime.requests DROP CONSTRAINT requests_pkey",
        "ALTER TABLE overtime.requests ADD PRIMARY KEY (identifier, owner)",
        // What is pending, counted from the index alone, owner included.
        "DROP INDEX IF EXISTS overtime.requests_pending",
        "CREATE INDEX requests_pending ON overtime.requests (sequence) INCLUDE (owner) WHERE NOT finished",
    ]

    /// Whose history an attempt is in: the owner of its request's row (empty for the
    /// shared schedule), so that an instance's history of a per-instance request lists its
    /// own runs only. Attempts recorded before this version count as the fleet's.
    static let schemaVersion3 = [
        "ALTER TABLE overtime.history ADD COLUMN owner text NOT NULL DEFAULT ''"
    ]

    /// Version 4: a retried run keeps the planned time it stands for.
    static let schemaVersion4 = [
        "ALTER TABLE overtime.requests ADD COLUMN planned_at bigint"
    ]

    /// Version 5: calendar repetitions (the expression, the drawn delay, and where the
    /// previous planned time's window opened, which a clock set back looks for), tags, a
    /// request's input and an attempt's output.
    static let schemaVersion5 = [
        "ALTER TABLE overtime.requests ADD COLUMN calendar text",
        "ALTER TABLE overtime.requests ADD COLUMN grid_offset_ns bigint NOT NULL DEFAULT 0",
        "ALTER TABLE overtime.requests ADD COLUMN previous_window_at bigint",
        "ALTER TABLE overtime.requests ADD COLUMN tags text NOT NULL DEFAULT ''",
        "ALTER TABLE overtime.requests ADD COLUMN input bytea NOT NULL DEFAULT ''::bytea",
        "ALTER TABLE overtime.history ADD COLUMN output bytea",
    ]

    /// Version 6: a cancelled request stays, finished, until retention prunes it. Links of
    /// chains: a request's prerequisites and its state (`chain`, ``ChainState/packed``),
    /// which request waits on which (found by the prerequisite when it concludes), and on
    /// each prerequisite whether anything waits on it — which a submission of a link sets
    /// under the prerequisite's row lock, so that the instance that ends the prerequisite
    /// reads it as it stands after that submission.
    static let schemaVersion6 = [
        "ALTER TABLE overtime.requests ADD COLUMN cancelled_at bigint",
        "ALTER TABLE overtime.requests ADD COLUMN prerequisites text NOT NULL DEFAULT ''",
        "ALTER TABLE overtime.requests ADD COLUMN chain bytea",
        "ALTER TABLE overtime.requests ADD COLUMN has_dependents boolean NOT NULL DEFAULT false",
        """
        CREATE TABLE overtime.prerequisites (
            prerequisite text NOT NULL, identifier text NOT NULL, PRIMARY KEY (prerequisite, identifier))
        """,
        "CREATE INDEX prerequisites_by_identifier ON overtime.prerequisites (identifier)",
    ]

    /// Version 7: requests that wake the system, and the earliest next start among them.
    static let schemaVersion7 = [
        "ALTER TABLE overtime.requests ADD COLUMN wakes_system boolean NOT NULL DEFAULT false",
        "CREATE INDEX requests_waking ON overtime.requests (due_at) WHERE wakes_system AND NOT finished",
    ]

    /// Version 8: the history newest first, across identifiers (what a dashboard's history
    /// page reads, a page at a time, at a million attempts).
    static let schemaVersion8 = [
        "CREATE INDEX IF NOT EXISTS history_by_run ON overtime.history (run_id, attempt)"
    ]

    // MARK: Reading

    /// The columns a request is read from, in the order ``request(_:)`` decodes them.
    static let columns = """
        identifier, earliest_begin, interval_ns, flex_ns, catch_up, catch_up_maximum, randomized_delay_ns,
        maximum_duration_ns, backoff, initial_delay_ns, maximum_delay_ns, maximum_attempts, requirements, anchor, owed,
        retry_at, failed_attempts, finished, submitted_at, current_run_id, running, planned_at, owner, calendar,
        grid_offset_ns, tags, input, cancelled_at, prerequisites, chain, wakes_system
        """
    /// How many ``columns`` there are: the position of the first column a query adds.
    static let columnCount = 31
    /// The position of `owner` in ``columns``.
    static let ownerColumn = 22

    static func request(_ row: PostgresRow) throws -> StoredRequest {
        let cells = row.makeRandomAccess()
        return RequestColumns(
            identifier: try cells[0].decode(String.self), earliestBegin: try cells[1].decode(Int64?.self),
            intervalNanoseconds: try cells[2].decode(Int64?.self), flexNanoseconds: try cells[3].decode(Int64?.self),
            catchUp: try cells[4].decode(String.self), catchUpMaximum: Int(try cells[5].decode(Int64.self)),
            randomizedDelayNanoseconds: try cells[6].decode(Int64.self),
            maximumDurationNanoseconds: try cells[7].decode(Int64.self), backoff: try cells[8].decode(String.self),
            initialDelayNanoseconds: try cells[9].decode(Int64.self),
            maximumDelayNanoseconds: try cells[10].decode(Int64.self),
            maximumAttempts: Int(try cells[11].decode(Int64.self)), requirements: try cells[12].decode(String.self),
            anchor: try cells[13].decode(Int64.self), owed: Int(try cells[14].decode(Int64.self)),
            retryAt: try cells[15].decode(Int64?.self), failedAttempts: Int(try cells[16].decode(Int64.self)),
            finished: try cells[17].decode(Bool.self), submittedAt: try cells[18].decode(Int64.self),
            currentRunID: try cells[19].decode(Int64?.self), running: try cells[20].decode(Bool.self),
            scope: try cells[ownerColumn].decode(String.self).isEmpty ? "shared" : "perInstance",
            plannedAt: try cells[21].decode(Int64?.self), calendar: try cells[23].decode(String?.self),
            gridOffsetNanoseconds: try cells[24].decode(Int64.self), tags: try cells[25].decode(String.self),
            input: Array(try cells[26].decode(ByteBuffer.self).readableBytesView),
            cancelledAt: try cells[27].decode(Int64?.self), prerequisites: try cells[28].decode(String.self),
            chain: try cells[29].decode(ByteBuffer?.self).map { Array($0.readableBytesView) },
            wakesSystem: try cells[30].decode(Bool.self)
        ).stored(rowID: nil)
    }

    /// `column` is empty or `owner`, written `coalesce(nullif(column, ''), owner) = owner`,
    /// which no index answers: the planner took `column = '' OR column = owner` for an
    /// index condition on the primary key's second column and read every row of it (10,000
    /// entries for each claim). The name is a literal, quotes doubled.
    private static func visibility(of column: String, _ owner: String) -> String {
        let literal = literal(owner)
        return "coalesce(nullif(\(column), ''), \(literal)) = \(literal)"
    }

    /// `text` as an SQL string literal, quotes doubled.
    private static func literal(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
    }

    /// The database's clock, in nanoseconds since 1970, when the transaction began (a
    /// statement outside one is its own). `now()`, not `clock_timestamp()`: a stable value
    /// lets `due_at <= …` walk the due index; a volatile one made the planner read every row
    /// (8 ms per claim at 5,500 rows).
    static let databaseNow = "(extract(epoch FROM now()) * 1000000000)::bigint"

    func wallClock(_ local: WallClockInstant) -> WallClockInstant {
        WallClockInstant(nanosecondsSinceEpoch: local.nanosecondsSinceEpoch &+ clockOffset.withLockedValue { $0 })
    }

    func request(_ identifier: String) throws(ScheduleStoreError) -> StoredRequest? {
        try using { connection in
            try run(
                connection,
                """
                SELECT \(unescaped: Self.columns) FROM overtime.requests
                WHERE identifier = \(identifier) AND \(unescaped: visible)
                ORDER BY owner DESC LIMIT 1
                """
            ).first.map(Self.request)
        }
    }

    /// With the instance holding each run in progress (its name, without the token).
    func pendingRequests() throws(ScheduleStoreError) -> [StoredRequest] {
        try using { connection in
            try run(
                connection,
                """
                SELECT \(unescaped: Self.columns),
                    CASE WHEN running THEN regexp_replace(claimed_by, ' [0-9]+$', '') END
                FROM overtime.requests WHERE NOT finished AND \(unescaped: visible) ORDER BY sequence
                """
            ).map { row in
                var stored = try Self.request(row)
                stored.holder = try row.makeRandomAccess()[Self.columnCount].decode(String?.self)
                return stored
            }
        }
    }

    func pendingRequests(tagged tag: String) throws(ScheduleStoreError) -> [StoredRequest] {
        try using { connection in
            try run(
                connection,
                """
                SELECT \(unescaped: Self.columns),
                    CASE WHEN running THEN regexp_replace(claimed_by, ' [0-9]+$', '') END
                FROM overtime.requests WHERE NOT finished AND \(unescaped: visible)
                    AND strpos(tags, \(RequestColumns.tagPattern(tag))) > 0
                ORDER BY sequence
                """
            ).map { row in
                var stored = try Self.request(row)
                stored.holder = try row.makeRandomAccess()[Self.columnCount].decode(String?.self)
                return stored
            }
        }
    }

    func dependents(of identifiers: [String]) throws(ScheduleStoreError) -> [StoredRequest] {
        let asked = concludedWithDependents.withLockedValue { known in
            let asked = identifiers.filter { known.contains($0) }
            known.subtract(asked)
            return asked
        }
        guard !asked.isEmpty else { return [] }
        return try using { connection in
            try run(
                connection,
                """
                SELECT \(unescaped: Self.columns) FROM overtime.requests WHERE NOT finished AND owner = ''
                    AND identifier IN (SELECT identifier FROM overtime.prerequisites WHERE prerequisite = ANY(\(asked)))
                ORDER BY sequence
                """
            ).map { try Self.request($0) }
        }
    }

    func nextWakingStart() throws(ScheduleStoreError) -> WallClockInstant? {
        guard asksForWaking.withLockedValue({ $0 }) else { return nil }
        let (next, pending) = try using { connection in
            try run(
                connection,
                """
                SELECT min(due_at) FILTER (WHERE NOT running), count(*) FROM overtime.requests
                    WHERE wakes_system AND NOT finished AND \(unescaped: visible)
                """
            ).first?.decode((Int64?, Int64).self) ?? (nil, Int64(0))
        }
        if pending == 0 { asksForWaking.withLockedValue { $0 = false } }
        return next.map(WallClockInstant.init(nanosecondsSinceEpoch:))
    }

    func waitingOnFinishedPrerequisites() throws(ScheduleStoreError) -> [StoredRequest] {
        try using { connection in
            try run(
                connection,
                """
                SELECT \(unescaped: Self.columns) FROM overtime.requests WHERE NOT finished AND owner = ''
                    AND identifier IN (SELECT p.identifier FROM overtime.prerequisites p
                        LEFT JOIN overtime.requests x ON x.identifier = p.prerequisite AND x.owner = ''
                        WHERE x.identifier IS NULL OR x.finished)
                ORDER BY sequence
                """
            ).map { try Self.request($0) }
        }
    }

    /// This instance as the schedule's holder column names it (`worker-1 (host:4242)`).
    var holderName: String? { configuration.holderName }

    func waitingCounts(at now: WallClockInstant) throws(ScheduleStoreError) -> (enqueued: Int, blocked: Int) {
        try using { connection in
            // A link waiting on a prerequisite has no next start (NULL): blocked.
            let counts =
                try run(
                    connection,
                    """
                    SELECT count(*) FILTER (WHERE due_at > \(now.nanosecondsSinceEpoch)),
                        count(*) FILTER (WHERE due_at IS NULL OR due_at <= \(now.nanosecondsSinceEpoch))
                    FROM overtime.requests WHERE NOT finished AND NOT running AND \(unescaped: visible)
                    """
                ).first?.decode((Int64, Int64).self) ?? (Int64(0), Int64(0))
            return (Int(counts.0), Int(counts.1))
        }
    }

    func pendingCount() throws(ScheduleStoreError) -> Int {
        try using { connection in
            Int(
                try run(
                    connection,
                    "SELECT count(*) FROM overtime.requests WHERE NOT finished AND \(unescaped: visible)"
                ).first?.decode(Int64.self) ?? 0)
        }
    }

    /// Claims them: first takes the runs whose instance stopped renewing their claims
    /// (recorded as interrupted, retried), then the due requests no other instance claims,
    /// on both clocks (the database's and the scheduler's `now`), earliest first.
    ///
    /// The claim is one statement (one round trip on the way from due time to start); the
    /// lapsed claims are looked for only once one may have ended, as the last
    /// ``nextDue(after:unmet:)`` saw the claims held elsewhere.
    func due(at now: WallClockInstant, unmet: Int64, limit: Int) throws(ScheduleStoreError) -> [StoredRequest] {
        try reclaimLapsedRunsIfAnyMayHaveEnded(now)
        return try using { connection in
            // A claim need not survive a crash of the database: a start is written only
            // where the claim is still this instance's, so a claim lost is a start refused
            // (its request claimed again), never a run in two places. Not waiting for the
            // log's flush (`set_config` local to the statement's own transaction) takes one
            // flush off the way from due time to start.
            let rows = try run(
                connection,
                """
                WITH due AS (
                    SELECT identifier, owner FROM overtime.requests
                    WHERE due_at <= least(\(now.nanosecondsSinceEpoch), \(unescaped: Self.databaseNow)) AND NOT running
                        AND \(unescaped: visibleInDueOrder)
                        AND (requirement_mask = 0 OR (requirement_mask & \(unmet)) = 0)
                        AND (claimed_by IS NULL OR claimed_by = \(instance) OR claim_until < now())
                    ORDER BY due_at, sequence LIMIT \(limit) FOR UPDATE SKIP LOCKED),
                unflushed AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true))
                UPDATE overtime.requests AS r SET claimed_by = \(instance),
                    claim_until = now() + make_interval(secs => \(claimSeconds)),
                    current_run_id = coalesce(r.current_run_id, nextval('overtime.run_ids'))
                FROM due, unflushed WHERE r.identifier = due.identifier AND r.owner = due.owner
                RETURNING \(unescaped: Self.prefixed("r")), r.due_at, r.sequence
                """)
            var claimed: [(StoredRequest, Int64, Int64)] = []
            for row in rows {
                let cells = row.makeRandomAccess()
                claimed.append(
                    (
                        try Self.request(row), try cells[Self.columnCount].decode(Int64.self),
                        try cells[Self.columnCount + 1].decode(Int64.self)
                    ))
            }
            let returned = claimed.count < limit ? claimed.map(\.0.request.identifier) : nil
            lastClaimWithRoom.withLockedValue { $0 = returned }
            return claimed.sorted { ($0.1, $0.2) < ($1.1, $1.2) }.map(\.0)
        }
    }

    /// Takes over the runs whose claims ended, once the earliest claim held elsewhere may
    /// have ended (as ``nextDue(after:unmet:)`` last saw them, or when not known).
    private func reclaimLapsedRunsIfAnyMayHaveEnded(_ now: WallClockInstant) throws(ScheduleStoreError) {
        guard foreignClaimEnd.withLockedValue({ $0.map { $0 <= now.nanosecondsSinceEpoch } ?? true }) else { return }
        try transaction { connection in
            _ = try run(connection, "SET LOCAL synchronous_commit TO OFF")  // as a claim
            try reclaimLapsedRuns(connection)
        }
        // Not looked for again until the next look for the next due time, which follows in
        // the same cycle and reads the claims held elsewhere, also those taken meanwhile.
        foreignClaimEnd.withLockedValue { $0 = .max }
    }

    /// Runs whose claims ended without renewal (their instance died or lost the database):
    /// each attempt is recorded as interrupted and retried as the planner says.
    private func reclaimLapsedRuns(_ connection: PostgresConnection) throws {
        let lapsed = try run(
            connection,
            """
            SELECT \(unescaped: Self.columns), active_run_id, active_attempt, active_started_at, claimed_by,
                \(unescaped: Self.databaseNow)
            FROM overtime.requests WHERE running AND claim_until < now() AND \(unescaped: visible)
            LIMIT 100 FOR UPDATE SKIP LOCKED
            """)
        for row in lapsed {
            let cells = row.makeRandomAccess()
            var stored = try Self.request(row)
            let identifier = stored.request.identifier
            let first = Self.columnCount
            let holder = try cells[first + 3].decode(String?.self) ?? "?"
            let now = WallClockInstant(nanosecondsSinceEpoch: try cells[first + 4].decode(Int64.self))
            let rowOwner = try cells[Self.ownerColumn].decode(String.self)
            guard let runID = try cells[first].decode(Int64?.self),
                let attempt = try cells[first + 1].decode(Int64?.self)
            else {
                // Its request was replaced while it ran: only the identifier is freed.
                _ = try run(
                    connection,
                    """
                    UPDATE overtime.requests SET running = false, claimed_by = NULL, claim_until = NULL
                    WHERE identifier = \(identifier) AND owner = \(rowOwner)
                    """)
                continue
            }
            let twice =
                try run(
                    connection,
                    """
                    SELECT 1 FROM overtime.history WHERE identifier = \(identifier) AND run_id = \(runID)
                        AND attempt = \(attempt - 1) AND result = 'interrupted'
                    """
                ).first != nil
            let record = RunRecord(
                identifier: identifier, runID: runID, attempt: Int(attempt),
                startedAt: WallClockInstant(nanosecondsSinceEpoch: try cells[first + 2].decode(Int64?.self) ?? 0),
                endedAt: now, result: .interrupted, stopReason: "its claim ended: \(holder) stopped renewing it")
            try insertHistory([record], owners: [rowOwner], instance: holder, connection)
            reclaimedRuns.increment()
            stored.plan = SchedulePlanner.interrupted(
                stored.plan, stored.request, attempt: Int(attempt), twice: twice, now: now)
            stored.currentRunID = runID
            stored.isRunning = false
            _ = try writePlans([PlanWrite(stored: stored, start: nil, ending: nil)], .any, connection)
            logger.notice(
                "took over a run whose claim ended: \(twice ? "counted as failed" : "retried now")",
                metadata: ["task": "\(identifier)", "run": "\(runID)", "attempt": "\(attempt)", "holder": "\(holder)"])
        }
    }

    /// The next due request and, in the same statement, when a claim held elsewhere may
    /// end (the earlier of the two is returned): the claim is taken over then if its holder
    /// stopped renewing it, and ``due(at:unmet:limit:)`` looks for lapsed claims from then on.
    ///
    /// Such a time must come no later than every claim held elsewhere, also those this read
    /// does not see yet: nothing tells of a start, and a run whose worker died unseen would be
    /// left until the next change. A request due now that this instance could run but did
    /// not claim:
    /// - claimed elsewhere and not started yet: looked at again when that claim ends;
    /// - unclaimed (or its claim lapsed) though the last claim had room: it was passed over —
    ///   its row locked for a moment (maybe by another instance claiming it), or due only
    ///   since the claim's statement read the database's clock — so looked at again soon
    ///   (``passedOverRecheck``), not a claim's length later;
    /// - otherwise (this instance at its limit) it is claimed elsewhere or will be, and such a
    ///   claim ends no sooner than a claim's duration from now (give or take the moments
    ///   between a claim and this read); an end here looks again anyway.
    ///
    /// The due index is walked in order (with a plain `LIMIT 1` the planner read the table
    /// from its start: 20 ms past a burst's dead rows).
    func nextDue(after now: WallClockInstant, unmet: Int64) throws(ScheduleStoreError) -> (
        identifier: String, at: WallClockInstant
    )? {
        // Also here, not only before a claim: an instance that claims nothing (at its limit)
        // still takes over what dead instances held.
        try reclaimLapsedRunsIfAnyMayHaveEnded(now)
        let lastClaim = lastClaimWithRoom.withLockedValue { lastClaim in
            defer { lastClaim = nil }
            return lastClaim
        }
        let passedOver = lastClaim == nil ? configuration.claimDuration.nanosecondsClamped : Self.passedOverRecheck
        return try using { connection in
            let rows = try run(
                connection,
                """
                (SELECT false, identifier, due_at FROM overtime.requests
                    WHERE NOT running AND due_at > least(\(now.nanosecondsSinceEpoch), \(unescaped: Self.databaseNow))
                        AND \(unescaped: visibleInDueOrder)
                        AND (claimed_by IS NULL OR claimed_by = \(instance) OR claim_until < now())
                    ORDER BY due_at, sequence LIMIT 1)
                UNION ALL
                (SELECT true, identifier, (extract(epoch FROM claim_until) * 1000000000)::bigint FROM overtime.requests
                    WHERE running AND claimed_by <> \(instance) AND \(unescaped: visible)
                    ORDER BY claim_until LIMIT 1)
                UNION ALL
                (SELECT true, identifier, \(unescaped: Self.databaseNow) + \(passedOver) FROM overtime.requests
                    WHERE NOT running AND due_at <= least(\(now.nanosecondsSinceEpoch), \(unescaped: Self.databaseNow))
                        AND \(unescaped: visibleInDueOrder)
                        AND (requirement_mask = 0 OR (requirement_mask & \(unmet)) = 0)
                        AND (claimed_by IS NULL OR (claimed_by <> \(instance) AND claim_until < now()))
                        AND NOT (identifier = ANY(\(lastClaim ?? [])))
                    ORDER BY due_at, sequence LIMIT 1)
                UNION ALL
                (SELECT true, identifier, (extract(epoch FROM claim_until) * 1000000000)::bigint FROM overtime.requests
                    WHERE NOT running AND due_at <= least(\(now.nanosecondsSinceEpoch), \(unescaped: Self.databaseNow))
                        AND \(unescaped: visibleInDueOrder)
                        AND (requirement_mask = 0 OR (requirement_mask & \(unmet)) = 0)
                        AND claimed_by <> \(instance) AND claim_until >= now()
                    ORDER BY due_at, sequence LIMIT 1)
                """)
            var next: (identifier: String, at: WallClockInstant)?
            var claimEnd = Int64.max
            for row in rows {
                let (heldElsewhere, identifier, at) = try row.decode((Bool, String, Int64).self)
                if heldElsewhere { claimEnd = min(claimEnd, at) }
                if next == nil || at < next!.at.nanosecondsSinceEpoch {
                    next = (identifier, WallClockInstant(nanosecondsSinceEpoch: at))
                }
            }
            foreignClaimEnd.withLockedValue { $0 = claimEnd }
            return next
        }
    }

    func dueWaiting(at now: WallClockInstant, on requirements: Int64) throws(ScheduleStoreError) -> Bool {
        try using { connection in
            try run(
                connection,
                """
                SELECT EXISTS (SELECT 1 FROM overtime.requests WHERE NOT running AND \(unescaped: visible)
                    AND due_at <= \(now.nanosecondsSinceEpoch) AND (requirement_mask & \(requirements)) != 0)
                """
            ).first?.decode(Bool.self) ?? false
        }
    }

    func waitsForALength(after threshold: WallClockInstant) throws(ScheduleStoreError) -> [StoredRequest] {
        try using { connection in
            try run(
                connection,
                """
                SELECT \(unescaped: Self.columns) FROM overtime.requests WHERE NOT running AND \(unescaped: visible)
                    AND due_at > \(threshold.nanosecondsSinceEpoch)
                    AND (retry_at IS NOT NULL OR (interval_ns IS NULL AND earliest_begin IS NULL))
                ORDER BY due_at, sequence
                """
            ).map(Self.request)
        }
    }

    /// The offset to the database's clock is measured again now: the local clock it was
    /// measured against moved.
    func localWallClockStepped() {
        remeasureClock.withLockedValue { $0 = true }
        _ = try? using { _ in () }
    }

    func plannedAheadOfClock(_ now: WallClockInstant) throws(ScheduleStoreError) -> [StoredRequest] {
        try using { connection in
            try run(
                connection,
                """
                SELECT \(unescaped: Self.columns) FROM overtime.requests WHERE NOT finished AND \(unescaped: visible)
                    AND ((interval_ns > 0 AND anchor - interval_ns - least(flex_ns, interval_ns) > \(now.nanosecondsSinceEpoch))
                        OR previous_window_at > \(now.nanosecondsSinceEpoch))
                ORDER BY sequence
                """
            ).map(Self.request)
        }
    }

    /// Run IDs come from the database's sequence, with each claim.
    func lastRunID() throws(ScheduleStoreError) -> Int64 { 0 }

    func newRunID() throws(ScheduleStoreError) -> Int64? {
        try using { connection in
            try run(connection, "SELECT nextval('overtime.run_ids')").first?.decode(Int64.self)
        }
    }

    func history(identifier: String, limit: Int) throws(ScheduleStoreError) -> [RunRecord] {
        try using { connection in
            try run(
                connection,
                """
                SELECT identifier, run_id, attempt, started_at, ended_at, result, stop_reason, output
                    FROM overtime.history WHERE identifier = \(identifier) AND \(unescaped: visible)
                UNION ALL SELECT identifier, active_run_id, active_attempt, active_started_at, NULL, 'running', NULL,
                    NULL::bytea FROM overtime.requests
                    WHERE identifier = \(identifier) AND running AND active_run_id IS NOT NULL AND \(unescaped: visible)
                ORDER BY 2 DESC, 3 DESC LIMIT \(limit)
                """
            ).map(Self.record)
        }
    }

    /// An attempt read from `identifier, run_id, attempt, started_at, ended_at, result,
    /// stop_reason, output`.
    static func record(_ row: PostgresRow) throws -> RunRecord {
        let (identifier, runID, attempt, started, ended, result, reason, output) = try row.decode(
            (String, Int64, Int64, Int64, Int64?, String, String?, ByteBuffer?).self)
        return RunRecord(
            identifier: identifier, runID: runID, attempt: Int(attempt),
            startedAt: WallClockInstant(nanosecondsSinceEpoch: started),
            endedAt: ended.map(WallClockInstant.init(nanosecondsSinceEpoch:)),
            result: RunResult(stored: result) ?? .failed, stopReason: reason,
            output: output.map { Array($0.readableBytesView) })
    }

    func pruneHistory(endedBefore: WallClockInstant?, keepingPerIdentifier: Int?) throws(ScheduleStoreError) -> Int {
        try using { connection in
            // The rows this instance sees (the fleet's and its own); other instances prune
            // theirs. Each statement stands alone: a delete repeated by another instance
            // deletes nothing more.
            var deleted: Int64 = 0
            if let endedBefore {
                let cutoff = endedBefore.nanosecondsSinceEpoch
                deleted +=
                    try run(
                        connection,
                        """
                        WITH gone AS (DELETE FROM overtime.history WHERE ended_at < \(cutoff) AND \(unescaped: visible)
                            RETURNING 1)
                        SELECT count(*) FROM gone
                        """
                    ).first?.decode(Int64.self) ?? 0
            }
            if let keep = keepingPerIdentifier {
                let kept = Int64(keep)
                deleted +=
                    try run(
                        connection,
                        """
                        WITH surplus AS (
                            SELECT identifier, owner, run_id, attempt FROM (
                                SELECT identifier, owner, run_id, attempt, row_number() OVER (
                                    PARTITION BY identifier, owner ORDER BY run_id DESC, attempt DESC) AS newest
                                FROM overtime.history WHERE \(unescaped: visible)) ranked
                            WHERE newest > \(kept)),
                        gone AS (DELETE FROM overtime.history h USING surplus
                            WHERE (h.identifier, h.owner, h.run_id, h.attempt)
                                = (surplus.identifier, surplus.owner, surplus.run_id, surplus.attempt)
                            RETURNING 1)
                        SELECT count(*) FROM gone
                        """
                    ).first?.decode(Int64.self) ?? 0
            }
            if let endedBefore {
                let cutoff = endedBefore.nanosecondsSinceEpoch
                _ = try run(
                    connection,
                    """
                    DELETE FROM overtime.requests r WHERE r.finished AND NOT r.running AND r.submitted_at < \(cutoff)
                        AND coalesce(r.cancelled_at, 0) < \(cutoff) AND \(unescaped: visibleR)
                        AND NOT EXISTS (SELECT 1 FROM overtime.history h
                            WHERE h.identifier = r.identifier AND h.owner = r.owner AND h.ended_at >= \(cutoff))
                    """)
                _ = try run(
                    connection,
                    """
                    DELETE FROM overtime.prerequisites p WHERE NOT EXISTS (SELECT 1 FROM overtime.requests r
                        WHERE r.identifier = p.identifier AND r.owner = '' AND NOT r.finished)
                    """)
            }
            return Int(deleted)
        }
    }

    // MARK: Writing

    func commit(_ batch: ScheduleBatch, lastRunID: Int64) throws(ScheduleStoreError) -> CommitRefusals {
        // Ended attempts' plans are written only while this instance still holds the run: a
        // claim taken over meanwhile has recorded the attempt as interrupted.
        let planned = batch.ends.compactMap { end in
            end.plan.map { plan -> PlanWrite in
                var plan = plan
                plan.isRunning = false
                return PlanWrite(stored: plan, start: nil, ending: end.record)
            }
        }
        // Only a claim this instance still holds becomes a run.
        let starts = batch.starts.map { record, stored in
            var plan = stored
            plan.isRunning = true
            return PlanWrite(stored: plan, start: record, ending: nil)
        }
        // Others hear of an end only when it leaves something to run (a repeating request's
        // next time, a retry); a finished one-shot wakes no one.
        let endsLeaveRuns = planned.contains { $0.stored.nextStart != nil }
        var found = CommitRefusals()
        let recorded =
            batch.writes.isEmpty
            ? try using { connection in
                try recordRuns(batch.ends, planned, starts, notifying: endsLeaveRuns, connection)
            }
            : try commitWithWrites(batch, planned, starts, found: &found)
        let started = recorded.started
        var refusals = found
        refusals.superseded = recorded.superseded
        for (record, _) in batch.starts where !started.contains(record.identifier) {
            refusals.starts.insert(record.identifier)
        }
        let now = Self.bootNanoseconds()
        let holding = background.withLockedValue { background in
            for end in batch.ends {
                background.held[end.record.identifier] = nil
                background.lost.remove(end.record.identifier)
            }
            for (record, _) in batch.starts where !refusals.starts.contains(record.identifier) {
                background.held[record.identifier] = now
            }
            if background.held.isEmpty { stopRenewing(&background) }
            return background.held.count
        }
        heldRuns.record(holding)
        if holding > 0 { renewClaimsWhileHeld() }
        return refusals
    }

    /// How many request writes in one batch make its commit analyse the table.
    static let manyWrites = 1_000

    /// Records ends and starts of runs in one statement (one round trip, on the way from a
    /// due time to its start), atomic as any statement, and notifies the other instances
    /// when `notifying` or when it freed or released something. Returns the runs that
    /// started and the ends that came after their runs were taken over.
    private func recordRuns(
        _ ends: [RunEnd], _ planned: [PlanWrite], _ starts: [PlanWrite], notifying: Bool,
        _ connection: PostgresConnection
    ) throws -> RecordedRuns {
        var bindings = PostgresBindings()
        var steps: [String] = []
        if !ends.isEmpty {
            let insert = historyInsert(
                ends.map(\.record), owners: ends.map { owner(of: $0.scope) }, instance: instance, &bindings)
            steps.append("recorded AS (\(insert))")
        }
        steps.append("ended AS (\(planUpdate(planned, .ending, &bindings)))")
        steps.append("started AS (\(planUpdate(starts, .claimedHere, &bindings)))")
        let base = bindings.count
        bindings.append(ends.map(\.record.identifier))
        bindings.append(ends.map(\.record.runID))
        bindings.append(instance)
        bindings.append(notifying)
        bindings.append(Self.channel)
        bindings.append(ends.filter { $0.scope == .shared }.map(\.record.identifier))
        bindings.append(configuration.claimDuration.nanosecondsClamped)
        bindings.append(ends.map { Int64($0.record.attempt) })
        bindings.append(ends.map(\.record.result.description))
        bindings.append(ends.map { $0.record.endedAt?.nanosecondsSinceEpoch ?? 0 })
        // An end that comes after another instance took its run over (the attempt is in the
        // history as interrupted, by the taker): it does not count, and says so.
        steps.append(
            """
            superseded AS (UPDATE overtime.history AS h SET result = 'superseded', ended_at = v.ended,
                    stop_reason = 'ended (' || v.result || ') after its claim was taken over; '
                        || coalesce(h.stop_reason, '')
                FROM unnest($\(base + 1)::text[], $\(base + 2)::bigint[], $\(base + 8)::bigint[], $\(base + 9)::text[],
                    $\(base + 10)::bigint[]) AS v(identifier, run, attempt, result, ended)
                WHERE h.identifier = v.identifier AND h.run_id = v.run AND h.attempt = v.attempt
                    AND h.result = 'interrupted' AND v.identifier NOT IN (SELECT identifier FROM ended)
                RETURNING h.identifier)
            """)
        // Each step sees the rows as they were before the statement: an end not written (the
        // request replaced or cancelled meanwhile) frees the identifier, and the claims not
        // started are released, leaving out the rows the steps above wrote.
        steps.append(
            """
            freed AS (UPDATE overtime.requests AS r SET running = false, active_run_id = NULL, active_attempt = NULL,
                    active_started_at = NULL, claimed_by = NULL, claim_until = NULL
                FROM unnest($\(base + 1)::text[], $\(base + 2)::bigint[]) AS v(identifier, run)
                WHERE r.identifier = v.identifier AND r.running AND r.claimed_by = $\(base + 3) AND \(visibleR)
                    AND (r.active_run_id IS NULL OR r.active_run_id = v.run)
                    AND v.identifier NOT IN (SELECT identifier FROM ended)
                RETURNING 1)
            """)
        steps.append(
            """
            released AS (UPDATE overtime.requests SET claimed_by = NULL, claim_until = NULL
                WHERE claimed_by = $\(base + 3) AND NOT running
                    AND (identifier, owner) NOT IN (SELECT identifier, owner FROM started)
                RETURNING 1)
            """)
        // The other instances wake when the earliest claim held elsewhere may end, as they
        // last read the claims (``nextDue(after:unmet:)``), to take its run over if its
        // holder died. When this instance's last shared run ends with nothing shared due
        // within a claim's duration, they are told to read again: else each would wake at
        // rest, when that claim would have ended, for nothing. (Whether this instance holds
        // another, not whether any instance does: two last ends at once would each see the
        // other's run and neither tell.)
        let lastEnd = """
            cardinality($\(base + 6)::text[]) > 0 AND NOT EXISTS (SELECT 1 FROM started WHERE owner = '')
                AND NOT EXISTS (SELECT 1 FROM overtime.requests WHERE running AND owner = ''
                    AND claimed_by = $\(base + 3) AND identifier <> ALL($\(base + 6)::text[]))
                AND coalesce((SELECT due_at FROM overtime.requests WHERE due_at IS NOT NULL AND NOT running
                    AND owner = '' ORDER BY due_at, sequence LIMIT 1) > \(Self.databaseNow) + $\(base + 7), true)
            """
        let sql = """
            WITH \(steps.joined(separator: ",\n"))
            SELECT identifier, false FROM started
            UNION ALL
            SELECT identifier, true FROM superseded
            UNION ALL
            SELECT identifier, NULL FROM ended WHERE linked
            UNION ALL
            SELECT NULL, NULL FROM (SELECT pg_notify($\(base + 5), $\(base + 3))
                WHERE $\(base + 4) OR EXISTS (SELECT 1 FROM freed) OR EXISTS (SELECT 1 FROM released)
                    OR (\(lastEnd))) AS notified
            """
        let rows = try run(connection, PostgresQuery(unsafeSQL: sql, binds: bindings))
        var recorded = RecordedRuns()
        for row in rows {
            let (identifier, late) = try row.decode((String?, Bool?).self)
            guard let identifier else { continue }
            if late == nil {
                concludedWithDependents.withLockedValue { _ = $0.insert(identifier) }
            } else if late == true {
                recorded.superseded.insert(identifier)
            } else {
                recorded.started.insert(identifier)
            }
        }
        return recorded
    }

    /// What ``recordRuns(_:_:_:notifying:_:)`` wrote: the runs that started, and the ends
    /// that came after their runs were taken over.
    struct RecordedRuns {
        var started: Set<String> = []
        var superseded: Set<String> = []
    }

    /// A batch that writes requests: in one transaction, under the fleet's submission lock.
    /// Returns what it recorded of the runs (see ``RecordedRuns``).
    private func commitWithWrites(
        _ batch: ScheduleBatch, _ planned: [PlanWrite], _ starts: [PlanWrite], found: inout CommitRefusals
    ) throws(ScheduleStoreError) -> RecordedRuns {
        let (started, written) = try transaction { connection in
            // Submissions take turns across the fleet (one lock for the whole batch, not one
            // per request: a batch of 20,000 ran out of the server's lock table), so that two
            // instances submitting one identifier in different scopes cannot both insert it.
            _ = try run(connection, "SELECT pg_advisory_xact_lock(hashtext('overtime requests'))")
            var found = CommitRefusals()
            found.resubmitted = try deleteFinished(of: batch.writes, connection)
            for write in batch.writes {
                guard try apply(write, connection) else {
                    if case .insertUnlessPending(let stored) = write { found.kept.insert(stored.request.identifier) }
                    continue
                }
            }
            found.resubmitted.subtract(found.kept)
            if batch.writes.count >= Self.manyWrites {
                // The claims' plans are chosen from the table's statistics, which a burst of
                // new requests leaves behind until autovacuum's next analysis (a minute or
                // more): taken here, in the submitting transaction.
                _ = try run(connection, "ANALYZE overtime.requests")
            }
            // Written requests are news to every instance.
            return (try recordRuns(batch.ends, planned, starts, notifying: true, connection), found)
        }
        found = written
        return started
    }

    /// Removes the finished requests (done, or failed for good) that the batch's
    /// ``RequestWrite/insertUnlessPending(_:)`` writes replace, in one statement; returns
    /// their identifiers.
    private func deleteFinished(of writes: [RequestWrite], _ connection: PostgresConnection) throws -> Set<String> {
        var visibleHere: [String] = []
        var shared: [String] = []
        for case .insertUnlessPending(let stored) in writes {
            visibleHere.append(stored.request.identifier)
            if rowOwner(of: stored).isEmpty { shared.append(stored.request.identifier) }
        }
        guard !visibleHere.isEmpty else { return [] }
        // A shared request stands for the identifier in every instance: their own finished
        // requests of it go too.
        let rows = try run(
            connection,
            """
            DELETE FROM overtime.requests WHERE finished AND identifier = ANY(\(visibleHere))
                AND (\(unescaped: visible) OR identifier = ANY(\(shared)))
            RETURNING identifier
            """)
        return Set(try rows.map { try $0.decode(String.self) })
    }

    /// Applies `write`; returns whether it wrote (a conditional insert keeps a pending request).
    private func apply(_ write: RequestWrite, _ connection: PostgresConnection) throws -> Bool {
        switch write {
        case .save(let stored): return try upsert(stored, ifAbsent: false, connection)
        case .insertUnlessPending(let stored): return try upsert(stored, ifAbsent: true, connection)
        case .cancel(let identifier, let time):
            try noteConcluded(
                run(
                    connection,
                    """
                    UPDATE overtime.requests SET finished = true, cancelled_at = \(time.nanosecondsSinceEpoch),
                        due_at = NULL, owed = 0, retry_at = NULL
                    WHERE identifier = \(identifier) AND NOT finished AND \(unescaped: visible)
                    RETURNING identifier, has_dependents
                    """))
        case .cancelAll(let time):
            try noteConcluded(
                run(
                    connection,
                    """
                    UPDATE overtime.requests SET finished = true, cancelled_at = \(time.nanosecondsSinceEpoch),
                        due_at = NULL, owed = 0, retry_at = NULL
                    WHERE NOT finished AND \(unescaped: visible)
                    RETURNING identifier, has_dependents
                    """))
        }
        return true
    }

    /// Writes a request's row. A new row takes the next submission number; an existing
    /// one keeps its own, and its run in progress — which a replacement (a new run ID)
    /// detaches from the request.
    ///
    /// An identifier is in one scope across the fleet, so that no instance sees two
    /// requests of it: a shared request replaces every instance's own of that identifier,
    /// a per-instance one the shared one. (Under the commit's lock: two instances
    /// submitting one identifier in different scopes at once cannot both insert it.)
    private func upsert(_ stored: StoredRequest, ifAbsent: Bool, _ connection: PostgresConnection) throws -> Bool {
        let row = RequestColumns(stored)
        let rowOwner = rowOwner(of: stored)
        if !ifAbsent {
            _ = try run(
                connection,
                """
                DELETE FROM overtime.requests WHERE identifier = \(row.identifier) AND owner <> \(rowOwner)
                    AND (\(rowOwner) = '' OR owner = '')
                """)
        }
        let conflict =
            ifAbsent
            ? "DO NOTHING"
            : """
            DO UPDATE SET submitted_at = excluded.submitted_at, earliest_begin = excluded.earliest_begin,
                interval_ns = excluded.interval_ns, flex_ns = excluded.flex_ns, catch_up = excluded.catch_up,
                catch_up_maximum = excluded.catch_up_maximum, randomized_delay_ns = excluded.randomized_delay_ns,
                maximum_duration_ns = excluded.maximum_duration_ns, backoff = excluded.backoff,
                initial_delay_ns = excluded.initial_delay_ns, maximum_delay_ns = excluded.maximum_delay_ns,
                maximum_attempts = excluded.maximum_attempts, requirements = excluded.requirements,
                anchor = excluded.anchor, owed = excluded.owed, retry_at = excluded.retry_at,
                failed_attempts = excluded.failed_attempts, finished = excluded.finished,
                current_run_id = excluded.current_run_id, due_at = excluded.due_at,
                requirement_mask = excluded.requirement_mask, planned_at = excluded.planned_at,
                calendar = excluded.calendar, grid_offset_ns = excluded.grid_offset_ns,
                previous_window_at = excluded.previous_window_at, tags = excluded.tags, input = excluded.input,
                cancelled_at = excluded.cancelled_at, prerequisites = excluded.prerequisites, chain = excluded.chain,
                wakes_system = excluded.wakes_system,
                active_run_id = CASE WHEN excluded.current_run_id IS DISTINCT FROM requests.current_run_id
                    THEN NULL ELSE requests.active_run_id END
            """
        let written = try run(
            connection,
            """
            INSERT INTO overtime.requests AS requests (identifier, submitted_at, earliest_begin, interval_ns, flex_ns,
                catch_up, catch_up_maximum, randomized_delay_ns, maximum_duration_ns, backoff, initial_delay_ns,
                maximum_delay_ns, maximum_attempts, requirements, anchor, owed, retry_at, failed_attempts, finished,
                current_run_id, due_at, requirement_mask, sequence, owner, planned_at, calendar, grid_offset_ns,
                previous_window_at, tags, input, cancelled_at, prerequisites, chain, wakes_system)
            SELECT \(row.identifier), \(row.submittedAt), \(row.earliestBegin), \(row.intervalNanoseconds),
                \(row.flexNanoseconds), \(row.catchUp), \(Int64(row.catchUpMaximum)), \(row.randomizedDelayNanoseconds),
                \(row.maximumDurationNanoseconds), \(row.backoff), \(row.initialDelayNanoseconds),
                \(row.maximumDelayNanoseconds), \(Int64(row.maximumAttempts)), \(row.requirements), \(row.anchor),
                \(Int64(row.owed)), \(row.retryAt), \(Int64(row.failedAttempts)), \(row.finished), \(row.currentRunID),
                \(row.dueAt), \(row.requirementMask), nextval('overtime.submissions'), \(rowOwner), \(row.plannedAt),
                \(row.calendar), \(row.gridOffsetNanoseconds), \(row.previousWindowAt), \(row.tags),
                \(ByteBuffer(bytes: row.input)), \(row.cancelledAt), \(row.prerequisites),
                \(row.chain.map { ByteBuffer(bytes: $0) }), \(row.wakesSystem)
            -- Kept: a request of the identifier this instance sees, or a shared one another
            -- instance would see beside its own.
            WHERE \(!ifAbsent) OR NOT EXISTS (SELECT 1 FROM overtime.requests WHERE identifier = \(row.identifier)
                AND (\(unescaped: visible) OR \(rowOwner) = ''))
            ON CONFLICT (identifier, owner) \(unescaped: conflict)
            RETURNING identifier, has_dependents
            """)
        guard let first = written.first else { return false }
        if stored.plan.isFinished, try first.decode((String, Bool).self).1 {
            concludedWithDependents.withLockedValue { _ = $0.insert(row.identifier) }
        }
        if !stored.request.prerequisites.isEmpty { try writeLinks(stored, connection) }
        if stored.request.wakesSystem { asksForWaking.withLockedValue { $0 = true } }
        return true
    }

    /// Writes which prerequisites `stored` waits on (those it no longer waits on go), and
    /// marks each as waited on — under its row lock, so that an instance ending it at the
    /// same time reads the mark once this commits, or this reads it ended (and the
    /// scheduler decides the link again after the commit).
    private func writeLinks(_ stored: StoredRequest, _ connection: PostgresConnection) throws {
        let identifier = stored.request.identifier
        let waiting = (stored.chain?.waitingOn ?? []).sorted()
        _ = try run(connection, "DELETE FROM overtime.prerequisites WHERE identifier = \(identifier)")
        guard !waiting.isEmpty else { return }
        _ = try run(
            connection,
            """
            INSERT INTO overtime.prerequisites (prerequisite, identifier)
                SELECT unnest(\(waiting)::text[]), \(identifier) ON CONFLICT DO NOTHING
            """)
        _ = try run(
            connection,
            """
            UPDATE overtime.requests SET has_dependents = true
                WHERE identifier = ANY(\(waiting)) AND owner = '' AND NOT has_dependents
            """)
    }

    /// Notes the requests `rows` (identifier, has_dependents) finished that others wait on.
    private func noteConcluded(_ rows: PostgresQueryResult) throws {
        var linked: [String] = []
        for row in rows {
            let (identifier, waitedOn) = try row.decode((String, Bool).self)
            if waitedOn { linked.append(identifier) }
        }
        guard !linked.isEmpty else { return }
        concludedWithDependents.withLockedValue { $0.formUnion(linked) }
    }

    /// The owner column of a request's row: this instance's name for a per-instance
    /// request, empty for a shared one.
    private func rowOwner(of stored: StoredRequest) -> String {
        owner(of: stored.request.scope)
    }

    /// The owner column of a row in `scope`.
    private func owner(of scope: RequestScope) -> String {
        scope == .perInstance ? owner : ""
    }

    /// A request's plan to write, with the run it starts (`start`) or the attempt whose end
    /// it records (`ending`).
    struct PlanWrite {
        let stored: StoredRequest
        let start: RunRecord?
        let ending: RunRecord?
    }

    /// Which rows a plan may be written to.
    enum PlanCondition {
        /// The row, whatever holds it (a lapsed claim taken over in the same transaction).
        case any
        /// Only while this instance holds the run whose end is recorded.
        case ending
        /// Only an idle row this instance claimed: the write starts a run and extends the claim.
        case claimedHere
    }

    /// `NULL` in the arrays below: postgres-nio encodes arrays of non-optional values only.
    private static let none = Int64.min

    /// Writes where requests' schedules stand and their runs in progress, all in one
    /// statement (arrays unnested), on the rows `condition` allows; the identifiers written.
    ///
    /// Each row is named by its whole primary key (identifier and owner), not by the
    /// visibility predicate: the planner prices that predicate at a default 0.5 % of rows,
    /// took the instance's claimed rows for one row, and joined them in a nested loop over
    /// the unnested arrays (256 × 256 comparisons, 190–280 ms per batch of 256).
    private func writePlans(_ writes: [PlanWrite], _ condition: PlanCondition, _ connection: PostgresConnection)
        throws -> Set<String>
    {
        guard !writes.isEmpty else { return [] }
        var bindings = PostgresBindings()
        let sql = planUpdate(writes, condition, &bindings)
        let result = try run(connection, PostgresQuery(unsafeSQL: sql, binds: bindings))
        return Set(try result.map { try $0.decode((String, String).self).0 })
    }

    /// The `UPDATE` ``writePlans(_:_:_:)`` runs, its values appended to `bindings`;
    /// returns the identifier and owner of each row written.
    private func planUpdate(_ writes: [PlanWrite], _ condition: PlanCondition, _ bindings: inout PostgresBindings)
        -> String
    {
        let base = bindings.count
        func parameter(_ position: Int) -> String { "$\(base + position)" }
        let rows = writes.map { RequestColumns($0.stored) }
        let none = Self.none
        bindings.append(rows.map(\.identifier))
        bindings.append(rows.map(\.anchor))
        bindings.append(rows.map { Int64($0.owed) })
        bindings.append(rows.map { $0.retryAt ?? none })
        bindings.append(rows.map { Int64($0.failedAttempts) })
        bindings.append(rows.map(\.finished))
        bindings.append(rows.map { $0.currentRunID ?? none })
        bindings.append(rows.map { $0.dueAt ?? none })
        bindings.append(rows.map(\.running))
        bindings.append(writes.map { $0.start?.runID ?? none })
        bindings.append(writes.map { $0.start.map { Int64($0.attempt) } ?? none })
        bindings.append(writes.map { $0.start?.startedAt.nanosecondsSinceEpoch ?? none })
        bindings.append(writes.map { $0.ending?.runID ?? none })
        bindings.append(writes.map { $0.ending.map { Int64($0.attempt) } ?? none })
        bindings.append(none)
        bindings.append(instance)
        bindings.append(claimSeconds)
        bindings.append(writes.map { rowOwner(of: $0.stored) })
        bindings.append(rows.map { $0.plannedAt ?? none })
        bindings.append(rows.map { $0.previousWindowAt ?? none })
        let (claim, rowCondition) =
            switch condition {
            case .any: ("claimed_by = NULL, claim_until = NULL", "true")
            case .ending:
                (
                    "claimed_by = NULL, claim_until = NULL",
                    "r.running AND r.active_run_id = v.ending_run AND r.active_attempt = v.ending_attempt"
                        + " AND r.claimed_by = \(parameter(16))"
                )
            case .claimedHere:
                (
                    "claim_until = now() + make_interval(secs => \(parameter(17)))",
                    "NOT r.running AND r.claimed_by = \(parameter(16))"
                )
            }
        let none15 = parameter(15)
        return """
            UPDATE overtime.requests AS r SET anchor = v.anchor, owed = v.owed, retry_at = NULLIF(v.retry_at, \(none15)),
                failed_attempts = v.failed_attempts, finished = v.finished,
                current_run_id = NULLIF(v.current_run_id, \(none15)), due_at = NULLIF(v.due_at, \(none15)),
                running = v.running, active_run_id = NULLIF(v.run, \(none15)),
                active_attempt = NULLIF(v.attempt, \(none15)), active_started_at = NULLIF(v.started, \(none15)),
                planned_at = NULLIF(v.planned, \(none15)), previous_window_at = NULLIF(v.previous_window, \(none15)),
                \(claim)
            FROM unnest(\((1...14).map { parameter($0) + Self.arrayTypes[$0 - 1] }.joined(separator: ", ")),
                \(parameter(18))::text[], \(parameter(19))::bigint[], \(parameter(20))::bigint[])
                AS v(identifier, anchor, owed, retry_at, failed_attempts, finished, current_run_id, due_at, running,
                    run, attempt, started, ending_run, ending_attempt, owner, planned, previous_window)
            WHERE r.identifier = v.identifier AND r.owner = v.owner AND \(rowCondition)
            RETURNING r.identifier, r.owner, r.finished AND r.has_dependents AS linked
            """
    }

    /// The casts of the first 14 arrays ``planUpdate(_:_:_:)`` unnests.
    private static let arrayTypes = [
        "::text[]", "::bigint[]", "::bigint[]", "::bigint[]", "::bigint[]", "::boolean[]", "::bigint[]", "::bigint[]",
        "::boolean[]", "::bigint[]", "::bigint[]", "::bigint[]", "::bigint[]", "::bigint[]",
    ]

    /// Records ended attempts, each in the history of its row's owner (`owners`), all in
    /// one statement; an attempt already recorded (taken over as interrupted by another
    /// instance) is left as it is.
    private func insertHistory(
        _ records: [RunRecord], owners: [String], instance: String, _ connection: PostgresConnection
    ) throws {
        guard !records.isEmpty else { return }
        var bindings = PostgresBindings()
        let sql = historyInsert(records, owners: owners, instance: instance, &bindings)
        _ = try run(connection, PostgresQuery(unsafeSQL: sql, binds: bindings))
    }

    /// The `INSERT` ``insertHistory(_:owners:instance:_:)`` runs, its values appended to
    /// `bindings`.
    private func historyInsert(
        _ records: [RunRecord], owners: [String], instance: String, _ bindings: inout PostgresBindings
    ) -> String {
        let base = bindings.count
        func parameter(_ position: Int) -> String { "$\(base + position)" }
        let none = Self.none
        bindings.append(records.map(\.identifier))
        bindings.append(records.map(\.runID))
        bindings.append(records.map { Int64($0.attempt) })
        bindings.append(records.map(\.startedAt.nanosecondsSinceEpoch))
        bindings.append(records.map { $0.endedAt?.nanosecondsSinceEpoch ?? none })
        bindings.append(records.map(\.result.description))
        bindings.append(records.map { $0.stopReason ?? "" })
        bindings.append(records.map { $0.stopReason != nil })
        bindings.append(owners)
        bindings.append(none)
        bindings.append(instance)
        bindings.append(records.map { ByteBuffer(bytes: $0.output ?? []) })
        bindings.append(records.map { $0.output != nil })
        return """
            INSERT INTO overtime.history (identifier, run_id, attempt, started_at, ended_at, result, stop_reason, instance,
                owner, output)
            SELECT identifier, run_id, attempt, started_at, NULLIF(ended_at, \(parameter(10))),
                result, CASE WHEN has_reason THEN stop_reason END, \(parameter(11)), owner,
                CASE WHEN has_output THEN output END
            FROM unnest(\(parameter(1))::text[], \(parameter(2))::bigint[], \(parameter(3))::bigint[],
                \(parameter(4))::bigint[], \(parameter(5))::bigint[], \(parameter(6))::text[], \(parameter(7))::text[],
                \(parameter(8))::boolean[], \(parameter(9))::text[], \(parameter(12))::bytea[], \(parameter(13))::boolean[])
                AS v(identifier, run_id, attempt, started_at, ended_at, result, stop_reason, has_reason, owner, output,
                    has_output)
            ON CONFLICT (identifier, run_id, attempt) DO NOTHING
            """
    }

    /// Commits are durable when the database says so (`synchronous_commit`).
    func sync() throws(ScheduleStoreError) {}

    deinit { close() }

    func close() {
        let (renewal, listener, wasClosed) = background.withLockedValue { background in
            defer { background.closed = true }
            return (background.renewal, background.connection, background.closed)
        }
        guard !wasClosed else { return }
        background.withLockedValue { background in
            background.renewal = nil
            background.connection = nil
        }
        renewal?.cancel()
        let main = connection.withLockedValue { connection in
            defer { connection = nil }
            return connection
        }
        // Closed before the loop stops (postgres-nio asserts it); never waited for on the loop.
        let closing: [EventLoopFuture<Void>] = [listener, main].compactMap { connection in
            connection.map { $0.close() as EventLoopFuture<Void> }
        }
        if !loop.inEventLoop {
            for future in closing { try? future.wait() }
            try? group.syncShutdownGracefully()
        } else {
            group.shutdownGracefully { _ in }
        }
    }

    // MARK: Renewing claims and hearing of changes (on the event loop)

    func start(_ events: ScheduleStoreEvents) {
        background.withLockedValue { $0.events = events }
        connectBackground()
    }

    private var claimSeconds: Double { Self.seconds(configuration.claimDuration) }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// Connects the listening connection (again, after a loss, every reconnect interval).
    private func connectBackground() {
        let proceed = background.withLockedValue { background in
            guard !background.closed, background.connection == nil, !background.connecting else { return false }
            background.connecting = true
            return true
        }
        guard proceed else { return }
        let loop = self.loop
        let reconnectInterval = TimeAmount.nanoseconds(configuration.reconnectInterval.nanosecondsClamped)
        // Weakly held from the loop's callbacks: a store nobody holds any more closes (its
        // deinit), instead of listening and reconnecting for good from its own loop.
        PostgresConnection.connect(
            on: loop, configuration: configuration.connection(warn: { logger.warning("\($0)") }), id: 2, logger: logger
        ).whenComplete { [weak self] result in
            switch result {
            case .success(let connection):
                guard let self else {
                    connection.close().whenComplete { _ in }
                    return
                }
                let events = background.withLockedValue { background -> ScheduleStoreEvents? in
                    background.connecting = false
                    // Closed while connecting: this connection is nobody's.
                    guard !background.closed else { return nil }
                    background.connection = connection
                    return background.events
                }
                guard let events else {
                    connection.close().whenComplete { _ in }
                    return
                }
                connection.addListener(channel: Self.channel) { [instance] _, notification in
                    if notification.payload != instance { events.changed() }
                }
                listenConnected.record(1)
                connection.closeFuture.whenComplete { [weak self] _ in
                    guard let self else { return }
                    listenConnected.record(0)
                    let closed = background.withLockedValue { background in
                        background.connection = nil
                        return background.closed
                    }
                    guard !closed else { return }
                    logger.warning("lost the schedule database's notifications: connecting again")
                    loop.scheduleTask(in: reconnectInterval) { [weak self] in self?.connectBackground() }
                }
                // Whatever was notified while not listening: decide again.
                events.changed()
            case .failure(let error):
                guard let self else { return }
                let events = background.withLockedValue { background in
                    background.connecting = false
                    return background.closed ? nil : background.events
                }
                guard let events else { return }
                logger.warning("cannot listen to the schedule database: \(Self.describe(error))")
                loop.scheduleTask(in: reconnectInterval) { [weak self] in
                    events.changed()  // the scheduler reads the schedule again meanwhile
                    self?.connectBackground()
                }
            }
        }
    }

    /// Renews this instance's claims every third of their duration while it holds any;
    /// runs whose claims could not be renewed in time are told to stop.
    private func renewClaimsWhileHeld() {
        let every = TimeAmount.nanoseconds(configuration.claimDuration.nanosecondsClamped / 3)
        background.withLockedValue { background in
            guard background.renewal == nil, !background.closed else { return }
            background.renewal = loop.scheduleRepeatedAsyncTask(initialDelay: every, delay: every) {
                [weak self, loop] _ in
                self?.renewClaims() ?? loop.makeSucceededVoidFuture()
            }
        }
    }

    /// Nothing to renew: no timer either, so that an idle instance does not wake.
    ///
    /// NIO's epoll selector leaves its timerfd set for a cancelled task (it sets it again
    /// only for an earlier deadline), so the loop would still wake, at rest, when the
    /// renewal was due. A task that does nothing, due in a few milliseconds, moves the
    /// timerfd there; it fires while the instance is still busy, and then nothing is set.
    private func stopRenewing(_ background: inout Background) {
        guard let renewal = background.renewal else { return }
        renewal.cancel()
        background.renewal = nil
        loop.scheduleTask(in: .milliseconds(5)) {}
    }

    private func renewClaims() -> EventLoopFuture<Void> {
        let loop = self.loop
        let (connection, held) = background.withLockedValue { background in
            if background.held.isEmpty { stopRenewing(&background) }
            return (background.connection, background.held)
        }
        guard !held.isEmpty else { return loop.makeSucceededVoidFuture() }
        guard let connection else {
            stopRunsLosingClaims(held)
            return loop.makeSucceededVoidFuture()
        }
        let asked = Self.bootNanoseconds()
        let query: PostgresQuery = """
            UPDATE overtime.requests SET claim_until = now() + make_interval(secs => \(claimSeconds))
            WHERE running AND claimed_by = \(instance) RETURNING identifier
            """
        return connection.query(query, logger: logger).map { [self] result in
            let renewed = Set(result.rows.compactMap { try? $0.decode(String.self) })
            let lost = background.withLockedValue { background -> [String] in
                var lost: [String] = []
                for identifier in background.held.keys {
                    if renewed.contains(identifier) {
                        background.held[identifier] = asked
                    } else if held[identifier] != nil {
                        lost.append(identifier)
                    }
                }
                return lost
            }
            if !lost.isEmpty {
                background.withLockedValue { $0.lost.formUnion(lost) }
                lostClaims.increment(by: lost.count)
                // Taken over or cancelled elsewhere: the run must not go on here.
                background.withLockedValue { $0.events }?.claimsLapsing(lost)
            }
        }.flatMapErrorThrowing { [self] error in
            logger.warning("cannot renew claims: \(Self.describe(error))")
            stopRunsLosingClaims(held)
        }
    }

    /// The runs whose claims end within the margin without a renewal are told to stop.
    private func stopRunsLosingClaims(_ held: [String: Int64]) {
        let lapsing = Self.unsafe(held, now: Self.bootNanoseconds(), deadline: safeClaimNanoseconds)
        if !lapsing.isEmpty { lostClaims.increment(by: lapsing.count) }
        if !lapsing.isEmpty { background.withLockedValue { $0.events }?.claimsLapsing(lapsing) }
    }

    /// How long after its last renewal a claim is still safe to act under: its duration
    /// less the margin (a run stops before another instance may take it).
    private var safeClaimNanoseconds: Int64 {
        configuration.claimDuration.nanosecondsClamped - configuration.claimMargin.nanosecondsClamped
    }

    /// The runs of `held` not renewed within `deadline` nanoseconds before `now`.
    private static func unsafe(_ held: [String: Int64], now: Int64, deadline: Int64) -> [String] {
        held.filter { now - $0.value >= deadline }.map(\.key)
    }

    /// Nanoseconds on `CLOCK_BOOTTIME`: claims age while the machine sleeps too (the
    /// database's clock goes on), and a step of the wall clock does not renew them.
    static func bootNanoseconds() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_BOOTTIME, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }

    /// A pause of the process as long as the claim margin can outlast a claim.
    var stallThreshold: Duration? { configuration.claimMargin }

    /// The runs held here whose claims were taken, or not renewed within the claim's
    /// duration less its margin (the process was paused, or the database unreachable).
    func claimsNoLongerSafe() -> [String] {
        let now = Self.bootNanoseconds()
        let deadline = safeClaimNanoseconds
        return background.withLockedValue { background in
            Array(background.lost)
                + Self.unsafe(background.held, now: now, deadline: deadline)
                .filter { !background.lost.contains($0) }
        }
    }

    func isClaimHeld(_ identifier: String) -> Bool {
        let now = Self.bootNanoseconds()
        let deadline = safeClaimNanoseconds
        return background.withLockedValue { background in
            guard let renewed = background.held[identifier], !background.lost.contains(identifier) else { return false }
            return now - renewed < deadline
        }
    }

    // MARK: Access

    /// Runs `body` with the connection (connected, and its clock offset measured, first).
    private func using<T>(_ body: (PostgresConnection) throws -> T) throws(ScheduleStoreError) -> T {
        // After the close its event loop is gone: a connection made on it would never answer.
        guard !background.withLockedValue({ $0.closed }) else {
            throw ScheduleStoreError("schedule database \(configuration.serverName): closed")
        }
        do {
            return try connection.withLockedValue { connection in
                if connection == nil || connection!.isClosed {
                    connection = nil
                    let made: PostgresConnection
                    do {
                        made = try answer(
                            PostgresConnection.connect(
                                on: loop, configuration: configuration.connection(warn: { logger.warning("\($0)") }),
                                id: 1, logger: logger),
                            closing: nil)
                        unreachable.withLockedValue { $0 = false }
                    } catch {
                        unreachable.withLockedValue { $0 = Self.isUnreachable(error) }
                        throw error
                    }
                    connection = made
                    try measureClockOffset(made)
                } else if remeasureClock.withLockedValue({ $0 }) {
                    try measureClockOffset(connection!)
                }
                if !schemaReady.withLockedValue({ $0 }) { try migrate(connection!) }
                return try body(connection!)
            }
        } catch let error as ScheduleStoreError {
            throw error
        } catch {
            throw ScheduleStoreError(
                "schedule database \(configuration.serverName): \(Self.describe(error))")
        }
    }

    /// Runs `body` in one transaction; rolled back if it throws.
    private func transaction<T>(_ body: (PostgresConnection) throws -> T) throws(ScheduleStoreError) -> T {
        try using { connection in
            _ = try run(connection, "BEGIN")
            do {
                let result = try body(connection)
                _ = try run(connection, "COMMIT")
                return result
            } catch {
                if (try? run(connection, "ROLLBACK")) == nil { try? connection.close().wait() }
                throw error
            }
        }
    }

    private func run(_ connection: PostgresConnection, _ query: PostgresQuery) throws -> PostgresQueryResult {
        let started = ContinuousClock.now
        defer { roundTrips.recordNanoseconds(Int64((ContinuousClock.now - started) / .nanoseconds(1))) }
        return try answer(connection.query(query, logger: logger), closing: connection)
    }

    /// Waits for `future`, at most ``PostgresScheduleConfiguration/operationTimeout``: a
    /// server that crashed can leave a connection that never answers, and the scheduler's
    /// queue must not wait on it for good. On timeout `connection` is closed, so that the
    /// next call connects again. (Waited for here, with no timer on the event loop: one
    /// per call would wake an idle instance long after its last call.)
    private func answer<T: Sendable>(_ future: EventLoopFuture<T>, closing connection: PostgresConnection?) throws -> T
    {
        try Self.answer(future, within: configuration.operationTimeout, closing: connection)
    }

    /// Waits for `future` at most `timeout`, off its event loop; on timeout `connection` is
    /// closed and ``Unanswered`` thrown.
    static func answer<T: Sendable>(
        _ future: EventLoopFuture<T>, within timeout: Duration, closing connection: PostgresConnection?
    ) throws -> T {
        let answered = DispatchSemaphore(value: 0)
        let result = NIOLockedValueBox<Result<T, any Error>?>(nil)
        future.whenComplete { outcome in
            result.withLockedValue { $0 = outcome }
            answered.signal()
        }
        guard answered.wait(timeout: .now() + .nanoseconds(Int(timeout.nanosecondsClamped))) == .success else {
            connection?.close().whenComplete { _ in }
            throw Unanswered(seconds: seconds(timeout))
        }
        return try result.withLockedValue { $0! }.get()
    }

    /// The database's clock against the runtime's, from the middle of one round trip.
    private func measureClockOffset(_ connection: PostgresConnection) throws {
        let before = localNanoseconds()
        let database = try run(connection, "SELECT \(unescaped: Self.databaseNow)").first?.decode(Int64.self) ?? before
        let after = localNanoseconds()
        clockOffset.withLockedValue { $0 = database - (before / 2 + after / 2) }
        remeasureClock.withLockedValue { $0 = false }
    }

    private func localNanoseconds() -> Int64 { wallClock().nanosecondsSinceEpoch }

    /// `r.identifier, r.earliest_begin, …`.
    private static func prefixed(_ alias: String) -> String {
        columns.split(separator: ",").map { "\(alias).\($0.trimmingCharacters(in: .whitespacesAndNewlines))" }
            .joined(separator: ", ")
    }

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
    private static func isTLSFailure(_ error: any Error) -> Bool {
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

/// A call the database did not answer in time.
private struct Unanswered: Error, CustomStringConvertible {
    let seconds: Double
    var description: String { "no answer in \(seconds) s" }
}

extension Duration {
    /// Whole nanoseconds, clamped to `Int64`.
    var nanosecondsClamped: Int64 {
        let (seconds, attoseconds) = components
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? (seconds < 0 ? .min : .max) : product &+ attoseconds / 1_000_000_000
    }
}
