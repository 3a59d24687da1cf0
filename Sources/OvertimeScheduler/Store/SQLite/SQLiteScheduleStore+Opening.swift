// Opening the SQLite store safely: the lock beside it, no symbolic links, and a file that is
// not a schedule store left as it was.

import CSQLite
import Logging
import Overtime
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

extension SQLiteScheduleStore {
    /// Takes `<path>.lock`.
    static func lock(_ path: String) throws(ScheduleStoreError) -> ExclusiveFileLock {
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
    static func isOurs(_ path: String, lock: ExclusiveFileLock) -> Bool {
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
    static func createIfMissing(_ path: String) throws(ScheduleStoreError) {
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
}
