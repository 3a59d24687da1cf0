// A file system in memory with the POSIX meaning the spool relies on: a descriptor keeps
// its file across a rename or unlink, O_EXCL refuses a name taken, a write past the
// capacity fails with ENOSPC and writes nothing. No write is lost or torn: a volume in
// memory never crashes (crash tests use the disk).

import Overtime
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Files in memory for a spool in tests (``SpoolStorage/memory(_:)``): nothing touches the
/// disk, so a test of uploads, budgets, backoffs and dead letters runs on a `ManualClock`
/// without waiting for a file system, and a full disk is one setting away.
///
/// One volume may hold several spools (each in its own folder) and keeps their files when
/// a spool is released: open it again on the same volume to test what a restart finds.
public final class InMemorySpoolVolume: Sendable {
    private let state: Locked<VolumeState>

    /// An empty volume holding at most `capacityBytes` of file content; a write beyond it
    /// fails with `ENOSPC`, as on a full disk.
    public init(capacityBytes: Int = .max) {
        state = Locked(VolumeState(capacity: max(0, capacityBytes)))
    }

    /// How many bytes of file content it holds at most: lower it to fill the disk, raise
    /// it to make room again.
    public var capacityBytes: Int {
        get { state.withLock { $0.capacity } }
        set { state.withLock { $0.capacity = max(0, newValue) } }
    }

    /// The bytes its files hold now (a file unlinked but still open included).
    public var usedBytes: Int { state.withLock { $0.used } }
}

private struct Node {
    var bytes: [UInt8] = []
    /// Names and descriptors that refer to it: at 0 its bytes are freed.
    var references = 0
}

private struct Handle {
    let node: Int?  // nil: a folder
    let path: String
    let writable: Bool
    let appending: Bool
    var offset = 0
}

private struct VolumeState {
    var capacity: Int
    var used = 0
    var directories: Set<String> = ["/"]
    var names: [String: Int] = [:]
    var nodes: [Int: Node] = [:]
    var handles: [Int32: Handle] = [:]
    var nextNode = 0
    var nextDescriptor: Int32 = 3
    var locksHeld: Set<String> = []

    func exists(_ path: String) -> Bool { names[path] != nil || directories.contains(path) }

    mutating func release(_ node: Int) {
        nodes[node]?.references -= 1
        if let gone = nodes[node], gone.references <= 0 {
            used -= gone.bytes.count
            nodes[node] = nil
        }
    }

    mutating func makeFile(_ path: String) -> Int {
        nextNode += 1
        nodes[nextNode] = Node(references: 1)
        names[path] = nextNode
        return nextNode
    }
}

/// `path` without repeated or trailing slashes, and its folder.
private func normalized(_ path: String) -> String {
    let parts = path.split(separator: "/", omittingEmptySubsequences: true)
    return "/" + parts.joined(separator: "/")
}

private func parent(of path: String) -> String {
    guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
    return String(path[..<slash])
}

extension InMemorySpoolVolume: SpoolFileSystem {
    package func kind(of path: String) -> SpoolFileKind? {
        let path = normalized(path)
        return state.withLock { state in
            state.directories.contains(path) ? .directory : state.names[path] != nil ? .file : nil
        }
    }

    package func size(of path: String) -> Int? {
        let path = normalized(path)
        return state.withLock { state in
            if state.directories.contains(path) { return 0 }
            return state.names[path].flatMap { state.nodes[$0]?.bytes.count }
        }
    }

    package func makeDirectory(_ path: String) -> Int32 {
        let path = normalized(path)
        return state.withLock { state in
            if state.exists(path) { return EEXIST }
            guard state.directories.contains(parent(of: path)) else { return ENOENT }
            state.directories.insert(path)
            return 0
        }
    }

    package func makeDirectories(_ path: String) -> (errno: Int32, path: String)? {
        let path = normalized(path)
        return state.withLock { state in
            var built = ""
            for part in path.split(separator: "/") {
                built += "/" + part
                if state.names[built] != nil { return (ENOTDIR, built) }
                state.directories.insert(built)
            }
            return nil
        }
    }

    package func open(_ path: String, flags: Int32) -> Result<Int32, SystemCallFailure> {
        let path = normalized(path)
        let failure = { (code: Int32) in Result<Int32, SystemCallFailure>.failure(.init(operation: "open", errno: code))
        }
        return state.withLock { state in
            let access = flags & O_ACCMODE
            let writable = access == O_WRONLY || access == O_RDWR
            if state.directories.contains(path) {
                guard !writable else { return failure(EISDIR) }
                let fd = state.nextDescriptor
                state.nextDescriptor += 1
                state.handles[fd] = Handle(node: nil, path: path, writable: false, appending: false)
                return .success(fd)
            }
            if flags & O_DIRECTORY != 0 { return failure(state.names[path] == nil ? ENOENT : ENOTDIR) }
            var node = state.names[path]
            if node != nil, flags & O_CREAT != 0, flags & O_EXCL != 0 { return failure(EEXIST) }
            if node == nil {
                guard flags & O_CREAT != 0 else { return failure(ENOENT) }
                guard state.directories.contains(parent(of: path)) else { return failure(ENOENT) }
                node = state.makeFile(path)
            }
            guard let node else { return failure(ENOENT) }
            if flags & O_TRUNC != 0, writable {
                state.used -= state.nodes[node]?.bytes.count ?? 0
                state.nodes[node]?.bytes = []
            }
            state.nodes[node]?.references += 1
            let fd = state.nextDescriptor
            state.nextDescriptor += 1
            state.handles[fd] = Handle(
                node: node, path: path, writable: writable, appending: flags & O_APPEND != 0)
            return .success(fd)
        }
    }

    package func close(_ fd: Int32) {
        state.withLock { state in
            guard let handle = state.handles.removeValue(forKey: fd) else { return }
            if let node = handle.node { state.release(node) }
        }
    }

    package func write(_ fd: Int32, _ bytes: [UInt8], at position: Int?) -> Int32 {
        state.withLock { state in
            guard var handle = state.handles[fd], handle.writable, let node = handle.node,
                let size = state.nodes[node]?.bytes.count
            else { return EBADF }
            let start = position ?? (handle.appending ? size : handle.offset)
            let end = start + bytes.count
            let growth = max(0, end - size)
            guard state.used + growth <= state.capacity else { return ENOSPC }
            // In place, through the dictionary: a copy taken out and put back copied the whole
            // file on every write (20,000 appends of 200 bytes took 19 s).
            if size < end { state.nodes[node]?.bytes.append(contentsOf: repeatElement(0, count: end - size)) }
            state.nodes[node]?.bytes.replaceSubrange(start..<end, with: bytes)
            state.used += growth
            if position == nil {
                handle.offset = end
                state.handles[fd] = handle
            }
            return 0
        }
    }

    package func truncate(_ fd: Int32, to size: Int) -> Int32 {
        state.withLock { state in
            guard var handle = state.handles[fd], handle.writable, let node = handle.node,
                let current = state.nodes[node]?.bytes.count, size >= 0
            else { return EBADF }
            state.used += size - current
            if size < current {
                state.nodes[node]?.bytes.removeSubrange(size...)
            } else {
                state.nodes[node]?.bytes.append(contentsOf: repeatElement(0, count: size - current))
            }
            handle.offset = size
            state.handles[fd] = handle
            return 0
        }
    }

    package func sync(_ fd: Int32, metadata: Bool) -> Int32 {
        state.withLock { $0.handles[fd] == nil ? EBADF : 0 }
    }

    package func syncDirectory(_ path: String) -> Int32 {
        let path = normalized(path)
        return state.withLock { $0.directories.contains(path) ? 0 : ENOENT }
    }

    package func rename(_ from: String, to: String) -> Int32 {
        let from = normalized(from)
        let to = normalized(to)
        return state.withLock { state in
            guard let node = state.names[from] else { return state.directories.contains(from) ? EXDEV : ENOENT }
            guard state.directories.contains(parent(of: to)) else { return ENOENT }
            guard !state.directories.contains(to) else { return EISDIR }
            guard from != to else { return 0 }
            if let replaced = state.names[to] { state.release(replaced) }
            state.names[from] = nil
            state.names[to] = node
            return 0
        }
    }

    package func unlink(_ path: String) {
        let path = normalized(path)
        state.withLock { state in
            guard let node = state.names.removeValue(forKey: path) else { return }
            state.release(node)
        }
    }

    package func readAll(_ path: String) -> Result<[UInt8], SystemCallFailure> {
        let path = normalized(path)
        return state.withLock { state in
            if state.directories.contains(path) { return .failure(.init(operation: "read", errno: EISDIR)) }
            guard let node = state.names[path], let bytes = state.nodes[node]?.bytes else {
                return .failure(.init(operation: "open", errno: ENOENT))
            }
            return .success(bytes)
        }
    }

    package func list(_ directory: String) -> Result<[String], SystemCallFailure> {
        let directory = normalized(directory)
        return state.withLock { state in
            guard state.directories.contains(directory) else {
                return .failure(.init(operation: "opendir", errno: state.names[directory] == nil ? ENOENT : ENOTDIR))
            }
            let inside = (Array(state.names.keys) + Array(state.directories)).filter {
                $0 != directory && parent(of: $0) == directory
            }
            return .success(inside.map { String($0.dropFirst(directory == "/" ? 1 : directory.count + 1)) }.sorted())
        }
    }

    package func lock(_ path: String) throws(SpoolLockFailure) -> any SpoolLockHolding {
        let path = normalized(path)
        let taken: Result<Bool, SpoolLockFailure> = state.withLock { state in
            if state.directories.contains(path) { return .failure(.foreignFile) }
            guard !state.locksHeld.contains(path) else { return .failure(.held(holder: nil)) }
            guard state.directories.contains(parent(of: path)) else {
                return .failure(.system(operation: "open", errno: ENOENT))
            }
            let before = state.names[path] != nil
            if !before { _ = state.makeFile(path) }
            state.locksHeld.insert(path)
            return .success(before)
        }
        switch taken {
        case .success(let before): return InMemoryLock(volume: self, path: path, wasHeldBefore: before)
        case .failure(let failure): throw failure
        }
    }

    fileprivate func unlock(_ path: String) {
        state.withLock { _ = $0.locksHeld.remove(path) }
    }
}

/// A spool's lock on a volume in memory: one holder per folder, let go on release.
private final class InMemoryLock: SpoolLockHolding {
    let volume: InMemorySpoolVolume
    let path: String
    let wasHeldBefore: Bool

    init(volume: InMemorySpoolVolume, path: String, wasHeldBefore: Bool) {
        self.volume = volume
        self.path = path
        self.wasHeldBefore = wasHeldBefore
    }

    deinit {
        volume.unlock(path)
    }
}
