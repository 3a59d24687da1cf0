import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The spool's files on disk: each operation the system call of its name.
package final class DiskFileSystem: SpoolFileSystem {
    /// The one disk.
    package static let shared = DiskFileSystem()

    private init() {}

    package func kind(of path: String) -> SpoolFileKind? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        switch info.st_mode & S_IFMT {
        case S_IFREG: return .file
        case S_IFDIR: return .directory
        case S_IFLNK: return .symbolicLink
        default: return .other
        }
    }

    package func size(of path: String) -> Int? {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : nil
    }

    package func makeDirectory(_ path: String) -> Int32 {
        mkdir(path, 0o700) == 0 ? 0 : errno
    }

    package func makeDirectories(_ path: String) -> (errno: Int32, path: String)? {
        OvertimeSupport.makeDirectories(path, mode: 0o700)
    }

    package func open(_ path: String, flags: Int32) -> Result<Int32, SystemCallFailure> {
        let fd = Glibc.open(path, flags | O_CLOEXEC, 0o600)
        return fd >= 0 ? .success(fd) : .failure(SystemCallFailure(operation: "open", errno: errno))
    }

    package func close(_ fd: Int32) {
        _ = Glibc.close(fd)
    }

    package func write(_ fd: Int32, _ bytes: [UInt8], at position: Int?) -> Int32 {
        OvertimeSupport.writeAll(fd, bytes, to: position.map { .fileAt($0) } ?? .file)
    }

    package func truncate(_ fd: Int32, to size: Int) -> Int32 {
        guard ftruncate(fd, off_t(size)) == 0 else { return errno }
        return lseek(fd, off_t(size), SEEK_SET) < 0 ? errno : 0
    }

    package func sync(_ fd: Int32, metadata: Bool) -> Int32 {
        (metadata ? fsync(fd) : fdatasync(fd)) == 0 ? 0 : errno
    }

    package func syncDirectory(_ path: String) -> Int32 {
        let fd = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return errno }
        defer { _ = Glibc.close(fd) }
        return fsync(fd) == 0 ? 0 : errno
    }

    package func rename(_ from: String, to: String) -> Int32 {
        Glibc.rename(from, to) == 0 ? 0 : errno
    }

    package func unlink(_ path: String) {
        _ = Glibc.unlink(path)
    }

    package func readAll(_ path: String) -> Result<[UInt8], SystemCallFailure> {
        readWholeFile(path)
    }

    package func list(_ directory: String) -> Result<[String], SystemCallFailure> {
        listDirectory(directory)
    }

    package func lock(_ path: String) throws(SpoolLockFailure) -> any SpoolLockHolding {
        do {
            return try ExclusiveFileLock(path: path)
        } catch {
            switch error {
            case .held(let holder): throw .held(holder: holder)
            case .foreignFile: throw .foreignFile
            case .system(let operation, let code): throw .system(operation: operation, errno: code)
            }
        }
    }
}

extension ExclusiveFileLock: SpoolLockHolding {}
