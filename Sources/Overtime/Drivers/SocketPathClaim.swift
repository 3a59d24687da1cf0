// Claiming a Unix socket's path: race-free between instances, never taking what is not ours.

import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A Unix socket's path, held for the socket's life.
///
/// Probing a socket to judge it stale races: between another process's `bind` and its
/// `listen` a probe is refused, the socket looks stale, and replacing it silently takes
/// the name from a live process. So the judgement is made under a lock: `<path>.lock`, an
/// ``ExclusiveFileLock`` taken before anything at the path is looked at and held until the
/// socket is closed (the kernel releases it when the process dies, kill -9 included). A
/// socket at the path whose lock nobody holds is stale; one that still answers is left
/// alone (a process that takes no lock); anything but a socket is never touched.
///
/// The socket appears under its name only when it is ready: it is bound under a
/// temporary name beside the path (`<path>.new`), given its final mode, made to listen,
/// then renamed onto the path — so no client ever meets it with a wider mode or refusing
/// connections. The lock file is left in place when the socket is removed: deleting it
/// would let two later processes lock two different files.
package final class SocketPathClaim: Sendable {
    /// The socket's path.
    package let path: String
    /// The lock and the bound socket file's identity, once it is in place; both given up
    /// by ``remove()``.
    private let held: Locked<(lock: ExclusiveFileLock?, placed: FileIdentity?)>

    /// How much longer than the path the temporary name is.
    package static let temporarySuffix = ".new"

    /// Takes the lock beside `path` and clears the way for a socket of `kind`: removes a
    /// stale socket of an earlier run, refuses anything else.
    package init(path: String, datagram: Bool) throws(ListeningSocket.Failure) {
        guard UnixSocketAddress(path + Self.temporarySuffix) != nil, !path.hasPrefix("@") else {
            throw .unavailable(
                "\(path) is too long for a socket address (at most \(Self.maximumPathBytes) bytes)")
        }
        let lock: ExclusiveFileLock
        let lockPath = path + ".lock"
        do throws(ExclusiveFileLock.Failure) {
            lock = try ExclusiveFileLock(path: lockPath)
        } catch {
            switch error {
            case .held(let holder):
                throw .unavailable(
                    "\(path) is in use by \(holder.map { "process \($0)" } ?? "another process") (it holds \(path).lock)"
                )
            case .foreignFile:
                throw .unavailable("\(path).lock exists and is not an Overtime lock file; not replacing it")
            case .system(let operation, let code):
                throw .system(operation: "\(operation) \(path).lock", errno: code)
            }
        }
        self.path = path
        held = Locked((lock, nil))
        // Under the lock: a socket here or at the temporary name is an earlier run's,
        // unless a process that takes no lock still answers on it.
        for candidate in [path, path + Self.temporarySuffix] {
            if let refusal = Self.clearStale(candidate, datagram: datagram) {
                // A refused start leaves nothing behind: the lock file goes (removed while
                // still held: see ExclusiveFileLock for why that is safe).
                lock.unlinkAndRelease()
                throw .unavailable(refusal)
            }
        }
    }

    /// The longest path a claim takes: `sun_path` less the temporary suffix and its NUL.
    package static var maximumPathBytes: Int {
        MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1 - temporarySuffix.utf8.count
    }

    /// Binds `fd` under the temporary name, gives it `mode`, calls `prepare` (a listen;
    /// nonzero fails with `errno`), then renames it onto the path.
    package func place(_ fd: Int32, mode: mode_t, prepare: (Int32) -> Int32 = { _ in 0 }) throws(ListeningSocket
        .Failure)
    {
        let temporary = path + Self.temporarySuffix
        guard let address = UnixSocketAddress(temporary) else { throw .unavailable("\(path) is too long") }
        guard address.withSockAddr({ bind(fd, $0, $1) }) == 0 else {
            throw .system(operation: "bind", errno: errno)
        }
        // The mode before the name: no client connects through a wider one.
        guard chmod(temporary, mode) == 0, prepare(fd) == 0 else {
            let code = errno
            unlink(temporary)
            throw .system(operation: "listen", errno: code)
        }
        guard let identity = FileIdentity(path: temporary), rename(temporary, path) == 0 else {
            let code = errno
            unlink(temporary)
            throw .system(operation: "rename", errno: code)
        }
        held.withLock { $0.placed = identity }
    }

    /// Whether the path still names the socket this claim put there (`false` once it was
    /// removed or replaced by anyone).
    package var isIntact: Bool {
        guard let identity = held.withLock({ $0.placed }) else { return false }
        return FileIdentity(path: path) == identity
    }

    /// Removes the socket file, if the path still names ours (a file put there by anyone
    /// else since is left alone), and the lock file, then releases the lock: the path is
    /// free for the next holder as soon as this returns, and nothing is left behind.
    package func remove() {
        held.withLock { held in
            if let identity = held.placed, FileIdentity(path: path) == identity { unlink(path) }
            held.lock?.unlinkAndRelease()  // the lock file too: nothing left behind
            held = (nil, nil)
        }
    }

    /// A warning for a socket in a folder other users may write to: they could take the
    /// name first, or put a file there that this daemon then refuses.
    package static func sharedFolderWarning(for path: String) -> String? {
        let folder = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        var info = stat()
        guard stat(folder.isEmpty ? "/" : folder, &info) == 0, info.st_mode & S_IWOTH != 0 else { return nil }
        return
            "the socket \(path) is in a folder every user may write to (\(folder.isEmpty ? "/" : folder)): another user can take its name first; prefer a folder of the daemon's own (RuntimeDirectory=, $XDG_RUNTIME_DIR)"
    }

    /// Removes a socket at `candidate` nobody answers on; says why not otherwise.
    private static func clearStale(_ candidate: String, datagram: Bool) -> String? {
        var info = stat()
        guard lstat(candidate, &info) == 0 else {
            return errno == ENOENT ? nil : "cannot inspect \(candidate): \(errnoDescription())"
        }
        guard info.st_mode & S_IFMT == S_IFSOCK else {
            let kind = info.st_mode & S_IFMT == S_IFLNK ? "a symbolic link" : "not a socket"
            return "\(candidate) exists and is \(kind); not replacing it"
        }
        guard let address = UnixSocketAddress(candidate) else { return "\(candidate) is too long for a socket address" }
        let probe = makeUnixSocket(datagram: datagram)
        guard probe >= 0 else { return "socket: \(errnoDescription())" }
        defer { close(probe) }
        // Never waits: a listener whose queue of connections is full (a process that listens
        // and never accepts) would hold a blocking connect for as long as it lives.
        _ = fcntl(probe, F_SETFL, fcntl(probe, F_GETFL) | O_NONBLOCK)
        if address.withSockAddr({ connect(probe, $0, $1) }) == 0 {
            return "\(candidate) is in use: another process answers on it"
        }
        if errno == EAGAIN || errno == EWOULDBLOCK {
            return
                "\(candidate) is in use by a process that does not answer (it listens, but its queue of connections is full); not replacing it"
        }
        guard errno == ECONNREFUSED else { return "cannot probe \(candidate): \(errnoDescription())" }
        unlink(candidate)
        return nil
    }
}

/// A file's device and inode: which file a path names now.
package struct FileIdentity: Sendable, Equatable {
    let device: UInt64
    let inode: UInt64

    /// The identity of what `path` names (not following a final symlink); `nil` when nothing.
    package init?(path: String) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }
}
