// The embedded default store: one SQLite file (WAL), through GRDB.

import Foundation
import GRDB
import Logging
import Overtime

/// Requests, plans and history in one SQLite database in write-ahead-log mode; every
/// change is one transaction, durable when it returns (`synchronous = FULL`).
///
/// Opening it checks the file (`PRAGMA quick_check`): a damaged store is moved aside
/// (`<path>.corrupt-<time>`, with its `-wal` and `-shm`), reported at critical level and
/// in ``StoreRecovery``, and a new one made — never silently dropped. A store written by a
/// newer schema is refused with both versions named. Runs found in progress (the process
/// ended while they ran) are marked interrupted.
final class SQLiteScheduleStore: ScheduleStore {
    /// The schema this build writes and reads.
    static let schemaVersion = 2

    let path: String
    let recovery: StoreRecovery
    private let database: DatabaseQueue
    /// One process per store: two would interleave runs and re-run each other's.
    private let lock: Locked<ExclusiveFileLock?>

    init(path: String, now: WallClockInstant, logger: Logger) throws(ScheduleStoreError) {
        self.path = path
        let lock = try Self.lock(path)
        self.lock = Locked(lock)
        var recovery = StoreRecovery()
        do {
            database = try Self.open(path)
        } catch let error as ScheduleStoreError {
            throw error
        } catch {
            let reason = "\(error)"
            // Only a file that is ours is moved: a SQLite database, or one this store made
            // before (its lock file was there). Any other file is left as it was.
            guard Self.isOurs(path, lock: lock) else {
                throw ScheduleStoreError(
                    "\(path) exists and is not a schedule store (\(reason)); left as it was: choose another path")
            }
            let aside = path + ".corrupt-\(now.secondsSinceEpoch)"
            for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
                do {
                    try FileManager.default.moveItem(atPath: path + suffix, toPath: aside + suffix)
                } catch {
                    throw ScheduleStoreError("cannot move the damaged store \(path) aside: \(error)")
                }
            }
            logger.critical(
                "schedule store damaged: moved aside, starting empty",
                metadata: ["path": "\(path)", "moved_to": "\(aside)", "damage": "\(reason)"])
            recovery.movedAside = aside
            recovery.damage = reason
            do {
                database = try Self.open(path)
            } catch let error as ScheduleStoreError {
                throw error
            } catch {
                throw ScheduleStoreError("cannot create the schedule store \(path): \(error)")
            }
        }
        recovery.interruptedRuns = try Self.transaction(database, path) { db in
            let rows = try Row.fetchAll(db, sql: "SELECT * FROM runs WHERE result = 'running'")
            try db.execute(
                sql: "UPDATE runs SET result = 'interrupted', ended_at = ?, stop_reason = ? WHERE result = 'running'",
                arguments: [now.nanosecondsSinceEpoch, "the process ended while it ran"])
            return rows.map { Self.record($0, result: .interrupted, endedAt: now) }
        }
        self.recovery = recovery
    }

    /// Takes `<path>.lock`.
    private static func lock(_ path: String) throws(ScheduleStoreError) -> ExclusiveFileLock {
        let lockPath = path + ".lock"
        do {
            return try ExclusiveFileLock(path: lockPath)
        } catch {
            switch error {
            case .held(let holder):
                throw ScheduleStoreError(
                    "the schedule store \(path) is in use by \(holder.map { "process \($0)" } ?? "another process")"
                        + " (one scheduler per store)", isLocked: true)
            case .foreignFile:
                throw ScheduleStoreError("\(lockPath) exists and is not a lock file of ours; left as it was")
            case .system(let operation, let code):
                throw ScheduleStoreError("\(operation) \(lockPath): \(String(cString: strerror(code)))")
            }
        }
    }

    /// Whether `path` may be moved aside: it starts as a SQLite database does, or its
    /// lock file already named a process before this one (this store made it).
    private static func isOurs(_ path: String, lock: ExclusiveFileLock) -> Bool {
        if let handle = FileHandle(forReadingAtPath: path) {
            defer { try? handle.close() }
            if let header = try? handle.read(upToCount: 16), header == Data("SQLite format 3\0".utf8) { return true }
        }
        return lock.wasHeldBefore
    }

    /// Opens (creating) the database, refuses a newer schema, checks and migrates it.
    private static func open(_ path: String) throws -> DatabaseQueue {
        if FileManager.default.fileExists(atPath: path) {
            // Read-only first: a store refused is left byte for byte as it was (opening it
            // for writing would already switch its journal mode).
            var readOnly = Configuration()
            readOnly.readonly = true
            let existing = try DatabaseQueue(path: path, configuration: readOnly)
            let version = try existing.read { db in try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0 }
            try existing.close()
            try refuseNewer(version, path)
        }
        var configuration = Configuration()
        configuration.journalMode = .wal
        configuration.busyMode = .timeout(5)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        let database = try DatabaseQueue(path: path, configuration: configuration)
        let (version, check) = try database.read { db in
            (
                try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0,
                try String.fetchAll(db, sql: "PRAGMA quick_check")
            )
        }
        try refuseNewer(version, path)
        guard check == ["ok"] else {
            throw ScheduleStoreError("quick_check: \(check.prefix(3).joined(separator: "; "))")
        }
        try migrator.migrate(database)
        return database
    }

    private static func refuseNewer(_ version: Int, _ path: String) throws(ScheduleStoreError) {
        guard version > schemaVersion else { return }
        throw ScheduleStoreError(
            "the schedule store \(path) has schema version \(version); this build reads up to version "
                + "\(schemaVersion) (written by a newer Overtime: upgrade, or move the file aside)")
    }

    /// Versioned migrations; each also sets `user_version`, which older builds check.
    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE requests (
                        identifier TEXT PRIMARY KEY NOT NULL,
                        submitted_at INTEGER NOT NULL,
                        earliest_begin INTEGER,
                        interval_ns INTEGER,
                        flex_ns INTEGER,
                        catch_up TEXT NOT NULL,
                        catch_up_maximum INTEGER NOT NULL,
                        randomized_delay_ns INTEGER NOT NULL,
                        maximum_duration_ns INTEGER NOT NULL,
                        backoff TEXT NOT NULL,
                        initial_delay_ns INTEGER NOT NULL,
                        maximum_delay_ns INTEGER NOT NULL,
                        maximum_attempts INTEGER NOT NULL,
                        anchor INTEGER NOT NULL,
                        owed INTEGER NOT NULL,
                        retry_at INTEGER,
                        failed_attempts INTEGER NOT NULL,
                        finished INTEGER NOT NULL,
                        current_run_id INTEGER,
                        sequence INTEGER NOT NULL
                    );
                    CREATE TABLE runs (
                        run_id INTEGER NOT NULL,
                        attempt INTEGER NOT NULL,
                        identifier TEXT NOT NULL,
                        started_at INTEGER NOT NULL,
                        ended_at INTEGER,
                        result TEXT NOT NULL,
                        stop_reason TEXT,
                        PRIMARY KEY (run_id, attempt)
                    );
                    CREATE INDEX runs_by_identifier ON runs (identifier, started_at);
                    CREATE TABLE counters (name TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL);
                    INSERT INTO counters VALUES ('run_id', 0), ('sequence', 0);
                    PRAGMA user_version = 1;
                    """)
        }
        migrator.registerMigration("v2 requirements") { db in
            try db.execute(
                sql: """
                    ALTER TABLE requests ADD COLUMN requirements TEXT NOT NULL DEFAULT '';
                    PRAGMA user_version = 2;
                    """)
        }
        return migrator
    }

    // MARK: ScheduleStore

    func close() {
        try? database.close()
        lock.withLock { $0 = nil }
    }

    func requests() throws(ScheduleStoreError) -> [StoredRequest] {
        try Self.read(database, path) { db in
            try Row.fetchAll(db, sql: "SELECT * FROM requests ORDER BY sequence").map(Self.request)
        }
    }

    func save(_ stored: StoredRequest) throws(ScheduleStoreError) {
        try Self.transaction(database, path) { db in try Self.upsert(stored, db) }
    }

    func saveAll(_ requests: [StoredRequest]) throws(ScheduleStoreError) {
        guard !requests.isEmpty else { return }
        try Self.transaction(database, path) { db in
            for stored in requests { try Self.upsert(stored, db) }
        }
    }

    func delete(identifier: String) throws(ScheduleStoreError) {
        try Self.transaction(database, path) { db in
            try db.execute(sql: "DELETE FROM requests WHERE identifier = ?", arguments: [identifier])
        }
    }

    func deleteAll() throws(ScheduleStoreError) {
        try Self.transaction(database, path) { db in try db.execute(sql: "DELETE FROM requests") }
    }

    func nextRunID() throws(ScheduleStoreError) -> Int64 {
        try Self.transaction(database, path) { db in
            try db.cachedStatement(sql: "UPDATE counters SET value = value + 1 WHERE name = 'run_id'").execute()
            return try Int64.fetchOne(db.cachedStatement(sql: "SELECT value FROM counters WHERE name = 'run_id'")) ?? 0
        }
    }

    func recordStart(_ record: RunRecord, plan: StoredRequest) throws(ScheduleStoreError) {
        try Self.transaction(database, path) { db in
            try db.cachedStatement(
                sql: """
                    INSERT OR REPLACE INTO runs (run_id, attempt, identifier, started_at, ended_at, result, stop_reason)
                    VALUES (?, ?, ?, ?, NULL, 'running', NULL)
                    """
            ).execute(arguments: [
                record.runID, record.attempt, record.identifier, record.startedAt.nanosecondsSinceEpoch,
            ])
            try Self.upsert(plan, db)
        }
    }

    func recordEnd(_ record: RunRecord, plan: StoredRequest?) throws(ScheduleStoreError) {
        try Self.transaction(database, path) { db in
            try db.cachedStatement(
                sql: "UPDATE runs SET ended_at = ?, result = ?, stop_reason = ? WHERE run_id = ? AND attempt = ?"
            ).execute(arguments: [
                record.endedAt?.nanosecondsSinceEpoch, record.result.description, record.stopReason,
                record.runID, record.attempt,
            ])
            if let plan { try Self.upsert(plan, db) }
        }
    }

    func history(identifier: String, limit: Int) throws(ScheduleStoreError) -> [RunRecord] {
        try Self.read(database, path) { db in
            try Row.fetchAll(
                db, sql: "SELECT * FROM runs WHERE identifier = ? ORDER BY started_at DESC, attempt DESC LIMIT ?",
                arguments: [identifier, limit]
            ).map { Self.record($0, result: nil, endedAt: nil) }
        }
    }

    // MARK: Rows

    private static func upsert(_ stored: StoredRequest, _ db: Database) throws {
        let request = stored.request
        let plan = stored.plan
        let catchUp: (String, Int) =
            switch request.catchUp.kind {
            case .once: ("once", 1)
            case .every(let maximum): ("every", maximum)
            case .none: ("none", 0)
            }
        let existing = try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT sequence FROM requests WHERE identifier = ?"),
            arguments: [request.identifier])
        let sequence: Int64
        if let existing {
            sequence = existing
        } else {
            try db.cachedStatement(sql: "UPDATE counters SET value = value + 1 WHERE name = 'sequence'").execute()
            sequence =
                try Int64.fetchOne(db.cachedStatement(sql: "SELECT value FROM counters WHERE name = 'sequence'")) ?? 0
        }
        try db.cachedStatement(
            sql: """
                INSERT OR REPLACE INTO requests (
                    identifier, submitted_at, earliest_begin, interval_ns, flex_ns, catch_up, catch_up_maximum,
                    randomized_delay_ns, maximum_duration_ns, backoff, initial_delay_ns, maximum_delay_ns,
                    maximum_attempts, anchor, owed, retry_at, failed_attempts, finished, current_run_id, sequence,
                    requirements
                ) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """
        ).execute(arguments: [
            request.identifier, stored.submittedAt.nanosecondsSinceEpoch,
            request.earliestBegin?.nanosecondsSinceEpoch,
            request.repetition.map { $0.interval.saturatingNanoseconds },
            request.repetition.map { $0.flex.saturatingNanoseconds },
            catchUp.0, catchUp.1, request.randomizedDelay.saturatingNanoseconds,
            request.maximumDuration.saturatingNanoseconds, request.retry.backoff.description,
            request.retry.initialDelay.saturatingNanoseconds, request.retry.maximumDelay.saturatingNanoseconds,
            request.retry.maximumAttempts, plan.anchor.nanosecondsSinceEpoch, plan.owed,
            plan.retryAt?.nanosecondsSinceEpoch, plan.failedAttempts, plan.isFinished,
            stored.currentRunID, sequence, request.requirements.sorted().map(\.description).joined(separator: ","),
        ])
    }

    private static func request(_ row: Row) -> StoredRequest {
        var request = ScheduledTaskRequest(identifier: row["identifier"])
        request.earliestBegin = (row["earliest_begin"] as Int64?).map(WallClockInstant.init(nanosecondsSinceEpoch:))
        if let interval = row["interval_ns"] as Int64? {
            request.repetition = Repetition(
                every: .nanoseconds(interval), flex: .nanoseconds(row["flex_ns"] as Int64? ?? 0))
        }
        switch row["catch_up"] as String {
        case "every": request.catchUp = .every(maximum: row["catch_up_maximum"])
        case "none": request.catchUp = .none
        default: request.catchUp = .once
        }
        request.randomizedDelay = .nanoseconds(row["randomized_delay_ns"] as Int64)
        request.maximumDuration = .nanoseconds(row["maximum_duration_ns"] as Int64)
        request.retry.backoff = (row["backoff"] as String) == "linear" ? .linear : .exponential
        request.retry.initialDelay = .nanoseconds(row["initial_delay_ns"] as Int64)
        request.retry.maximumDelay = .nanoseconds(row["maximum_delay_ns"] as Int64)
        request.retry.maximumAttempts = row["maximum_attempts"]
        request.requirements = Set(
            (row["requirements"] as String).split(separator: ",").compactMap {
                Requirement(named: String($0))
            })
        let plan = PlanState(
            anchor: WallClockInstant(nanosecondsSinceEpoch: row["anchor"]), owed: row["owed"],
            retryAt: (row["retry_at"] as Int64?).map(WallClockInstant.init(nanosecondsSinceEpoch:)),
            failedAttempts: row["failed_attempts"], isFinished: row["finished"])
        return StoredRequest(
            request: request, plan: plan, submittedAt: WallClockInstant(nanosecondsSinceEpoch: row["submitted_at"]),
            currentRunID: row["current_run_id"])
    }

    private static func record(_ row: Row, result: RunResult?, endedAt: WallClockInstant?) -> RunRecord {
        RunRecord(
            identifier: row["identifier"], runID: row["run_id"], attempt: row["attempt"],
            startedAt: WallClockInstant(nanosecondsSinceEpoch: row["started_at"]),
            endedAt: endedAt ?? (row["ended_at"] as Int64?).map(WallClockInstant.init(nanosecondsSinceEpoch:)),
            result: result ?? RunResult(stored: row["result"]) ?? .failed,
            stopReason: row["stop_reason"])
    }

    // MARK: Transactions

    private static func transaction<T>(
        _ database: DatabaseQueue, _ path: String, _ body: (Database) throws -> T
    ) throws(ScheduleStoreError) -> T {
        try access(path) { try database.write(body) }
    }

    private static func read<T>(
        _ database: DatabaseQueue, _ path: String, _ body: (Database) throws -> T
    ) throws(ScheduleStoreError) -> T {
        try access(path) { try database.read(body) }
    }

    /// Runs one database access, naming the store in its error.
    private static func access<T>(_ path: String, _ body: () throws -> T) throws(ScheduleStoreError) -> T {
        do {
            return try body()
        } catch {
            throw ScheduleStoreError("schedule store \(path): \(error)")
        }
    }
}
