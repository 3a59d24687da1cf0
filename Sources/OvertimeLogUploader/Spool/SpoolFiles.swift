import Overtime
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The POSIX file operations the spool is built from, each with a clear error.
enum SpoolFiles {
    static func makeDirectory(_ path: String) throws(SpoolError) {
        if mkdir(path, 0o700) != 0, errno != EEXIST {
            throw .io(operation: "mkdir", path: path, errno: errno)
        }
    }

    /// `mkdir -p`: the folder and every missing parent (0700 for those it makes).
    /// Refuses a spool folder that is not ours to take: a symbolic link (never followed),
    /// something that is not a folder, or a folder holding files that make no spool (an
    /// empty folder, a spool, or a file system's `lost+found` beside nothing else is fine).
    static func refuseForeignFolder(_ path: String) throws(SpoolError) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }  // made below
        guard info.st_mode & S_IFMT != S_IFLNK else {
            throw .invalidConfiguration(
                field: "directory", reason: "\(path) is a symbolic link; a spool is never opened through one")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw .invalidConfiguration(field: "directory", reason: "\(path) exists and is not a folder")
        }
        guard case .success(let names) = listDirectory(path) else { return }  // unreadable: mkdir says why
        let others = names.filter { $0 != "lost+found" }
        let spoolMarks: Set<String> = ["lock", "checkpoint", "segments"]
        if !others.isEmpty, !others.contains(where: spoolMarks.contains) {
            throw .invalidConfiguration(
                field: "directory",
                reason:
                    "\(path) holds files and is not an Overtime spool (\(others.sorted().prefix(3).joined(separator: ", ")), …); left as it was: choose an empty or new folder"
            )
        }
    }

    static func makeDirectories(_ path: String) throws(SpoolError) {
        if let failure = OvertimeSupport.makeDirectories(path, mode: 0o700) {
            throw .io(operation: "mkdir", path: failure.path, errno: failure.errno)
        }
    }

    static func open(_ path: String, flags: Int32, mode: mode_t = 0o600) throws(SpoolError) -> Int32 {
        let fd = Glibc.open(path, flags | O_CLOEXEC, mode)
        guard fd >= 0 else { throw .io(operation: "open", path: path, errno: errno) }
        return fd
    }

    /// Writes every byte (at the file offset, or at `position` with `pwrite`) or throws;
    /// on a short write the caller truncates back.
    static func writeAll(_ fd: Int32, _ bytes: [UInt8], at position: Int? = nil, path: String) throws(SpoolError) {
        let failure = OvertimeSupport.writeAll(fd, bytes, to: position.map { .fileAt($0) } ?? .file)
        if failure != 0 { throw .io(operation: position == nil ? "write" : "pwrite", path: path, errno: failure) }
    }

    static func sync(_ fd: Int32, path: String) throws(SpoolError) {
        if fdatasync(fd) != 0 { throw .io(operation: "fdatasync", path: path, errno: errno) }
    }

    /// fsync of a directory: makes a rename or unlink inside it durable.
    static func syncDirectory(_ path: String) throws(SpoolError) {
        let fd = try open(path, flags: O_RDONLY | O_DIRECTORY)
        defer { close(fd) }
        if fsync(fd) != 0 { throw .io(operation: "fsync", path: path, errno: errno) }
    }

    /// temp file → fsync → rename → fsync(directory): after it returns, `path` holds
    /// `bytes` or (after a crash at any point) its previous content, never a mix.
    static func replaceAtomically(_ path: String, with bytes: [UInt8], directory: String) throws(SpoolError) {
        let temporary = path + ".tmp"
        let fd = try open(temporary, flags: O_WRONLY | O_CREAT | O_TRUNC)
        do throws(SpoolError) {
            try writeAll(fd, bytes, path: temporary)
            if fsync(fd) != 0 { throw SpoolError.io(operation: "fsync", path: temporary, errno: errno) }
        } catch {
            close(fd)
            unlink(temporary)
            throw error
        }
        close(fd)
        if rename(temporary, path) != 0 { throw .io(operation: "rename", path: temporary, errno: errno) }
        try syncDirectory(directory)
    }

    static func readAll(_ path: String) throws(SpoolError) -> [UInt8] {
        switch readWholeFile(path) {
        case .success(let bytes): return bytes
        case .failure(let failure): throw .io(operation: failure.operation, path: path, errno: failure.errno)
        }
    }

    static func size(_ path: String) -> Int? {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : nil
    }

    static func list(_ directory: String) throws(SpoolError) -> [String] {
        switch listDirectory(directory) {
        case .success(let names): return names
        case .failure(let failure): throw .io(operation: failure.operation, path: directory, errno: failure.errno)
        }
    }
}
