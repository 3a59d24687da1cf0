// The PostgreSQL store's reads: what is pending, waiting, due to wake the system, and the
// history, each of the rows this instance sees.

import Logging
import Metrics
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Overtime
@_spi(ScheduleStore) import OvertimeScheduler
import PostgresNIO

extension PostgresScheduleStore {
    func wallClock(_ local: WallClockInstant) -> WallClockInstant {
        WallClockInstant(nanosecondsSinceEpoch: local.nanosecondsSinceEpoch &+ clockOffset.withLockedValue { $0 })
    }

    func request(_ identifier: String) async throws(ScheduleStoreError) -> StoredRequest? {
        try await using { [self] connection in
            try await run(
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
    func pendingRequests() async throws(ScheduleStoreError) -> [StoredRequest] {
        try await using { [self] connection in
            try await run(
                connection,
                """
                SELECT \(unescaped: Self.columns),
                    CASE WHEN running THEN regexp_replace(claimed_by, ' [0-9]+$', '') END AS holder
                FROM overtime.requests WHERE NOT finished AND \(unescaped: visible) ORDER BY sequence
                """
            ).map { row in
                let cell = NamedCells(row)
                var stored = try Self.request(cell)
                stored.holder = try cell("holder")
                return stored
            }
        }
    }

    func pendingRequests(tagged tag: String) async throws(ScheduleStoreError) -> [StoredRequest] {
        try await using { [self] connection in
            try await run(
                connection,
                """
                SELECT \(unescaped: Self.columns),
                    CASE WHEN running THEN regexp_replace(claimed_by, ' [0-9]+$', '') END AS holder
                FROM overtime.requests WHERE NOT finished AND \(unescaped: visible)
                    AND strpos(tags, \(RequestColumns.tagPattern(tag))) > 0
                ORDER BY sequence
                """
            ).map { row in
                let cell = NamedCells(row)
                var stored = try Self.request(cell)
                stored.holder = try cell("holder")
                return stored
            }
        }
    }

    /// The candidates the index of what failed for good holds (``schemaVersion14``): those
    /// that finished without a success.
    func finishedRequests(after: String?, prefix: String?, tagged tag: String?, limit: Int)
        async throws(ScheduleStoreError) -> [StoredRequest]
    {
        let tagPattern = tag.map(RequestColumns.tagPattern)
        return try await using { [self] connection in
            // An identifier both shared and this instance's own is read as its own.
            try await run(
                connection,
                """
                SELECT DISTINCT ON (identifier COLLATE "C") \(unescaped: Self.columns) FROM overtime.requests
                WHERE finished AND cancelled_at IS NULL AND failure_candidate AND \(unescaped: visible)
                    AND (\(after)::text IS NULL OR identifier COLLATE "C" > \(after))
                    AND (\(prefix)::text IS NULL OR starts_with(identifier, \(prefix)))
                    AND (\(tagPattern)::text IS NULL OR strpos(tags, \(tagPattern)) > 0)
                ORDER BY identifier COLLATE "C", owner DESC LIMIT \(Int64(max(0, limit)))
                """
            ).map(Self.request).filter { tag.map($0.request.tags.contains) ?? true }
        }
    }

    func operatorActions(limit: Int) async throws(ScheduleStoreError) -> [OperatorAction] {
        try await using { [self] connection in
            try await run(
                connection,
                """
                SELECT at, by, action, subject, count, outcome FROM overtime.operator_actions
                ORDER BY id DESC LIMIT \(Int64(max(0, limit)))
                """
            ).map(Self.operatorAction)
        }
    }

    /// The action a row of `overtime.operator_actions` holds, read by column name.
    static func operatorAction(_ row: PostgresRow) throws -> OperatorAction {
        let cell = NamedCells(row)
        return OperatorAction(
            at: WallClockInstant(nanosecondsSinceEpoch: try cell("at")), by: try cell("by"),
            action: try cell("action"), subject: try cell("subject"), count: Int(try cell("count", as: Int64.self)),
            outcome: try cell("outcome"))
    }

    func dependents(of identifiers: [String]) async throws(ScheduleStoreError) -> [StoredRequest] {
        let asked = concludedWithDependents.withLockedValue { known in
            let asked = identifiers.filter { known.contains($0) }
            known.subtract(asked)
            return asked
        }
        guard !asked.isEmpty else { return [] }
        return try await using { [self] connection in
            try await run(
                connection,
                """
                SELECT \(unescaped: Self.columns) FROM overtime.requests WHERE NOT finished AND owner = ''
                    AND identifier IN (SELECT identifier FROM overtime.prerequisites WHERE prerequisite = ANY(\(asked)))
                ORDER BY sequence
                """
            ).map { try Self.request($0) }
        }
    }

    func nextWakingStart() async throws(ScheduleStoreError) -> WallClockInstant? {
        guard asksForWaking.withLockedValue({ $0 }) else { return nil }
        let (next, pending) = try await using { [self] connection in
            try await run(
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

    func waitingOnFinishedPrerequisites() async throws(ScheduleStoreError) -> [StoredRequest] {
        try await using { [self] connection in
            try await run(
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

    func waitingCounts(at now: WallClockInstant) async throws(ScheduleStoreError) -> (enqueued: Int, blocked: Int) {
        try await using { [self] connection in
            // A link waiting on a prerequisite has no next start (NULL): blocked.
            let counts =
                try await run(
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

    func pendingCount() async throws(ScheduleStoreError) -> Int {
        try await using { [self] connection in
            Int(
                try await run(
                    connection,
                    "SELECT count(*) FROM overtime.requests WHERE NOT finished AND \(unescaped: visible)"
                ).first?.decode(Int64.self) ?? 0)
        }
    }

    func dueWaiting(at now: WallClockInstant, on requirements: Int64) async throws(ScheduleStoreError) -> Bool {
        try await using { [self] connection in
            try await run(
                connection,
                """
                SELECT EXISTS (SELECT 1 FROM overtime.requests WHERE NOT running AND \(unescaped: visible)
                    AND due_at <= \(now.nanosecondsSinceEpoch) AND (requirement_mask & \(requirements)) != 0)
                """
            ).first?.decode(Bool.self) ?? false
        }
    }

    func waitsForALength(after threshold: WallClockInstant) async throws(ScheduleStoreError) -> [StoredRequest] {
        try await using { [self] connection in
            try await run(
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
        // Measured again before the next operation's first statement.
        remeasureClock.withLockedValue { $0 = true }
    }

    func plannedAheadOfClock(_ now: WallClockInstant) async throws(ScheduleStoreError) -> [StoredRequest] {
        try await using { [self] connection in
            try await run(
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

    func newRunID() async throws(ScheduleStoreError) -> Int64? {
        try await using { [self] connection in
            try await run(connection, "SELECT nextval('overtime.run_ids')").first?.decode(Int64.self)
        }
    }

    func history(identifier: String, limit: Int) async throws(ScheduleStoreError) -> [RunRecord] {
        try await using { [self] connection in
            try await run(
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
}
