// The embedded default store: one SQLite file (WAL), through GRDB.

import Foundation
import GRDB
import Logging
import Overtime

/// Requests, plans and history in one SQLite database in write-ahead-log mode; every
/// change is one transaction, durable when it returns (`synchronous = FULL`). The file's
/// folder is created with its parents.
///
/// Opening it checks the file (`PRAGMA quick_check`): a damaged store is moved aside
/// (`<path>.corrupt-<time>`, with its `-wal` and `-shm`), reported at critical level and
/// in ``StoreRecovery``, and a new one made — never silently dropped. A store written by a
/// newer schema is refused with both versions named. Runs found in progress (the process
/// ended while they ran) are marked interrupted.
final class SQLiteScheduleStore: ScheduleStore {
    /// The schema this build writes and reads.
    static let schemaVersion = 3

    let path: String
    let recovery: StoreRecovery
    private let database: DatabaseQueue
    /// One process per store: two would interleave runs and re-run each other's.
    private let lock: Locked<ExclusiveFileLock?>

    init(path: String, now: WallClockInstant, logger: Logger) throws(ScheduleStoreError) {
        self.path = path
        let parent = (path as NSString).deletingLastPathComponent
        if !parent.isEmpty {
            do {
                try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
            } catch {
                throw ScheduleStoreError("cannot create the folder of the schedule store \(path): \(error)")
            }
        }
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
            try db.execute(sql: "UPDATE requests SET running = 0 WHERE running != 0")
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
        migrator.registerMigration("v3 due index") { db in
            // The store becomes the index of due times: the scheduler keeps no request in
            // memory, and asks for the earliest due ones it may run.
            try db.execute(
                sql: """
                    ALTER TABLE requests ADD COLUMN due_at INTEGER;
                    ALTER TABLE requests ADD COLUMN requirement_mask INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE requests ADD COLUMN running INTEGER NOT NULL DEFAULT 0;
                    """)
            for row in try Row.fetchAll(db, sql: "SELECT \(Self.requestColumns) FROM requests") {
                let stored = Self.request(row)
                try db.execute(
                    sql: "UPDATE requests SET due_at = ?, requirement_mask = ? WHERE identifier = ?",
                    arguments: [
                        SchedulePlanner.nextStart(stored.plan, stored.request)?.nanosecondsSinceEpoch,
                        stored.request.requirements.mask, stored.request.identifier,
                    ])
            }
            try db.execute(
                sql: """
                    CREATE INDEX requests_due ON requests (due_at, sequence) WHERE running = 0 AND due_at IS NOT NULL;
                    PRAGMA user_version = 3;
                    """)
        }
        return migrator
    }

    // MARK: ScheduleStore

    func close() {
        try? database.close()
        lock.withLock { $0 = nil }
    }

    func request(_ identifier: String) throws(ScheduleStoreError) -> StoredRequest? {
        try Self.read(database, path) { db in
            try Row.fetchOne(
                db.cachedStatement(sql: "SELECT \(Self.requestColumns) FROM requests WHERE identifier = ?"),
                arguments: [identifier]
            ).map(Self.request)
        }
    }

    func pendingRequests() throws(ScheduleStoreError) -> [StoredRequest] {
        try Self.read(database, path) { db in
            try Row.fetchAll(
                db, sql: "SELECT \(Self.requestColumns) FROM requests WHERE finished = 0 ORDER BY sequence"
            ).map(Self.request)
        }
    }

    func pendingCount() throws(ScheduleStoreError) -> Int {
        try Self.read(database, path) { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM requests WHERE finished = 0") ?? 0
        }
    }

    func due(at now: WallClockInstant, unmet: Int64, limit: Int) throws(ScheduleStoreError) -> [StoredRequest] {
        try Self.read(database, path) { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT \(Self.requestColumns) FROM requests WHERE running = 0 AND due_at <= ? AND (requirement_mask & ?) = 0
                        ORDER BY due_at, sequence LIMIT ?
                        """), arguments: [now.nanosecondsSinceEpoch, unmet, limit]
            ).map(Self.request)
        }
    }

    func nextDue(after now: WallClockInstant) throws(ScheduleStoreError) -> (identifier: String, at: WallClockInstant)?
    {
        try Self.read(database, path) { db in
            try Row.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT identifier, due_at FROM requests WHERE running = 0 AND due_at > ?
                        ORDER BY due_at, sequence LIMIT 1
                        """), arguments: [now.nanosecondsSinceEpoch]
            ).map { row in (row["identifier"], WallClockInstant(nanosecondsSinceEpoch: row["due_at"])) }
        }
    }

    func dueWaiting(at now: WallClockInstant, on requirements: Int64) throws(ScheduleStoreError) -> Bool {
        try Self.read(database, path) { db in
            try Bool.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT EXISTS (SELECT 1 FROM requests
                            WHERE running = 0 AND due_at <= ? AND (requirement_mask & ?) != 0)
                        """), arguments: [now.nanosecondsSinceEpoch, requirements]) ?? false
        }
    }

    func plannedAheadOfClock(_ now: WallClockInstant) throws(ScheduleStoreError) -> [StoredRequest] {
        try Self.read(database, path) { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT \(Self.requestColumns) FROM requests WHERE finished = 0 AND interval_ns > 0
                        AND anchor - interval_ns - MIN(flex_ns, interval_ns) > ? ORDER BY sequence
                    """, arguments: [now.nanosecondsSinceEpoch]
            ).map(Self.request)
        }
    }

    func lastRunID() throws(ScheduleStoreError) -> Int64 {
        try Self.read(database, path) { db in
            max(
                try Int64.fetchOne(db, sql: "SELECT value FROM counters WHERE name = 'run_id'") ?? 0,
                try Int64.fetchOne(db, sql: "SELECT MAX(run_id) FROM runs") ?? 0)
        }
    }

    func commit(_ batch: ScheduleBatch, lastRunID: Int64) throws(ScheduleStoreError) {
        guard !batch.isEmpty else { return }
        try Self.transaction(database, path) { db in
            if !batch.writes.isEmpty { try Self.write(batch.writes, db) }
            for end in batch.ends {
                let record = end.record
                try db.cachedStatement(
                    sql: "UPDATE runs SET ended_at = ?, result = ?, stop_reason = ? WHERE run_id = ? AND attempt = ?"
                ).execute(arguments: [
                    record.endedAt?.nanosecondsSinceEpoch, record.result.description, record.stopReason,
                    record.runID, record.attempt,
                ])
                if let plan = end.plan {
                    // An update submitted while it ran has already written the new request.
                    try Self.updatePlan(plan, running: false, db)
                } else {
                    // Cancelled or replaced meanwhile: the identifier may run again.
                    try db.cachedStatement(sql: "UPDATE requests SET running = 0 WHERE identifier = ?")
                        .execute(arguments: [record.identifier])
                }
            }
            for (record, plan) in batch.starts {
                try db.cachedStatement(
                    sql: """
                        INSERT OR REPLACE INTO runs (run_id, attempt, identifier, started_at, ended_at, result, stop_reason)
                        VALUES (?, ?, ?, ?, NULL, 'running', NULL)
                        """
                ).execute(arguments: [
                    record.runID, record.attempt, record.identifier, record.startedAt.nanosecondsSinceEpoch,
                ])
                try Self.updatePlan(plan, running: true, db)
            }
            if !batch.starts.isEmpty {
                try db.cachedStatement(sql: "UPDATE counters SET value = MAX(value, ?) WHERE name = 'run_id'")
                    .execute(arguments: [lastRunID])
            }
        }
    }

    /// Request writes, new rows numbered in submission order.
    private static func write(_ writes: [RequestWrite], _ db: Database) throws {
        var sequence =
            try Int64.fetchOne(db.cachedStatement(sql: "SELECT value FROM counters WHERE name = 'sequence'")) ?? 0
        for write in writes {
            switch write {
            case .save(let stored):
                sequence += 1
                try upsert(stored, sequence: sequence, ifAbsent: false, db)
            case .insertIfAbsent(let stored):
                sequence += 1
                try upsert(stored, sequence: sequence, ifAbsent: true, db)
            case .delete(let identifier):
                try db.cachedStatement(sql: "DELETE FROM requests WHERE identifier = ?").execute(arguments: [identifier]
                )
            case .deleteAll:
                try db.execute(sql: "DELETE FROM requests")
            }
        }
        try db.cachedStatement(sql: "UPDATE counters SET value = ? WHERE name = 'sequence'").execute(arguments: [
            sequence
        ])
    }

    /// Writes only where a request's schedule stands (a run's start or end changes
    /// nothing else).
    private static func updatePlan(_ stored: StoredRequest, running: Bool, _ db: Database) throws {
        let plan = stored.plan
        try db.cachedStatement(
            sql: """
                UPDATE requests SET anchor = ?, owed = ?, retry_at = ?, failed_attempts = ?, finished = ?,
                    current_run_id = ?, due_at = ?, running = ? WHERE identifier = ?
                """
        ).execute(arguments: [
            plan.anchor.nanosecondsSinceEpoch, plan.owed, plan.retryAt?.nanosecondsSinceEpoch, plan.failedAttempts,
            plan.isFinished, stored.currentRunID,
            SchedulePlanner.nextStart(plan, stored.request)?.nanosecondsSinceEpoch,
            running, stored.request.identifier,
        ])
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

    /// Writes a request's row. A new row takes `sequence` (its submission order); an
    /// existing one keeps its own. With `ifAbsent`, an existing row is left as it is.
    private static func upsert(_ stored: StoredRequest, sequence: Int64, ifAbsent: Bool, _ db: Database) throws {
        let request = stored.request
        let plan = stored.plan
        let catchUp: (String, Int) =
            switch request.catchUp.kind {
            case .once: ("once", 1)
            case .every(let maximum): ("every", maximum)
            case .none: ("none", 0)
            }
        let columns = """
            identifier, submitted_at, earliest_begin, interval_ns, flex_ns, catch_up, catch_up_maximum,
            randomized_delay_ns, maximum_duration_ns, backoff, initial_delay_ns, maximum_delay_ns,
            maximum_attempts, anchor, owed, retry_at, failed_attempts, finished, current_run_id, requirements,
            due_at, requirement_mask, running, sequence
            """
        let values = "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        let conflict =
            ifAbsent
            ? "ON CONFLICT (identifier) DO NOTHING"
            : """
            ON CONFLICT (identifier) DO UPDATE SET
                submitted_at = excluded.submitted_at, earliest_begin = excluded.earliest_begin,
                interval_ns = excluded.interval_ns, flex_ns = excluded.flex_ns, catch_up = excluded.catch_up,
                catch_up_maximum = excluded.catch_up_maximum, randomized_delay_ns = excluded.randomized_delay_ns,
                maximum_duration_ns = excluded.maximum_duration_ns, backoff = excluded.backoff,
                initial_delay_ns = excluded.initial_delay_ns, maximum_delay_ns = excluded.maximum_delay_ns,
                maximum_attempts = excluded.maximum_attempts, anchor = excluded.anchor, owed = excluded.owed,
                retry_at = excluded.retry_at, failed_attempts = excluded.failed_attempts,
                finished = excluded.finished, current_run_id = excluded.current_run_id,
                requirements = excluded.requirements, due_at = excluded.due_at,
                requirement_mask = excluded.requirement_mask, running = excluded.running
            """
        try db.cachedStatement(sql: "INSERT INTO requests (\(columns)) \(values) \(conflict)").execute(arguments: [
            request.identifier, stored.submittedAt.nanosecondsSinceEpoch,
            request.earliestBegin?.nanosecondsSinceEpoch,
            request.repetition.map { $0.interval.saturatingNanoseconds },
            request.repetition.map { $0.flex.saturatingNanoseconds },
            catchUp.0, catchUp.1, request.randomizedDelay.saturatingNanoseconds,
            request.maximumDuration.saturatingNanoseconds, request.retry.backoff.description,
            request.retry.initialDelay.saturatingNanoseconds, request.retry.maximumDelay.saturatingNanoseconds,
            request.retry.maximumAttempts, plan.anchor.nanosecondsSinceEpoch, plan.owed,
            plan.retryAt?.nanosecondsSinceEpoch, plan.failedAttempts, plan.isFinished, stored.currentRunID,
            request.requirements.sorted().map(\.description).joined(separator: ","),
            SchedulePlanner.nextStart(plan, request)?.nanosecondsSinceEpoch, request.requirements.mask,
            stored.isRunning, sequence,
        ])
    }

    /// The columns a request is read from, in the order ``request(_:)`` decodes them by
    /// position (looking columns up by name costs more than the rest of a read).
    static let requestColumns = """
        identifier, earliest_begin, interval_ns, flex_ns, catch_up, catch_up_maximum, randomized_delay_ns,
        maximum_duration_ns, backoff, initial_delay_ns, maximum_delay_ns, maximum_attempts, requirements, anchor, owed,
        retry_at, failed_attempts, finished, submitted_at, current_run_id, running
        """

    private static func request(_ row: Row) -> StoredRequest {
        var request = ScheduledTaskRequest(identifier: row[0])
        request.earliestBegin = (row[1] as Int64?).map(WallClockInstant.init(nanosecondsSinceEpoch:))
        if let interval = row[2] as Int64? {
            request.repetition = Repetition(every: .nanoseconds(interval), flex: .nanoseconds(row[3] as Int64? ?? 0))
        }
        switch row[4] as String {
        case "every": request.catchUp = .every(maximum: row[5])
        case "none": request.catchUp = .none
        default: request.catchUp = .once
        }
        request.randomizedDelay = .nanoseconds(row[6] as Int64)
        request.maximumDuration = .nanoseconds(row[7] as Int64)
        request.retry.backoff = (row[8] as String) == "linear" ? .linear : .exponential
        request.retry.initialDelay = .nanoseconds(row[9] as Int64)
        request.retry.maximumDelay = .nanoseconds(row[10] as Int64)
        request.retry.maximumAttempts = row[11]
        let requirements = row[12] as String
        if !requirements.isEmpty {
            request.requirements = Set(requirements.split(separator: ",").compactMap { Requirement(named: String($0)) })
        }
        let plan = PlanState(
            anchor: WallClockInstant(nanosecondsSinceEpoch: row[13]), owed: row[14],
            retryAt: (row[15] as Int64?).map(WallClockInstant.init(nanosecondsSinceEpoch:)), failedAttempts: row[16],
            isFinished: row[17])
        return StoredRequest(
            request: request, plan: plan, submittedAt: WallClockInstant(nanosecondsSinceEpoch: row[18]),
            currentRunID: row[19], isRunning: row[20])
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
