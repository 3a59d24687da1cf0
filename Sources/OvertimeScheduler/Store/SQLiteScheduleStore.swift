// The embedded default store: one SQLite file in write-ahead-log mode, through the
// system's libsqlite3.

import CSQLite
import Logging
import Overtime
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Requests, plans and history in one SQLite database in write-ahead-log mode. Every
/// ``commit(_:lastRunID:)`` is one transaction written to the log before it returns (a
/// crash of the process loses none of it); ``sync()`` puts every commit so far on disk
/// with one `fsync` of the log, so the scheduler syncs off its own thread and many commits
/// share one sync (what `synchronous = FULL` would do inside every commit). The log is
/// checkpointed into the database by the syncing thread, never inside a commit. The
/// file's folder is created with its parents.
///
/// Opening it checks the file (`PRAGMA quick_check`): a damaged store is moved aside
/// (`<path>.corrupt-<time>`, a number added when that name is taken, with its `-wal` and
/// `-shm`), reported at critical level and in ``StoreRecovery``, and a new one made —
/// never silently dropped. A store written by a newer schema is refused with both versions
/// named. Runs found in progress (the process ended while they ran) are marked interrupted.
///
/// It only ever takes a file that is its own. A store carries Overtime's marker in the
/// SQLite header (`PRAGMA application_id`); any other SQLite database (another program's)
/// or file is refused and left byte for byte as it was — a store of an earlier build,
/// without the marker but with only this schema's tables, is adopted. A symbolic link at
/// the path is never followed (`SQLITE_OPEN_NOFOLLOW`: a dangling one in a shared folder
/// would let another user choose where a root daemon writes). A new store is made 0600
/// (its `-wal` and `-shm` take its mode).
final class SQLiteScheduleStore: ScheduleStore {
    /// The schema this build writes and reads.
    static let schemaVersion = 11
    /// Overtime's mark in the SQLite header (`application_id`): "OTSC".
    static let applicationID: Int64 = 0x4F54_5343
    /// The tables this schema has (and had; `grdb_migrations` from builds that migrated
    /// with GRDB): a database holding any other is not ours.
    static let tables: Set<String> = [
        "requests", "runs", "counters", "history", "prerequisites", "waking", "grdb_migrations",
    ]
    /// The log is checkpointed into the database once it is this large.
    static let checkpointBytes = 8 << 20

    let path: String
    let recovery: StoreRecovery
    /// Reads and commits, one at a time.
    private let database: Locked<Connection>
    /// The log's descriptor and a second connection that checkpoints it, for ``sync()``,
    /// which runs beside commits.
    private let log: Locked<LogFile>
    /// One process per store: two would interleave runs and re-run each other's.
    private let lock: Locked<ExclusiveFileLock?>

    /// The connection, used only under ``database``'s lock.
    private final class Connection: @unchecked Sendable {
        var connection: SQLiteConnection?
        /// A request with prerequisites was written (now, or before this process): until
        /// then, asking for dependents reads nothing.
        var hasLinks = false
        /// A request that wakes the system was written (now, or is pending from before):
        /// until then, asking for the next waking start reads nothing.
        var hasWaking = false
    }

    /// The write-ahead log, used only under ``log``'s lock.
    private final class LogFile: @unchecked Sendable {
        var descriptor: Int32
        var checkpointer: SQLiteConnection?

        init(descriptor: Int32, checkpointer: SQLiteConnection?) {
            self.descriptor = descriptor
            self.checkpointer = checkpointer
        }
    }

    init(path: String, now: WallClockInstant, logger: Logger) throws(ScheduleStoreError) {
        self.path = path
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex,
            let failure = makeDirectories(String(path[..<slash]), mode: 0o755)
        {
            throw ScheduleStoreError(
                "cannot create the folder of the schedule store \(path): mkdir \(failure.path): "
                    + errnoDescription(failure.errno))
        }
        try Self.refuseLinks(path)
        let lock = try Self.lock(path)
        self.lock = Locked(lock)
        let existed = access(path, F_OK) == 0
        // Refused: what this attempt made beside the path goes again (the lock file, a new
        // empty store), so a refused file's folder is left as it was found.
        var made = true
        defer {
            if !made {
                if !existed { unlink(path) }
                if !lock.wasHeldBefore { unlink(path + ".lock") }
            }
        }
        try Self.createIfMissing(path)
        var recovery = StoreRecovery()
        let connection: SQLiteConnection
        do {
            connection = try Self.open(path)
        } catch let error as ScheduleStoreError {
            made = false
            throw error
        } catch {
            let reason = "\(error)"
            // Only a file that is ours is moved (see `isOurs`). Any other file is left as it was.
            guard Self.isOurs(path, lock: lock) else {
                made = false
                throw ScheduleStoreError(
                    "\(path) exists and is not a schedule store (\(reason)); left as it was: choose another path")
            }
            var aside = path + ".corrupt-\(now.secondsSinceEpoch)"
            var taken = 1
            while ["", "-wal", "-shm"].contains(where: { access(aside + $0, F_OK) == 0 }) {
                taken += 1
                aside = path + ".corrupt-\(now.secondsSinceEpoch)-\(taken)"  // never over an earlier copy
            }
            for suffix in ["", "-wal", "-shm"] where access(path + suffix, F_OK) == 0 {
                guard rename(path + suffix, aside + suffix) == 0 else {
                    throw ScheduleStoreError("cannot move the damaged store \(path) aside: \(errnoDescription())")
                }
            }
            logger.critical(
                "schedule store damaged: moved aside, starting empty",
                metadata: ["path": "\(path)", "moved_to": "\(aside)", "damage": "\(reason)"])
            recovery.movedAside = aside
            recovery.damage = reason
            do {
                connection = try Self.open(path)
            } catch let error as ScheduleStoreError {
                throw error
            } catch {
                throw ScheduleStoreError("cannot create the schedule store \(path): \(error)")
            }
        }
        recovery.interruptedRuns = try Self.named(path) { () throws(SQLiteError) in
            try connection.transaction { () throws(SQLiteError) in try Self.recoverInterruptedRuns(connection, now) }
        }
        self.recovery = recovery
        let descriptor = Glibc.open(path + "-wal", O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else {
            throw ScheduleStoreError("cannot open the write-ahead log of \(path): \(errnoDescription())")
        }
        let checkpointer = try? SQLiteConnection(path: path)
        let holder = Connection()
        holder.connection = connection
        holder.hasLinks = (try? connection.integer("SELECT EXISTS (SELECT 1 FROM prerequisites)")) == 1
        holder.hasWaking = (try? connection.integer("SELECT EXISTS (SELECT 1 FROM waking)")) == 1
        database = Locked(holder)
        log = Locked(LogFile(descriptor: descriptor, checkpointer: checkpointer))
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
                throw ScheduleStoreError("\(operation) \(lockPath): \(errnoDescription(code))")
            }
        }
    }

    /// Whether `path` may be moved aside: its SQLite header carries Overtime's marker, or
    /// its header is gone altogether and its lock file already named a process before this
    /// one (this store made it). A SQLite database without the marker — another program's,
    /// damaged or not — is never moved.
    private static func isOurs(_ path: String, lock: ExclusiveFileLock) -> Bool {
        let descriptor = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { return false }
        defer { Glibc.close(descriptor) }
        var header = [UInt8](repeating: 0, count: 72)
        let count = read(descriptor, &header, 72)
        guard count == 72, Array(header[0..<16]) == Array("SQLite format 3\0".utf8) else {
            return lock.wasHeldBefore
        }
        // application_id: four bytes at offset 68, big-endian.
        let marker = header[68..<72].reduce(Int64(0)) { $0 << 8 | Int64($1) }
        return marker == applicationID
    }

    /// Refuses a symbolic link at `path` (or at its log or shared-memory file).
    static func refuseLinks(_ path: String) throws(ScheduleStoreError) {
        for candidate in [path, path + "-wal", path + "-shm"] {
            var info = stat()
            if lstat(candidate, &info) == 0, info.st_mode & S_IFMT == S_IFLNK {
                throw ScheduleStoreError(
                    "\(candidate) is a symbolic link; a schedule store is never opened through one: name the file itself"
                )
            }
        }
    }

    /// Makes a missing store file empty, owner-only, before SQLite opens it (SQLite would
    /// make it readable by everyone).
    private static func createIfMissing(_ path: String) throws(ScheduleStoreError) {
        let descriptor = Glibc.open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if descriptor >= 0 {
            Glibc.close(descriptor)
        } else if errno != EEXIST {
            throw ScheduleStoreError("cannot create the schedule store \(path): \(errnoDescription())")
        }
    }

    /// Refuses a database that is not an Overtime store: another program's marker, or no
    /// marker and tables this schema never had. Read through a read-only connection, so
    /// the file is left as it was.
    static func refuseForeign(_ existing: SQLiteConnection, _ path: String) throws {
        let marker = try existing.integer("PRAGMA application_id") ?? 0
        if marker == applicationID { return }
        let names = Set(try existing.rows("SELECT name FROM sqlite_master WHERE type = 'table'") { $0.text(0) })
        let foreign = names.subtracting(tables).filter { !$0.hasPrefix("sqlite_") }
        guard marker == 0, foreign.isEmpty else {
            throw ScheduleStoreError(
                "\(path) is a SQLite database that is not an Overtime schedule store "
                    + (marker != 0
                        ? "(its application_id is \(marker))"
                        : "(it has tables \(foreign.sorted().joined(separator: ", ")))")
                    + "; left as it was: choose another path")
        }
    }

    /// Opens (creating) the database, refuses a newer schema, checks and migrates it.
    private static func open(_ path: String) throws -> SQLiteConnection {
        if access(path, F_OK) == 0 {
            // Read-only first: a store refused is left byte for byte as it was (opening it
            // for writing would already switch its journal mode).
            let existing = try SQLiteConnection(path: path, readOnly: true)
            let version = try existing.integer("PRAGMA user_version") ?? 0
            try refuseForeign(existing, path)
            existing.close()
            try refuseNewer(Int(version), path)
        }
        let connection = try SQLiteConnection(path: path)
        // Written to the log at each commit; on disk at each sync (see the type's comment).
        // A 16 MiB page cache (filled only as the store grows): runs/s at a million due
        // rose by a tenth over SQLite's 2 MiB, and 64 MiB added nothing.
        try connection.execute(
            """
            PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = 0;
            PRAGMA cache_size = -16384
            """)
        let version = try connection.integer("PRAGMA user_version") ?? 0
        try refuseNewer(Int(version), path)
        let check = try connection.rows("PRAGMA quick_check") { $0.text(0) }
        guard check == ["ok"] else {
            throw ScheduleStoreError("quick_check: \(check.prefix(3).joined(separator: "; "))")
        }
        for (target, migration) in migrations where target > version {
            try connection.transaction { () throws(SQLiteError) in
                try migration(connection)
                try connection.execute("PRAGMA user_version = \(target)")
            }
        }
        if try connection.integer("PRAGMA application_id") != applicationID {
            try connection.execute("PRAGMA application_id = \(applicationID)")
        }
        return connection
    }

    static func refuseNewer(_ version: Int, _ path: String) throws(ScheduleStoreError) {
        guard version > schemaVersion else { return }
        throw ScheduleStoreError(
            "the schedule store \(path) has schema version \(version); this build reads up to version "
                + "\(schemaVersion) (written by a newer Overtime: upgrade, or move the file aside)")
    }

    /// Versioned migrations, each in its own transaction with the `user_version` it reaches
    /// (which older builds check).
    private static var migrations: [(Int64, (SQLiteConnection) throws(SQLiteError) -> Void)] {
        [
            (
                1,
                { connection throws(SQLiteError) in
                    try connection.execute(
                        """
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
                        """)
                }
            ),
            (
                2,
                { connection throws(SQLiteError) in
                    try connection.execute("ALTER TABLE requests ADD COLUMN requirements TEXT NOT NULL DEFAULT ''")
                }
            ),
            (
                3,
                { connection throws(SQLiteError) in
                    // The store becomes the index of due times: the scheduler keeps no request
                    // in memory, and asks for the earliest due ones it may run.
                    try connection.execute(
                        """
                        ALTER TABLE requests ADD COLUMN due_at INTEGER;
                        ALTER TABLE requests ADD COLUMN requirement_mask INTEGER NOT NULL DEFAULT 0;
                        ALTER TABLE requests ADD COLUMN running INTEGER NOT NULL DEFAULT 0;
                        """)
                    // Read as the columns stood then (the scope came with version 6).
                    let stored = try connection.rows(
                        "SELECT \(requestColumnsBeforeScope), 'shared', NULL, NULL FROM requests", request)
                    let update = "UPDATE requests SET due_at = ?, requirement_mask = ? WHERE identifier = ?"
                    for stored in stored {
                        let statement = try connection.statement(update)
                        statement.bind(1, SchedulePlanner.nextStart(stored.plan, stored.request)?.nanosecondsSinceEpoch)
                        statement.bind(2, stored.request.requirements.mask)
                        statement.bind(3, stored.request.identifier)
                        try statement.run()
                    }
                    try connection.execute(
                        "CREATE INDEX requests_due ON requests (due_at, sequence) WHERE running = 0 AND due_at IS NOT NULL"
                    )
                }
            ),
            (
                4,
                { connection throws(SQLiteError) in
                    // A run in progress lives in its request's row (one write at its start, not
                    // two); the history gets its row when the attempt ends.
                    try connection.execute(
                        """
                        ALTER TABLE requests ADD COLUMN active_run_id INTEGER;
                        ALTER TABLE requests ADD COLUMN active_attempt INTEGER;
                        ALTER TABLE requests ADD COLUMN active_started_at INTEGER;
                        UPDATE requests SET active_run_id = runs.run_id, active_attempt = runs.attempt,
                            active_started_at = runs.started_at, running = 1
                            FROM runs WHERE runs.identifier = requests.identifier AND runs.result = 'running';
                        DELETE FROM runs WHERE result = 'running' AND identifier IN (SELECT identifier FROM requests);
                        """)
                }
            ),
            (
                5,
                { connection throws(SQLiteError) in
                    // The history keyed by what it is read by (an identifier's runs, newest run
                    // ID first): one B-tree written per ended attempt instead of a table and two
                    // indexes. The highest run ID lives in its counter alone (no scan at open),
                    // and a run the process left 'running' without a request is interrupted.
                    try connection.execute(
                        """
                        UPDATE counters SET value = MAX(value, IFNULL((SELECT MAX(run_id) FROM runs), 0),
                            IFNULL((SELECT MAX(active_run_id) FROM requests), 0)) WHERE name = 'run_id';
                        CREATE TABLE history (
                            identifier TEXT NOT NULL,
                            run_id INTEGER NOT NULL,
                            attempt INTEGER NOT NULL,
                            started_at INTEGER NOT NULL,
                            ended_at INTEGER,
                            result TEXT NOT NULL,
                            stop_reason TEXT,
                            PRIMARY KEY (identifier, run_id, attempt)
                        ) WITHOUT ROWID;
                        INSERT OR REPLACE INTO history
                            SELECT identifier, run_id, attempt, started_at,
                                CASE result WHEN 'running' THEN started_at ELSE ended_at END,
                                CASE result WHEN 'running' THEN 'interrupted' ELSE result END,
                                CASE result WHEN 'running' THEN '\(interruptedReason)' ELSE stop_reason END
                            FROM runs ORDER BY identifier, run_id, attempt;
                        DROP TABLE runs;
                        """)
                }
            ),
            (
                6,
                { connection throws(SQLiteError) in
                    try connection.execute("ALTER TABLE requests ADD COLUMN scope TEXT NOT NULL DEFAULT 'shared'")
                }
            ),
            (
                7,
                { connection throws(SQLiteError) in
                    // A retried run keeps the planned time it stands for.
                    try connection.execute("ALTER TABLE requests ADD COLUMN planned_at INTEGER")
                }
            ),
            (
                8,
                { connection throws(SQLiteError) in
                    // A calendar repetition's expression and drawn delay, a request's tags
                    // and its input, packed in one column (`details`, NULL for most
                    // requests): every update of a plan rewrites its row, and each column
                    // more costs every update. An attempt's output.
                    try connection.execute(
                        """
                        ALTER TABLE requests ADD COLUMN details BLOB;
                        ALTER TABLE history ADD COLUMN output BLOB;
                        """)
                }
            ),
            (
                9,
                { connection throws(SQLiteError) in
                    // A cancelled request stays, finished, until retention prunes it. Links of
                    // chains: which request waits on which (the request keeps the rest of its
                    // state in `details`), found by the prerequisite when it concludes.
                    try connection.execute(
                        """
                        ALTER TABLE requests ADD COLUMN cancelled_at INTEGER;
                        CREATE TABLE prerequisites (
                            prerequisite TEXT NOT NULL,
                            identifier TEXT NOT NULL,
                            PRIMARY KEY (prerequisite, identifier)
                        ) WITHOUT ROWID;
                        """)
                }
            ),
            (
                10,
                { connection throws(SQLiteError) in
                    // Which requests wake the system (each says so in `details` too): an index
                    // on `due_at` would cost every update of a plan; this table, only their
                    // own writes.
                    try connection.execute("CREATE TABLE waking (identifier TEXT PRIMARY KEY NOT NULL) WITHOUT ROWID")
                }
            ),
            (
                11,
                { connection throws(SQLiteError) in
                    // For an inspector beside the daemon: the whole history newest first, a
                    // page at a time, without a sort of every row. (One more B-tree entry per
                    // ended attempt: 1-2 % of runs/s. An index of the unfinished requests cost
                    // a tenth of runs/s and was left out: the requests are read in order.)
                    try connection.execute("CREATE INDEX history_by_run ON history (run_id, attempt)")
                }
            ),
        ]
    }

    /// Why a run found in progress at open ended.
    private static let interruptedReason = "the process ended while it ran"

    /// Runs in progress when the process ended: recorded as interrupted, their requests
    /// free to run again.
    private static func recoverInterruptedRuns(_ connection: SQLiteConnection, _ now: WallClockInstant)
        throws(SQLiteError) -> [RunRecord]
    {
        let interrupted = try connection.rows(
            """
            SELECT identifier, active_run_id, active_attempt, active_started_at FROM requests
                WHERE active_run_id IS NOT NULL
            """
        ) { row in
            RunRecord(
                identifier: row.text(0), runID: row.int64(1), attempt: row.int(2),
                startedAt: WallClockInstant(nanosecondsSinceEpoch: row.int64(3)), endedAt: now, result: .interrupted,
                stopReason: interruptedReason)
        }
        for record in interrupted { try insertRun(record, connection) }
        try connection.execute(
            """
            UPDATE requests SET running = 0, active_run_id = NULL, active_attempt = NULL, active_started_at = NULL
                WHERE running != 0 OR active_run_id IS NOT NULL
            """)
        return interrupted
    }

    // MARK: ScheduleStore

    func close() {
        log.withLock { log in
            log.checkpointer?.close()
            log.checkpointer = nil
            if log.descriptor >= 0 { Glibc.close(log.descriptor) }
            log.descriptor = -1
        }
        database.withLock { holder in
            holder.connection?.close()
            holder.connection = nil
        }
        lock.withLock { $0 = nil }
    }

    func request(_ identifier: String) throws(ScheduleStoreError) -> StoredRequest? {
        try using { connection throws(SQLiteError) in
            let statement = try connection.statement(Self.requestQuery)
            statement.bind(1, identifier)
            return try statement.step() ? Self.request(statement) : nil
        }
    }

    func pendingRequests() throws(ScheduleStoreError) -> [StoredRequest] {
        try using { connection throws(SQLiteError) in
            try connection.rows(
                "SELECT \(Self.requestColumns) FROM requests WHERE finished = 0 ORDER BY sequence", Self.request)
        }
    }

    func pendingRequests(tagged tag: String) throws(ScheduleStoreError) -> [StoredRequest] {
        try using { connection throws(SQLiteError) in
            // The pattern may also turn up in a calendar or an input: read back, the
            // request's own tags say.
            let statement = try connection.statement(
                """
                SELECT \(Self.requestColumns) FROM requests
                WHERE finished = 0 AND instr(details, CAST(? AS BLOB)) > 0 ORDER BY sequence
                """)
            statement.bind(1, RequestColumns.tagPattern(tag))
            var tagged: [StoredRequest] = []
            while try statement.step() {
                let stored = Self.request(statement)
                if stored.request.tags.contains(tag) { tagged.append(stored) }
            }
            return tagged
        }
    }

    func pendingCount() throws(ScheduleStoreError) -> Int {
        try using { connection throws(SQLiteError) in
            Int(try connection.integer("SELECT COUNT(*) FROM requests WHERE finished = 0") ?? 0)
        }
    }

    func waitingCounts(at now: WallClockInstant) throws(ScheduleStoreError) -> (enqueued: Int, blocked: Int) {
        try using { connection throws(SQLiteError) in
            // A link waiting on a prerequisite has no next start (NULL): blocked.
            let statement = try connection.statement(
                """
                SELECT COALESCE(SUM(due_at > ?1), 0), COALESCE(SUM(due_at IS NULL OR due_at <= ?1), 0)
                FROM requests WHERE finished = 0 AND running = 0
                """)
            statement.bind(1, now.nanosecondsSinceEpoch)
            guard try statement.step() else { return (0, 0) }
            return (Int(statement.int64(0)), Int(statement.int64(1)))
        }
    }

    func due(at now: WallClockInstant, unmet: Int64, limit: Int) throws(ScheduleStoreError) -> [StoredRequest] {
        try using { connection throws(SQLiteError) in
            let statement = try connection.statement(Self.dueQuery)
            statement.bind(1, now.nanosecondsSinceEpoch)
            statement.bind(2, unmet)
            statement.bind(3, limit)
            var due: [StoredRequest] = []
            while try statement.step() { due.append(Self.request(statement)) }
            return due
        }
    }

    func nextDue(after now: WallClockInstant, unmet: Int64) throws(ScheduleStoreError) -> (
        identifier: String, at: WallClockInstant
    )? {
        try using { connection throws(SQLiteError) in
            let statement = try connection.statement(Self.nextDueQuery)
            statement.bind(1, now.nanosecondsSinceEpoch)
            guard try statement.step() else { return nil }
            return (statement.text(0), WallClockInstant(nanosecondsSinceEpoch: statement.int64(1)))
        }
    }

    func dueWaiting(at now: WallClockInstant, on requirements: Int64) throws(ScheduleStoreError) -> Bool {
        try using { connection throws(SQLiteError) in
            let statement = try connection.statement(Self.dueWaitingQuery)
            statement.bind(1, now.nanosecondsSinceEpoch)
            statement.bind(2, requirements)
            return try statement.step() && statement.bool(0)
        }
    }

    func waitsForALength(after threshold: WallClockInstant) throws(ScheduleStoreError) -> [StoredRequest] {
        try using { connection throws(SQLiteError) in
            let statement = try connection.statement(
                """
                SELECT \(Self.requestColumns) FROM requests WHERE running = 0 AND due_at > ?
                    AND (retry_at IS NOT NULL OR (interval_ns IS NULL AND earliest_begin IS NULL))
                ORDER BY due_at, sequence
                """)
            statement.bind(1, threshold.nanosecondsSinceEpoch)
            var waits: [StoredRequest] = []
            while try statement.step() { waits.append(Self.request(statement)) }
            return waits
        }
    }

    func plannedAheadOfClock(_ now: WallClockInstant) throws(ScheduleStoreError) -> [StoredRequest] {
        try using { connection throws(SQLiteError) in
            let statement = try connection.statement(
                """
                SELECT \(Self.requestColumns) FROM requests WHERE finished = 0 AND ((interval_ns > 0
                    AND anchor - interval_ns - MIN(flex_ns, interval_ns) > ?1)
                    OR substr(details, 1, 1) IN (x'01', x'05'))
                ORDER BY sequence
                """)
            statement.bind(1, now.nanosecondsSinceEpoch)
            var ahead: [StoredRequest] = []
            while try statement.step() { ahead.append(Self.request(statement)) }
            return ahead
        }
    }

    func dependents(of identifiers: [String]) throws(ScheduleStoreError) -> [StoredRequest] {
        guard !identifiers.isEmpty, database.withLock({ $0.hasLinks }) else { return [] }
        return try using { connection throws(SQLiteError) in
            var found: [StoredRequest] = []
            var seen = Set<String>()
            for identifier in identifiers {
                let statement = try connection.statement(Self.dependentsQuery)
                statement.bind(1, identifier)
                while try statement.step() {
                    let stored = Self.request(statement)
                    if seen.insert(stored.request.identifier).inserted { found.append(stored) }
                }
            }
            return found
        }
    }

    func nextWakingStart() throws(ScheduleStoreError) -> WallClockInstant? {
        guard database.withLock({ $0.hasWaking }) else { return nil }
        return try using { connection throws(SQLiteError) in
            try connection.integer(
                """
                SELECT MIN(r.due_at) FROM waking w JOIN requests r ON r.identifier = w.identifier
                    WHERE r.running = 0 AND r.due_at IS NOT NULL
                """
            ).map(WallClockInstant.init(nanosecondsSinceEpoch:))
        }
    }

    func waitingOnFinishedPrerequisites() throws(ScheduleStoreError) -> [StoredRequest] {
        guard database.withLock({ $0.hasLinks }) else { return [] }
        return try using { connection throws(SQLiteError) in
            try connection.rows(
                """
                SELECT \(Self.requestColumns) FROM requests WHERE finished = 0 AND identifier IN (
                    SELECT p.identifier FROM prerequisites p LEFT JOIN requests x ON x.identifier = p.prerequisite
                    WHERE x.identifier IS NULL OR x.finished != 0)
                ORDER BY sequence
                """, Self.request)
        }
    }

    func lastRunID() throws(ScheduleStoreError) -> Int64 {
        try using { connection throws(SQLiteError) in
            // Raised in the transaction of every start, so no run ID above it exists.
            try connection.integer("SELECT value FROM counters WHERE name = 'run_id'") ?? 0
        }
    }

    func commit(_ batch: ScheduleBatch, lastRunID: Int64) throws(ScheduleStoreError) -> CommitRefusals {
        guard !batch.isEmpty else { return CommitRefusals() }
        return try usingHolder { holder, connection throws(SQLiteError) in
            try connection.transaction { () throws(SQLiteError) in
                // One scheduler owns the store: nothing else claims starts.
                var found = CommitRefusals()
                if !batch.writes.isEmpty {
                    var kinds = WrittenKinds(hadWaking: holder.hasWaking)
                    found = try Self.write(batch.writes, connection, &kinds)
                    if kinds.links { holder.hasLinks = true }
                    if kinds.waking { holder.hasWaking = true }
                }
                for end in batch.ends {
                    try Self.insertRun(end.record, connection)
                    if let plan = end.plan {
                        // An update submitted while it ran has already written the new request.
                        try Self.updatePlan(plan, start: nil, connection)
                    } else {
                        // Cancelled or replaced meanwhile: the identifier may run again.
                        let statement = try connection.statement(Self.endDetachedQuery)
                        statement.bind(1, end.record.identifier)
                        try statement.run()
                    }
                }
                for (record, plan) in batch.starts { try Self.updatePlan(plan, start: record, connection) }
                if !batch.starts.isEmpty {
                    let statement = try connection.statement(Self.lastRunIDQuery)
                    statement.bind(1, lastRunID)
                    try statement.run()
                }
                return found
            }
        }
    }

    func sync() throws(ScheduleStoreError) {
        try log.withLock { log throws(ScheduleStoreError) in
            guard log.descriptor >= 0 else { throw ScheduleStoreError("schedule store \(path): closed") }
            // fdatasync, as SQLite itself syncs: the data and the size needed to read it back,
            // not the times of the file.
            guard fdatasync(log.descriptor) == 0 else {
                throw ScheduleStoreError(
                    "schedule store \(path): fdatasync of the write-ahead log: \(errnoDescription())")
            }
            var status = stat()
            guard fstat(log.descriptor, &status) == 0, status.st_size > Self.checkpointBytes,
                let checkpointer = log.checkpointer
            else { return }
            // Copies the log into the database (and syncs it) beside the commits, which go
            // on appending; the log starts over at the next commit once all of it is copied.
            do {
                try checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)")
            } catch {
                throw ScheduleStoreError("schedule store \(path): checkpoint: \(error)")
            }
        }
    }

    /// Request writes, new rows numbered in submission order. Returns the conditional
    /// inserts that kept a pending request or replaced a finished one.
    private static func write(_ writes: [RequestWrite], _ connection: SQLiteConnection, _ kinds: inout WrittenKinds)
        throws(SQLiteError) -> CommitRefusals
    {
        let read = try connection.statement(sequenceQuery)
        var sequence = try read.step() ? read.int64(0) : 0
        var found = CommitRefusals()
        for write in writes {
            switch write {
            case .save(let stored):
                sequence += 1
                try upsert(stored, sequence: sequence, ifAbsent: false, connection, &kinds)
            case .insertUnlessPending(let stored):
                let existing = try connection.statement(finishedQuery)
                existing.bind(1, stored.request.identifier)
                if try existing.step() {
                    guard existing.bool(0) else {
                        found.kept.insert(stored.request.identifier)
                        continue
                    }
                    // A new submission: it takes its place at the end of the order.
                    let delete = try connection.statement(deleteQuery)
                    delete.bind(1, stored.request.identifier)
                    try delete.run()
                    found.resubmitted.insert(stored.request.identifier)
                }
                sequence += 1
                try upsert(stored, sequence: sequence, ifAbsent: true, connection, &kinds)
            case .cancel(let identifier, let time):
                let statement = try connection.statement(cancelQuery + " AND identifier = ?2")
                statement.bind(1, time.nanosecondsSinceEpoch)
                statement.bind(2, identifier)
                try statement.run()
            case .cancelAll(let time):
                let statement = try connection.statement(cancelQuery)
                statement.bind(1, time.nanosecondsSinceEpoch)
                try statement.run()
            }
        }
        let statement = try connection.statement(setSequenceQuery)
        statement.bind(1, sequence)
        try statement.run()
        return found
    }

    /// Writes only where a request's schedule stands, and its run in progress: `start`
    /// when one starts, none when it ended.
    private static func updatePlan(_ stored: StoredRequest, start: RunRecord?, _ connection: SQLiteConnection)
        throws(SQLiteError)
    {
        let plan = stored.plan
        let statement = try connection.statement(stored.rowID == nil ? updatePlanQuery : updatePlanByRowQuery)
        bindPlan(stored, to: statement, at: 1)
        statement.bind(7, stored.nextStart?.nanosecondsSinceEpoch)
        statement.bind(8, start != nil)
        statement.bind(9, start?.runID)
        statement.bind(10, start?.attempt)
        statement.bind(11, start?.startedAt.nanosecondsSinceEpoch)
        statement.bind(12, stored.request.identifier)
        statement.bind(13, stored.rowID)
        statement.bind(14, plan.plannedTime?.nanosecondsSinceEpoch)
        try statement.run()
    }

    /// Binds where a request's schedule stands (anchor, owed, retry at, failed attempts,
    /// finished, the run ID being retried) to six parameters from `first` on.
    private static func bindPlan(_ stored: StoredRequest, to statement: SQLiteStatement, at first: Int32) {
        let plan = stored.plan
        statement.bind(first, plan.anchor.nanosecondsSinceEpoch)
        statement.bind(first + 1, plan.owed)
        statement.bind(first + 2, plan.retryAt?.nanosecondsSinceEpoch)
        statement.bind(first + 3, plan.failedAttempts)
        statement.bind(first + 4, plan.isFinished)
        statement.bind(first + 5, stored.currentRunID)
    }

    /// The history's row of an attempt that ended.
    private static func insertRun(_ record: RunRecord, _ connection: SQLiteConnection) throws(SQLiteError) {
        let statement = try connection.statement(insertRunQuery)
        statement.bind(1, record.runID)
        statement.bind(2, record.attempt)
        statement.bind(3, record.identifier)
        statement.bind(4, record.startedAt.nanosecondsSinceEpoch)
        statement.bind(5, record.endedAt?.nanosecondsSinceEpoch)
        statement.bind(6, record.result.description)
        statement.bind(7, record.stopReason)
        statement.bind(8, record.output)
        try statement.run()
    }

    func history(identifier: String, limit: Int) throws(ScheduleStoreError) -> [RunRecord] {
        try using { connection throws(SQLiteError) in
            // The attempt in progress lives in its request's row until it ends.
            let statement = try connection.statement(
                """
                SELECT identifier, run_id, attempt, started_at, ended_at, result, stop_reason, output FROM history
                    WHERE identifier = ?1
                UNION ALL SELECT identifier, active_run_id, active_attempt, active_started_at, NULL, 'running', NULL,
                    NULL FROM requests WHERE identifier = ?1 AND active_run_id IS NOT NULL
                ORDER BY 2 DESC, 3 DESC LIMIT ?2
                """)
            statement.bind(1, identifier)
            statement.bind(2, limit)
            var records: [RunRecord] = []
            while try statement.step() { records.append(Self.record(statement)) }
            return records
        }
    }

    /// An attempt read from the columns identifier, run_id, attempt, started_at, ended_at,
    /// result, stop_reason, output.
    static func record(_ row: SQLiteStatement) -> RunRecord {
        RunRecord(
            identifier: row.text(0), runID: row.int64(1), attempt: row.int(2),
            startedAt: WallClockInstant(nanosecondsSinceEpoch: row.int64(3)),
            endedAt: row.optionalInt64(4).map(WallClockInstant.init(nanosecondsSinceEpoch:)),
            result: RunResult(stored: row.text(5)) ?? .failed, stopReason: row.optionalText(6),
            output: row.optionalBytes(7))
    }

    // MARK: Statements run for every request or run

    private static let requestQuery = SQLiteQuery(
        "SELECT \(requestColumns), cancelled_at FROM requests WHERE identifier = ?")
    private static let dependentsQuery = SQLiteQuery(
        """
        SELECT \(requestColumns) FROM requests WHERE finished = 0
            AND identifier IN (SELECT identifier FROM prerequisites WHERE prerequisite = ?)
        """)
    private static let dueQuery = SQLiteQuery(
        """
        SELECT \(requestColumns) FROM requests WHERE running = 0 AND due_at <= ? AND (requirement_mask & ?) = 0
        ORDER BY due_at, sequence LIMIT ?
        """)
    private static let nextDueQuery = SQLiteQuery(
        """
        SELECT identifier, due_at FROM requests WHERE running = 0 AND due_at > ?
        ORDER BY due_at, sequence LIMIT 1
        """)
    private static let dueWaitingQuery = SQLiteQuery(
        """
        SELECT EXISTS (SELECT 1 FROM requests
            WHERE running = 0 AND due_at <= ? AND (requirement_mask & ?) != 0)
        """)
    private static let updatePlanColumns = """
        UPDATE requests SET anchor = ?, owed = ?, retry_at = ?, failed_attempts = ?, finished = ?,
            current_run_id = ?, due_at = ?, running = ?, active_run_id = ?, active_attempt = ?,
            active_started_at = ?, planned_at = ?14
        """
    // By rowid when read with one (the identifier checked on the row found, not searched
    // for), else by identifier.
    private static let updatePlanQuery = SQLiteQuery(updatePlanColumns + " WHERE identifier = ?12")
    private static let updatePlanByRowQuery = SQLiteQuery(
        updatePlanColumns + " WHERE rowid = ?13 AND identifier = ?12")
    private static let endDetachedQuery = SQLiteQuery(
        """
        UPDATE requests SET running = 0, active_run_id = NULL, active_attempt = NULL,
            active_started_at = NULL WHERE identifier = ?
        """)
    private static let insertRunQuery = SQLiteQuery(
        """
        INSERT OR REPLACE INTO history (run_id, attempt, identifier, started_at, ended_at, result, stop_reason, output)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?)
        """)
    private static let lastRunIDQuery = SQLiteQuery("UPDATE counters SET value = MAX(value, ?) WHERE name = 'run_id'")
    private static let sequenceQuery = SQLiteQuery("SELECT value FROM counters WHERE name = 'sequence'")
    private static let setSequenceQuery = SQLiteQuery("UPDATE counters SET value = ? WHERE name = 'sequence'")
    private static let deleteQuery = SQLiteQuery("DELETE FROM requests WHERE identifier = ?")
    private static let finishedQuery = SQLiteQuery("SELECT finished FROM requests WHERE identifier = ?")
    /// Cancels the pending requests (`AND` more conditions) at `?1`.
    private static let cancelQuery = """
        UPDATE requests SET finished = 1, cancelled_at = ?1, due_at = NULL, owed = 0, retry_at = NULL
            WHERE finished = 0
        """

    // MARK: Rows

    /// Writes a request's row. A new row takes `sequence` (its submission order); an
    /// existing one keeps its own, and its run in progress. With `ifAbsent`, an existing
    /// row is left as it is.
    private static func upsert(
        _ stored: StoredRequest, sequence: Int64, ifAbsent: Bool, _ connection: SQLiteConnection,
        _ kinds: inout WrittenKinds
    ) throws(SQLiteError) {
        let row = RequestColumns(stored)
        let statement = try connection.statement(ifAbsent ? insertIfAbsentQuery : saveQuery)
        statement.bind(1, row.identifier)
        statement.bind(2, row.submittedAt)
        statement.bind(3, row.earliestBegin)
        statement.bind(4, row.intervalNanoseconds)
        statement.bind(5, row.flexNanoseconds)
        statement.bind(6, row.catchUp)
        statement.bind(7, row.catchUpMaximum)
        statement.bind(8, row.randomizedDelayNanoseconds)
        statement.bind(9, row.maximumDurationNanoseconds)
        statement.bind(10, row.backoff)
        statement.bind(11, row.initialDelayNanoseconds)
        statement.bind(12, row.maximumDelayNanoseconds)
        statement.bind(13, row.maximumAttempts)
        bindPlan(stored, to: statement, at: 14)
        statement.bind(20, row.requirements)
        statement.bind(21, row.dueAt)
        statement.bind(22, row.requirementMask)
        statement.bind(23, row.running)
        statement.bind(24, sequence)
        statement.bind(25, row.scope)
        statement.bind(26, row.plannedAt)
        statement.bind(27, RequestDetails(row).packed)
        statement.bind(28, row.cancelledAt)
        try statement.run()
        guard connection.changes > 0 else { return }
        if !stored.request.prerequisites.isEmpty {
            try writeLinks(stored, connection)
            kinds.links = true
        }
        if row.wakesSystem {
            let waking = try connection.statement("INSERT OR IGNORE INTO waking VALUES (?)")
            waking.bind(1, row.identifier)
            try waking.run()
            kinds.waking = true
        } else if kinds.hadWaking {
            // It may have woken the system before this write.
            let waking = try connection.statement("DELETE FROM waking WHERE identifier = ?")
            waking.bind(1, row.identifier)
            try waking.run()
        }
    }

    /// What a batch's request writes held, for the flags that spare queries.
    struct WrittenKinds {
        /// A request with prerequisites.
        var links = false
        /// A request that wakes the system.
        var waking = false
        /// The store held one before the batch.
        var hadWaking = false
    }

    /// Writes which prerequisites `stored` waits on (those it no longer waits on go).
    private static func writeLinks(_ stored: StoredRequest, _ connection: SQLiteConnection) throws(SQLiteError) {
        let identifier = stored.request.identifier
        let clear = try connection.statement("DELETE FROM prerequisites WHERE identifier = ?")
        clear.bind(1, identifier)
        try clear.run()
        for prerequisite in stored.chain?.waitingOn ?? [] {
            let insert = try connection.statement("INSERT OR IGNORE INTO prerequisites VALUES (?, ?)")
            insert.bind(1, prerequisite)
            insert.bind(2, identifier)
            try insert.run()
        }
    }

    private static let insertColumns = """
        INSERT INTO requests (identifier, submitted_at, earliest_begin, interval_ns, flex_ns, catch_up,
            catch_up_maximum, randomized_delay_ns, maximum_duration_ns, backoff, initial_delay_ns, maximum_delay_ns,
            maximum_attempts, anchor, owed, retry_at, failed_attempts, finished, current_run_id, requirements,
            due_at, requirement_mask, running, sequence, scope, planned_at, details, cancelled_at)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """
    private static let insertIfAbsentQuery = SQLiteQuery(insertColumns + " ON CONFLICT (identifier) DO NOTHING")
    private static let saveQuery = SQLiteQuery(
        insertColumns + """
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
                requirement_mask = excluded.requirement_mask, running = excluded.running, scope = excluded.scope,
                planned_at = excluded.planned_at, details = excluded.details, cancelled_at = excluded.cancelled_at
            """)

    /// The columns a request is read from, in the order ``request(_:)`` decodes them by
    /// position.
    /// (`cancelled_at` is added where a finished request may be read: by identifier.)
    static let requestColumns =
        requestColumnsBeforeScope + ", scope, planned_at, details"

    /// The same without the scope, which stores before schema version 6 lack.
    private static let requestColumnsBeforeScope = """
        identifier, earliest_begin, interval_ns, flex_ns, catch_up, catch_up_maximum, randomized_delay_ns,
        maximum_duration_ns, backoff, initial_delay_ns, maximum_delay_ns, maximum_attempts, requirements, anchor, owed,
        retry_at, failed_attempts, finished, submitted_at, current_run_id, running, rowid
        """

    static func request(_ row: SQLiteStatement) -> StoredRequest {
        let details = RequestDetails(packed: row.optionalBytes(24))
        return RequestColumns(
            identifier: row.text(0), earliestBegin: row.optionalInt64(1), intervalNanoseconds: row.optionalInt64(2),
            flexNanoseconds: row.optionalInt64(3), catchUp: row.text(4), catchUpMaximum: row.int(5),
            randomizedDelayNanoseconds: row.int64(6), maximumDurationNanoseconds: row.int64(7), backoff: row.text(8),
            initialDelayNanoseconds: row.int64(9), maximumDelayNanoseconds: row.int64(10), maximumAttempts: row.int(11),
            requirements: row.text(12), anchor: row.int64(13), owed: row.int(14), retryAt: row.optionalInt64(15),
            failedAttempts: row.int(16), finished: row.bool(17), submittedAt: row.int64(18),
            currentRunID: row.optionalInt64(19), running: row.bool(20), scope: row.text(22),
            plannedAt: row.optionalInt64(23), calendar: details.calendar,
            gridOffsetNanoseconds: details.gridOffsetNanoseconds, tags: details.tags, input: details.input,
            cancelledAt: row.columnCount > 25 ? row.optionalInt64(25) : nil, prerequisites: details.prerequisites,
            chain: details.chain, wakesSystem: details.wakesSystem
        ).stored(rowID: row.int64(21))
    }

    func pruneHistory(endedBefore: WallClockInstant?, keepingPerIdentifier: Int?) throws(ScheduleStoreError) -> Int {
        try using { connection throws(SQLiteError) in
            try connection.transaction { () throws(SQLiteError) -> Int in
                var deleted = 0
                if let endedBefore {
                    let old = try connection.statement("DELETE FROM history WHERE ended_at < ?")
                    old.bind(1, endedBefore.nanosecondsSinceEpoch)
                    try old.run()
                    deleted += connection.changes
                }
                if let keep = keepingPerIdentifier {
                    // The newest `keep` of each identifier stay (its primary key's order).
                    let surplus = try connection.statement(
                        """
                        DELETE FROM history WHERE (identifier, run_id, attempt) IN (
                            SELECT identifier, run_id, attempt FROM (
                                SELECT identifier, run_id, attempt, ROW_NUMBER() OVER (
                                    PARTITION BY identifier ORDER BY run_id DESC, attempt DESC) AS newest
                                FROM history)
                            WHERE newest > ?)
                        """)
                    surplus.bind(1, keep)
                    try surplus.run()
                    deleted += connection.changes
                }
                if let endedBefore {
                    // Finished, not running, and nothing of it younger left in the history.
                    let finished = try connection.statement(
                        """
                        DELETE FROM requests WHERE finished = 1 AND running = 0 AND submitted_at < ?1
                            AND IFNULL(cancelled_at, 0) < ?1
                            AND NOT EXISTS (SELECT 1 FROM history
                                WHERE history.identifier = requests.identifier AND history.ended_at >= ?1)
                        """)
                    finished.bind(1, endedBefore.nanosecondsSinceEpoch)
                    try finished.run()
                    if connection.changes > 0 {
                        try connection.execute(
                            """
                            DELETE FROM prerequisites
                                WHERE identifier NOT IN (SELECT identifier FROM requests WHERE finished = 0);
                            DELETE FROM waking WHERE identifier NOT IN (SELECT identifier FROM requests);
                            """)
                    }
                }
                return deleted
            }
        }
    }

    // MARK: Access

    /// Runs `body` with the connection and what it holds beside it, naming the store in
    /// its error.
    private func usingHolder<T>(_ body: (Connection, SQLiteConnection) throws(SQLiteError) -> T)
        throws(ScheduleStoreError) -> T
    {
        try database.withLock { holder throws(ScheduleStoreError) in
            guard let connection = holder.connection else { throw ScheduleStoreError("schedule store \(path): closed") }
            return try Self.named(path) { () throws(SQLiteError) in try body(holder, connection) }
        }
    }

    /// Runs `body` with the connection, naming the store in its error.
    private func using<T>(_ body: (SQLiteConnection) throws(SQLiteError) -> T) throws(ScheduleStoreError) -> T {
        try database.withLock { holder throws(ScheduleStoreError) in
            guard let connection = holder.connection else { throw ScheduleStoreError("schedule store \(path): closed") }
            return try Self.named(path) { () throws(SQLiteError) in try body(connection) }
        }
    }

    /// Names the store in an error of SQLite.
    private static func named<T>(_ path: String, _ body: () throws(SQLiteError) -> T) throws(ScheduleStoreError) -> T {
        do {
            return try body()
        } catch {
            throw ScheduleStoreError("schedule store \(path): \(error)")
        }
    }
}
