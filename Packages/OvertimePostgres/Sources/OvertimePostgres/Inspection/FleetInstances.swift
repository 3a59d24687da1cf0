// An operator's view of a fleet's instances, and retiring one for good: the per-instance
// requests of a name no process will use again would otherwise stay in the database.

import Logging
import NIOPosix
import Overtime
@_spi(ScheduleStore) import OvertimeScheduler
import PostgresNIO

/// An instance of the fleet as its database shows it: a name that per-instance requests
/// are kept under (``PostgresScheduleConfiguration/instanceName``), or whose process is
/// connected.
public struct FleetInstance: Sendable, Hashable {
    /// The instance name. For a connected instance with no per-instance requests, the
    /// name as its connections carry it: printable ASCII, cut to 54 characters.
    public let name: String
    /// Its per-instance requests still pending (repeating ones, one-shots not yet done).
    public let pendingRequests: Int
    /// Runs of its requests claimed now (their claims not ended on the database's clock).
    public let heldRuns: Int
    /// Connections to the database open under its name (`application_name`
    /// `overtime <name>`): a running process.
    public let connections: Int
    /// When an attempt of one of its requests last ended, if one did.
    public let lastRunEnded: WallClockInstant?
}

extension PostgresScheduleConfiguration {
    /// The fleet's instances: every name that per-instance requests are kept under and
    /// every name a process is connected as, in name order.
    ///
    /// - Throws: `ScheduleStoreError` when the database cannot be
    ///   reached or holds no schedule.
    public func fleetInstances() async throws(ScheduleStoreError) -> [FleetInstance] {
        try await withAdministrativeConnection { connection in
            var instances: [String: FleetInstance] = [:]
            let owners = try await connection.query(
                """
                SELECT r.owner, (count(*) FILTER (WHERE NOT r.finished))::bigint,
                    (count(*) FILTER (WHERE r.running AND r.claim_until > now()))::bigint,
                    (SELECT max(h.ended_at) FROM overtime.history h WHERE h.owner = r.owner)
                FROM overtime.requests r WHERE r.owner <> '' GROUP BY r.owner
                """, logger: Self.quietLogger)
            let connected = try await Self.connectionsByApplicationName(connection)
            for try await (name, pending, held, ended) in owners.decode((String, Int64, Int64, Int64?).self) {
                instances[name] = FleetInstance(
                    name: name, pendingRequests: Int(pending), heldRuns: Int(held),
                    connections: connected[Self.applicationName(of: name)] ?? 0,
                    lastRunEnded: ended.map(WallClockInstant.init(nanosecondsSinceEpoch:)))
            }
            let named = Set(instances.values.map { Self.applicationName(of: $0.name) })
            for (application, count) in connected where !named.contains(application) {
                let name = String(application.dropFirst(Self.applicationNamePrefix.count))
                instances[name] = FleetInstance(
                    name: name, pendingRequests: 0, heldRuns: 0, connections: count, lastRunEnded: nil)
            }
            return instances.values.sorted { $0.name < $1.name }
        }
    }

    /// Removes the per-instance requests of `name`, an instance retired for good (a
    /// container's old host name, a decommissioned machine); its history stays. Returns
    /// how many requests were removed.
    ///
    /// - Throws: `ScheduleStoreError`, removing nothing, when `name`
    ///   is empty (the fleet's shared requests), when a process is connected under
    ///   `name`, when a run of its requests is still claimed (a process that just died:
    ///   its claim ends within ``claimDuration``), or when the database cannot be
    ///   reached.
    @discardableResult
    public func retireInstance(_ name: String) async throws(ScheduleStoreError) -> Int {
        guard !name.isEmpty else {
            throw ScheduleStoreError("an instance name is needed: the empty name holds the fleet's shared requests")
        }
        return try await withAdministrativeConnection { connection in
            _ = try await connection.query("BEGIN", logger: Self.quietLogger)
            do {
                let removed = try await Self.retire(name, connection)
                _ = try await connection.query("COMMIT", logger: Self.quietLogger)
                return removed
            } catch {
                _ = try? await connection.query("ROLLBACK", logger: Self.quietLogger)
                throw error
            }
        }
    }

    private static func retire(_ name: String, _ connection: PostgresConnection) async throws -> Int {
        let open = try await connectionsByApplicationName(connection)[applicationName(of: name)] ?? 0
        guard open == 0 else {
            throw ScheduleStoreError(
                "instance '\(name)' is running: \(open) connection\(open == 1 ? "" : "s") to the database carry its"
                    + " name ('\(applicationName(of: name))'); stop it before retiring it")
        }
        let held = try await connection.query(
            """
            SELECT identifier, coalesce(claimed_by, ''), claim_until::text FROM overtime.requests
            WHERE owner = \(name) AND running AND claim_until > now() ORDER BY identifier FOR UPDATE
            """, logger: quietLogger)
        var claims: [String] = []
        for try await (identifier, holder, until) in held.decode((String, String, String).self) {
            claims.append("'\(identifier)' by \(holder) until \(until)")
        }
        guard claims.isEmpty else {
            throw ScheduleStoreError(
                "instance '\(name)' still holds claims (\(claims.joined(separator: ", "))): a process that has just"
                    + " ended holds them until they end; try again then")
        }
        // Its handlers go with it: an inspector no longer counts on them.
        _ = try await connection.query(
            "DELETE FROM overtime.handlers WHERE instance = \(name) AND to_regclass('overtime.handlers') IS NOT NULL",
            logger: quietLogger)
        let removed = try await connection.query(
            "WITH removed AS (DELETE FROM overtime.requests WHERE owner = \(name) RETURNING 1) SELECT count(*) FROM removed",
            logger: quietLogger)
        var count: Int64 = 0
        for try await value in removed.decode(Int64.self) { count = value }
        return Int(count)
    }

    /// Open connections by application name, those of Overtime instances, this one's left out.
    private static func connectionsByApplicationName(_ connection: PostgresConnection) async throws -> [String: Int] {
        let rows = try await connection.query(
            """
            SELECT application_name, count(*) FROM pg_stat_activity
            WHERE starts_with(application_name, \(applicationNamePrefix)) AND pid <> pg_backend_pid()
            GROUP BY application_name
            """, logger: quietLogger)
        var connected: [String: Int] = [:]
        for try await (name, count) in rows.decode((String, Int64).self) { connected[name] = Int(count) }
        return connected
    }

    private static let quietLogger = Logger(label: "overtime.fleet.admin") { _ in SwiftLogNoOpLogHandler() }

    /// Runs `body` on a connection of its own, on an event loop of its own; both closed
    /// after.
    private func withAdministrativeConnection<T: Sendable>(
        _ body: @Sendable (PostgresConnection) async throws -> T
    ) async throws(ScheduleStoreError) -> T {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let result: Result<T, ScheduleStoreError>
        do {
            // Not named as an instance: an operator's connection is not one of the fleet's.
            var configuration = self.connection()
            configuration.options.additionalStartupParameters = [("application_name", "overtime-admin")]
            let connection = try await PostgresConnection.connect(
                on: group.next(), configuration: configuration, id: 3, logger: Self.quietLogger)
            do {
                result = .success(try await body(connection))
            } catch {
                result = .failure(describe(error))
            }
            try? await connection.close()
        } catch {
            result = .failure(describe(error))
        }
        try? await group.shutdownGracefully()
        return try result.get()
    }

    private func describe(_ error: any Error) -> ScheduleStoreError {
        if let error = error as? ScheduleStoreError { return error }
        if let error = error as? PSQLError, error.serverInfo?[.sqlState] == "42P01" {  // undefined_table
            return ScheduleStoreError(
                "schedule database \(host):\(port)/\(database ?? username) holds no Overtime schedule (schema overtime):"
                    + " no instance has connected to it yet")
        }
        return ScheduleStoreError("schedule database \(host):\(port): \(PostgresScheduleStore.describe(error))")
    }
}
