// One process per spool: an exclusive lock on `<directory>/lock` (on disk, see
// ExclusiveFileLock; in memory, one holder per volume and folder).

import Overtime
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

final class SpoolLock: Sendable {
    private let holding: any SpoolLockHolding

    /// The lock was held before this one: the spool was opened before.
    var wasHeldBefore: Bool { holding.wasHeldBefore }

    /// Takes the lock or throws ``SpoolError/locked(path:holder:)`` at once.
    init(directory: String, files: SpoolFiles) throws(SpoolError) {
        let path = directory + "/lock"
        do {
            holding = try files.system.lock(path)
        } catch {
            switch error {
            case .held(let holder): throw .locked(path: directory, holder: holder)
            case .foreignFile: throw .io(operation: "lock", path: path, errno: EEXIST)
            case .system(let operation, let code): throw .io(operation: operation, path: path, errno: code)
            }
        }
    }
}
