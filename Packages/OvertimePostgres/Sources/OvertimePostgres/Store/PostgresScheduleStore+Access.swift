// How the store's calls reach the database: one operation at a time, async on
// postgres-nio from connecting to the last answer, within a deadline each answer renews.

import Logging
import NIOConcurrencyHelpers
import NIOCore
import Overtime
@_spi(ScheduleStore) import OvertimeScheduler
import PostgresNIO

extension PostgresScheduleStore {
    /// Runs `body` with the connection (connected, its clock offset measured and the schema
    /// made first, when they need to be), as one operation: each of its answers within
    /// ``PostgresScheduleConfiguration/operationTimeout`` of the one before (of its start,
    /// the first).
    func using<T: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws(ScheduleStoreError) -> T {
        // After the close its event loop is gone: a connection made on it would never answer.
        guard !background.withLockedValue({ $0.closed }) else {
            throw ScheduleStoreError("schedule database \(configuration.serverName): closed")
        }
        do {
            return try await operation(body)
        } catch let error as ScheduleStoreError {
            throw error
        } catch {
            throw ScheduleStoreError("schedule database \(configuration.serverName): \(Self.describe(error))")
        }
    }

    /// Runs `body` in one transaction, as one operation; rolled back if it throws.
    func transaction<T: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws(ScheduleStoreError) -> T {
        try await using { connection in
            _ = try await self.run(connection, "BEGIN")
            do {
                let result = try await body(connection)
                _ = try await self.run(connection, "COMMIT")
                return result
            } catch {
                if (try? await self.run(connection, "ROLLBACK")) == nil { try? await connection.close() }
                throw error
            }
        }
    }

    /// One operation: its turn on the connection, and its deadline.
    private func operation<T: Sendable>(
        _ body: @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await operations.perform { deadline in
            let connection = try await connected(within: deadline)
            deadline.watch(connection)
            if remeasureClock.withLockedValue({ $0 }) { try await measureClockOffset(connection) }
            if !schemaReady.withLockedValue({ $0 }) { try await migrate(connection) }
            return try await body(connection)
        }
    }

    /// The connection, made (and its clock offset measured) if there is none or it closed.
    private func connected(within deadline: OperationDeadline) async throws -> PostgresConnection {
        if let current = connection.withLockedValue({ $0 }), !current.isClosed { return current }
        connection.withLockedValue { $0 = nil }
        let made: PostgresConnection
        do {
            made = try await connectAttempts.connect(
                within: deadline, on: loop,
                configuration: configuration.connection(warn: { [logger] in logger.warning("\($0)") }), id: 1,
                logger: logger)
            unreachable.withLockedValue { $0 = false }
        } catch {
            unreachable.withLockedValue { $0 = Self.isUnreachable(error) }
            throw error
        }
        connection.withLockedValue { $0 = made }
        deadline.watch(made)
        try await measureClockOffset(made)
        return made
    }

    /// Sends `query` and waits for all of its answer (no thread waits).
    func run(_ connection: PostgresConnection, _ query: PostgresQuery) async throws -> PostgresQueryResult {
        let started = ContinuousClock.now
        defer { roundTrips.recordNanoseconds(Int64((ContinuousClock.now - started) / .nanoseconds(1))) }
        let answer: EventLoopFuture<PostgresQueryResult> = connection.query(query, logger: logger)
        let result = try await answer.get()
        OperationDeadline.current?.answered()
        return result
    }

    /// The database's clock against the runtime's, from the middle of one round trip.
    func measureClockOffset(_ connection: PostgresConnection) async throws {
        let before = localNanoseconds()
        let database =
            try await run(connection, "SELECT \(unescaped: Self.databaseNow)").first?.decode(Int64.self) ?? before
        let after = localNanoseconds()
        clockOffset.withLockedValue { $0 = database - (before / 2 + after / 2) }
        remeasureClock.withLockedValue { $0 = false }
    }
}
