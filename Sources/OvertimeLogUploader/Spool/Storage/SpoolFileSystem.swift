// The file operations a spool is built from, as one seam: the disk (POSIX, each call the
// system's) or a volume in memory (tests, on virtual time, with no disk to wait for).
// Results are the system's: 0 or an errno, as the spool's error messages report them.

import OvertimeSupport

/// What a path names, without following a symbolic link.
package enum SpoolFileKind: Sendable {
    case file
    case directory
    case symbolicLink
    case other
}

/// The file operations a spool uses, with POSIX meaning: descriptors, `O_` flags and errno
/// results. A descriptor keeps its file across a rename or an unlink of its name.
package protocol SpoolFileSystem: AnyObject, Sendable {
    /// What `path` names, or nil when nothing is there (`lstat`).
    func kind(of path: String) -> SpoolFileKind?
    /// The size of the file at `path`, or nil when there is none (`stat`).
    func size(of path: String) -> Int?
    /// `mkdir(path, 0700)`: 0 or errno.
    func makeDirectory(_ path: String) -> Int32
    /// `mkdir -p`: nil, or the errno and the folder that could not be made.
    func makeDirectories(_ path: String) -> (errno: Int32, path: String)?
    /// `open(path, flags | O_CLOEXEC, 0600)`: a descriptor, or the errno.
    func open(_ path: String, flags: Int32) -> Result<Int32, SystemCallFailure>
    func close(_ fd: Int32)
    /// Writes every byte at the file offset (or at `position`): 0 or errno.
    func write(_ fd: Int32, _ bytes: [UInt8], at position: Int?) -> Int32
    /// `ftruncate` to `size`, the file offset moved there: 0 or errno.
    func truncate(_ fd: Int32, to size: Int) -> Int32
    /// `fdatasync` (or `fsync` when `metadata`): 0 or errno.
    func sync(_ fd: Int32, metadata: Bool) -> Int32
    /// `fsync` of a folder, making a rename or unlink in it durable: 0 or errno.
    func syncDirectory(_ path: String) -> Int32
    /// `rename`: 0 or errno.
    func rename(_ from: String, to: String) -> Int32
    /// `unlink`, its failure ignored (nothing to remove is the same as removed).
    func unlink(_ path: String)
    func readAll(_ path: String) -> Result<[UInt8], SystemCallFailure>
    func list(_ directory: String) -> Result<[String], SystemCallFailure>
    /// Takes the spool's one-process lock on `path`, held until the answer is released.
    func lock(_ path: String) throws(SpoolLockFailure) -> any SpoolLockHolding
}

/// Why a spool's lock was not taken.
package enum SpoolLockFailure: Error {
    /// Another holder has it (a process's PID, when known).
    case held(holder: Int32?)
    /// The file is there and is not a lock of ours.
    case foreignFile
    /// A system call failed.
    case system(operation: String, errno: Int32)
}

/// A spool's lock, let go when released.
package protocol SpoolLockHolding: AnyObject, Sendable {
    /// Someone held the lock before: the spool was used before.
    var wasHeldBefore: Bool { get }
}
