// Indexes a migration adds to tables that may already be large, built by `CREATE INDEX
// CONCURRENTLY` on a connection of their own once the migration's transaction has
// committed, so that the fleet's writes go on while they build. Built in the transaction,
// an index holds a lock that stops every write to its table until the transaction ends,
// and a migration waiting for that lock behind a long transaction stops them from then on.
// A new schema's tables are empty: there they are built in its transaction, as before.
//
// The form of each index is the schema version it was built for, kept in `overtime.meta`
// (`index <name>`; 0 while it is left to build). One instance builds at a time: it only tries for the lock that says so
// (a session's advisory lock), since one waiting for it would hold a snapshot the build
// waits for; the others try again at each reconnect interval until the indexes are built
// (a build whose instance stopped goes on in its server process until the build ends, the
// lock held), and go on without them meanwhile, slower. A build that stops leaves an
// invalid index under a name of its own, dropped and built again by the next.

import Logging
import NIOCore
@_spi(ScheduleStore) import OvertimeScheduler
import PostgresNIO

/// An index built beside the fleet's writes (``PostgresScheduleStore/concurrentIndexes``).
struct ConcurrentIndex: Sendable {
    /// Its name, in the `overtime` schema.
    let name: String
    /// What follows `ON`: the table, the keys and the predicate.
    let definition: String
    /// The schema version whose form it has.
    let version: Int64

    /// Its row in `overtime.meta`: the version of the form built.
    var metaName: String { "index \(name)" }
    /// The name it is built under, until the one it replaces is dropped.
    var buildingName: String { "\(name)_building" }
}

extension PostgresScheduleStore {
    /// The indexes migrations from version 20 on add, in their current forms:
    /// - version 20: the unfinished requests in each order a page sorts them by
    ///   (`RequestQuery.Order`), ties by sequence as the page breaks them: a sorted page of
    ///   them reads its rows in order rather than sorting every one;
    /// - version 22 (21 before it): the unfinished requests in the order submitted, with the
    ///   identifier a key, so that a prefix's range is a condition of the index scan, checked
    ///   in each entry before the row is looked at; held as an included column (version 21),
    ///   it was checked after, and each entry a page passed over cost a visit to the table
    ///   wherever vacuum had not marked the rows all visible (just after many were submitted:
    ///   50,000 visits for a prefix whose requests are the oldest). The sequence alone orders
    ///   it, as before.
    static let concurrentIndexes: [ConcurrentIndex] =
        [RequestQuery.Order.nextRun, .attempts, .lastRun].map { order in
            ConcurrentIndex(
                name: "requests_by_\(order.description.replacingOccurrences(of: "-", with: "_"))",
                definition: "overtime.requests ((\(sortKey(order))), sequence) WHERE NOT finished", version: 20)
        } + [
            ConcurrentIndex(
                name: "requests_pending",
                definition: "overtime.requests (sequence, identifier) INCLUDE (owner) WHERE NOT finished", version: 22)
        ]

    /// In the migration's transaction, from schema version `before`: builds the indexes
    /// there when the schema is new (its tables empty), marks those an earlier build's
    /// migration made in its transaction, and returns those left to build after it.
    func indexesToBuild(_ connection: PostgresConnection, schemaBefore before: Int64) async throws
        -> [ConcurrentIndex]
    {
        var left: [ConcurrentIndex] = []
        for index in Self.concurrentIndexes {
            if before == 0 {
                _ = try await run(connection, PostgresQuery(unsafeSQL: "DROP INDEX IF EXISTS overtime.\(index.name)"))
                _ = try await run(
                    connection, PostgresQuery(unsafeSQL: "CREATE INDEX \(index.name) ON \(index.definition)"))
                try await markBuilt(index, connection)
                continue
            }
            let (built, valid) = try await state(of: index, connection)
            if valid, let built, built >= index.version { continue }
            // Unmarked, it was made by an earlier build's migration (in its transaction) if
            // the schema was already at its version; left to build, it is marked 0, so that
            // an instance migrating after this one does not take the old form for it.
            if valid, built == nil, before >= index.version {
                try await markBuilt(index, connection)
                continue
            }
            _ = try await run(
                connection,
                "INSERT INTO overtime.meta (name, value) VALUES (\(index.metaName), 0) ON CONFLICT (name) DO NOTHING")
            left.append(index)
        }
        return left
    }

    /// The version of `index`'s form as marked, and whether an index of its name exists
    /// and is valid.
    private func state(of index: ConcurrentIndex, _ connection: PostgresConnection) async throws -> (Int64?, Bool) {
        let rows = try await run(
            connection,
            """
            SELECT (SELECT value FROM overtime.meta WHERE name = \(index.metaName)),
                coalesce((SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(\("overtime." + index.name))),
                    false)
            """)
        return try rows.first.map { try $0.decode((Int64?, Bool).self) } ?? (nil, false)
    }

    private func markBuilt(_ index: ConcurrentIndex, _ connection: PostgresConnection) async throws {
        _ = try await run(
            connection,
            """
            INSERT INTO overtime.meta (name, value) VALUES (\(index.metaName), \(index.version))
            ON CONFLICT (name) DO UPDATE SET value = excluded.value
            """)
    }

    /// Builds `indexes`, one after another, on a connection of their own, unless one build
    /// is under way here; says each one built, and a failure (they are built at the next
    /// open). While another instance builds them, tries again at each reconnect interval.
    /// The store's calls go on meanwhile.
    func buildConcurrently(_ indexes: [ConcurrentIndex]) {
        guard !indexes.isEmpty else { return }
        let start = background.withLockedValue { background in
            guard !background.closed, !background.indexBuild else { return false }
            background.indexBuild = true
            return true
        }
        guard start else { return }
        // On the store's loop, as its operations: no thread of Swift's global executor.
        Task(executorPreference: operations.executor) { [self] in
            let outcome: Build
            do {
                outcome = try await build(indexes)
            } catch {
                outcome = .ended
                if !background.withLockedValue({ $0.closed }) {
                    logger.warning(
                        "schedule database \(configuration.serverName): indexes not built yet (built at the next open): \(Self.describe(error))"
                    )
                }
            }
            let interval = TimeAmount.nanoseconds(configuration.reconnectInterval.nanosecondsClamped)
            background.withLockedValue { background in
                background.indexBuild = false
                guard outcome == .elsewhere, !background.closed else { return }
                background.indexRetry = loop.scheduleTask(in: interval) { [weak self] in
                    self?.buildConcurrently(indexes)
                }
            }
        }
    }

    /// How a build ended: done (the indexes built, or the store closed), or left to the
    /// instance that holds the builders' lock.
    private enum Build { case ended, elsewhere }

    /// Builds each of `indexes` not built yet, unless another instance holds the builders' lock.
    private func build(_ indexes: [ConcurrentIndex]) async throws -> Build {
        let connection = try await PostgresConnection.connect(
            on: loop, configuration: configuration.connection(warn: { [logger] in logger.warning("\($0)") }), id: 3,
            logger: logger)
        let open = background.withLockedValue { background in
            guard !background.closed else { return false }
            background.indexConnection = connection
            return true
        }
        defer {
            background.withLockedValue { if $0.indexConnection === connection { $0.indexConnection = nil } }
            connection.close().whenComplete { _ in withExtendedLifetime(connection) {} }
        }
        guard open else { return .ended }
        let locked = try await run(connection, "SELECT pg_try_advisory_lock(hashtext('overtime indexes'))")
        guard try locked.first?.decode(Bool.self) == true else { return .elsewhere }
        for index in indexes {
            let (built, valid) = try await state(of: index, connection)
            if valid, let built, built >= index.version { continue }  // by another instance meanwhile
            let started = ContinuousClock.now
            for statement in [
                "DROP INDEX CONCURRENTLY IF EXISTS overtime.\(index.buildingName)",
                "CREATE INDEX CONCURRENTLY \(index.buildingName) ON \(index.definition)",
                "DROP INDEX CONCURRENTLY IF EXISTS overtime.\(index.name)",
                "BEGIN",
                "ALTER INDEX overtime.\(index.buildingName) RENAME TO \(index.name)",
            ] {
                _ = try await run(connection, PostgresQuery(unsafeSQL: statement))
            }
            try await markBuilt(index, connection)
            _ = try await run(connection, "COMMIT")
            logger.info(
                "schedule database \(configuration.serverName): built index \(index.name) beside the fleet's writes in \(ContinuousClock.now - started)"
            )
        }
        _ = try await run(connection, "SELECT pg_advisory_unlock(hashtext('overtime indexes'))")
        return .ended
    }
}
