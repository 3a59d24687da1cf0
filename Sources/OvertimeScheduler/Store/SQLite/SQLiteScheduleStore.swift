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
/// named. Runs found in progress (the process ended while they ran) are marked interrupted,
/// and the requests counted by state (which the overview reads) are counted again, with a
/// warning, when they are not those of the rows (another program wrote to the file).
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
    static let schemaVersion = 24
    /// Overtime's mark in the SQLite header (`application_id`): "OTSC".
    static let applicationID: Int64 = 0x4F54_5343
    /// The tables this schema has (and had; `grdb_migrations` from builds that migrated
    /// with GRDB): a database holding any other is not ours.
    static let tables: Set<String> = [
        "requests", "runs", "counters", "history", "prerequisites", "waking", "handlers", "activity", "request_counts",
        "operator_actions", "lateness", "grdb_migrations",
    ]
    /// The log is checkpointed into the database once it is this large (and at the first
    /// sync after opening, when it held frames then).
    static let checkpointBytes = 8 << 20

    let path: String
    let recovery: StoreRecovery
    /// Reads and commits, one at a time.
    let database: Locked<Connection>
    /// The log's descriptor and a second connection that checkpoints it, for ``sync()``,
    /// which runs beside commits.
    let log: Locked<LogFile>
    /// One process per store: two would interleave runs and re-run each other's.
    let lock: Locked<ExclusiveFileLock?>

    /// The connection, used only under ``database``'s lock.
    final class Connection: @unchecked Sendable {
        var connection: SQLiteConnection?
        /// A request with prerequisites was written (now, or before this process): until
        /// then, asking for dependents reads nothing.
        var hasLinks = false
        /// A request that wakes the system was written (now, or is pending from before):
        /// until then, asking for the next waking start reads nothing.
        var hasWaking = false
    }

    /// The write-ahead log, used only under ``log``'s lock.
    final class LogFile: @unchecked Sendable {
        var descriptor: Int32
        var checkpointer: SQLiteConnection?
        /// The log held frames once the store was open: a process before this one wrote them
        /// and ended without copying them into the database (or the opening wrote some).
        var holdsEarlierFrames: Bool

        init(descriptor: Int32, checkpointer: SQLiteConnection?, holdsEarlierFrames: Bool) {
            self.descriptor = descriptor
            self.checkpointer = checkpointer
            self.holdsEarlierFrames = holdsEarlierFrames
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
        var recounted = false
        recovery.interruptedRuns = try Self.named(path) { () throws(SQLiteError) in
            try connection.transaction { () throws(SQLiteError) in
                recounted = try Self.recountIfDamaged(connection)
                return try Self.recoverInterruptedRuns(connection, now)
            }
        }
        if recounted {
            logger.warning(
                "schedule store: the requests counted by state were not those of the rows (another program wrote them?): counted again",
                metadata: ["path": "\(path)"])
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
        var status = stat()
        let holdsFrames = fstat(descriptor, &status) == 0 && status.st_size > 0
        log = Locked(LogFile(descriptor: descriptor, checkpointer: checkpointer, holdsEarlierFrames: holdsFrames))
    }

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

    /// Runs `body` with the connection and what it holds beside it, naming the store in
    /// its error.
    func usingHolder<T>(_ body: (Connection, SQLiteConnection) throws(SQLiteError) -> T)
        throws(ScheduleStoreError) -> T
    {
        try database.withLock { holder throws(ScheduleStoreError) in
            guard let connection = holder.connection else { throw ScheduleStoreError("schedule store \(path): closed") }
            defer { connection.endReads() }
            return try Self.named(path) { () throws(SQLiteError) in try body(holder, connection) }
        }
    }

    /// Runs `body` with the connection, naming the store in its error.
    func using<T>(_ body: (SQLiteConnection) throws(SQLiteError) -> T) throws(ScheduleStoreError) -> T {
        try database.withLock { holder throws(ScheduleStoreError) in
            guard let connection = holder.connection else { throw ScheduleStoreError("schedule store \(path): closed") }
            defer { connection.endReads() }
            return try Self.named(path) { () throws(SQLiteError) in try body(connection) }
        }
    }

    /// Names the store in an error of SQLite.
    static func named<T>(_ path: String, _ body: () throws(SQLiteError) -> T) throws(ScheduleStoreError) -> T {
        do {
            return try body()
        } catch {
            throw ScheduleStoreError("schedule store \(path): \(error)")
        }
    }
}
