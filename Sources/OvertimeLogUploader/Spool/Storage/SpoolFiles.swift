import Overtime
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The file operations the spool is built from, each with a clear error, on the file
/// system the spool was opened on (see ``SpoolStorage``).
struct SpoolFiles: Sendable, Hashable {
    let system: any SpoolFileSystem

    /// The spool's files on disk.
    static let disk = SpoolFiles(system: DiskFileSystem.shared)

    /// Whether these are files on disk, which a program (libcurl) may read by path.
    var areOnDisk: Bool { system === DiskFileSystem.shared }

    static func == (lhs: SpoolFiles, rhs: SpoolFiles) -> Bool { lhs.system === rhs.system }
    func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(system)) }

    func makeDirectory(_ path: String) throws(SpoolError) {
        let failure = system.makeDirectory(path)
        if failure != 0, failure != EEXIST { throw .io(operation: "mkdir", path: path, errno: failure) }
    }

    /// Refuses a spool folder that is not ours to take: a symbolic link (never followed),
    /// something that is not a folder, or a folder holding files that make no spool (an
    /// empty folder, a spool, or a file system's `lost+found` beside nothing else is fine).
    func refuseForeignFolder(_ path: String) throws(SpoolError) {
        guard let kind = system.kind(of: path) else { return }  // made below
        guard kind != .symbolicLink else {
            throw .invalidConfiguration(
                field: "directory", reason: "\(path) is a symbolic link; a spool is never opened through one")
        }
        guard kind == .directory else {
            throw .invalidConfiguration(field: "directory", reason: "\(path) exists and is not a folder")
        }
        guard case .success(let names) = system.list(path) else { return }  // unreadable: mkdir says why
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

    /// `mkdir -p`: the folder and every missing parent (0700 for those it makes).
    func makeDirectories(_ path: String) throws(SpoolError) {
        if let failure = system.makeDirectories(path) {
            throw .io(operation: "mkdir", path: failure.path, errno: failure.errno)
        }
    }

    func open(_ path: String, flags: Int32) throws(SpoolError) -> Int32 {
        switch system.open(path, flags: flags) {
        case .success(let fd): return fd
        case .failure(let failure): throw .io(operation: "open", path: path, errno: failure.errno)
        }
    }

    func close(_ fd: Int32) {
        system.close(fd)
    }

    /// Writes every byte (at the file offset, or at `position`) or throws; on a short
    /// write the caller truncates back.
    func writeAll(_ fd: Int32, _ bytes: [UInt8], at position: Int? = nil, path: String) throws(SpoolError) {
        let failure = system.write(fd, bytes, at: position)
        if failure != 0 { throw .io(operation: position == nil ? "write" : "pwrite", path: path, errno: failure) }
    }

    func truncate(_ fd: Int32, to size: Int, path: String) throws(SpoolError) {
        let failure = system.truncate(fd, to: size)
        if failure != 0 { throw .io(operation: "ftruncate", path: path, errno: failure) }
    }

    func sync(_ fd: Int32, path: String) throws(SpoolError) {
        let failure = system.sync(fd, metadata: false)
        if failure != 0 { throw .io(operation: "fdatasync", path: path, errno: failure) }
    }

    /// fsync of a directory: makes a rename or unlink inside it durable.
    func syncDirectory(_ path: String) throws(SpoolError) {
        let failure = system.syncDirectory(path)
        if failure != 0 { throw .io(operation: "fsync", path: path, errno: failure) }
    }

    func rename(_ path: String, to target: String) throws(SpoolError) {
        let failure = system.rename(path, to: target)
        if failure != 0 { throw .io(operation: "rename", path: path, errno: failure) }
    }

    func unlink(_ path: String) {
        system.unlink(path)
    }

    /// temp file → fsync → rename → fsync(directory): after it returns, `path` holds
    /// `bytes` or (after a crash at any point) its previous content, never a mix.
    func replaceAtomically(_ path: String, with bytes: [UInt8], directory: String) throws(SpoolError) {
        let temporary = path + ".tmp"
        let fd = try open(temporary, flags: O_WRONLY | O_CREAT | O_TRUNC)
        do throws(SpoolError) {
            try writeAll(fd, bytes, path: temporary)
            let failure = system.sync(fd, metadata: true)
            if failure != 0 { throw SpoolError.io(operation: "fsync", path: temporary, errno: failure) }
        } catch {
            close(fd)
            unlink(temporary)
            throw error
        }
        close(fd)
        try rename(temporary, to: path)
        try syncDirectory(directory)
    }

    func readAll(_ path: String) throws(SpoolError) -> [UInt8] {
        switch system.readAll(path) {
        case .success(let bytes): return bytes
        case .failure(let failure): throw .io(operation: failure.operation, path: path, errno: failure.errno)
        }
    }

    func size(_ path: String) -> Int? {
        system.size(of: path)
    }

    func list(_ directory: String) throws(SpoolError) -> [String] {
        switch system.list(directory) {
        case .success(let names): return names
        case .failure(let failure): throw .io(operation: failure.operation, path: directory, errno: failure.errno)
        }
    }
}
