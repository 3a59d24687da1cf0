// One process per spool: an exclusive lock on `<directory>/lock` (see ExclusiveFileLock).

import Overtime
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

final class SpoolLock: Sendable {
    private let lock: ExclusiveFileLock

    /// The lock file named a holder before this one: the spool was opened before.
    var wasHeldBefore: Bool { lock.wasHeldBefore }

    /// Takes the lock or throws ``SpoolError/locked(path:holder:)`` at once.
    init(directory: String) throws(SpoolError) {
        let path = directory + "/lock"
        do {
            lock = try ExclusiveFileLock(path: path)
        } catch {
            switch error {
            case .held(let holder): throw .locked(path: directory, holder: holder)
            case .foreignFile: throw .io(operation: "lock", path: path, errno: EEXIST)
            case .system(let operation, let code): throw .io(operation: operation, path: path, errno: code)
            }
        }
    }
}
