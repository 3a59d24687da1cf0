// One process per resource: an exclusive `flock` on a lock file, which the kernel releases
// when the holder exits, kill -9 included. The holder's PID is written into the file (in
// place, so taking the lock needs no free block on a full disk) for the message a second
// instance prints.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// An exclusive lock on a file, held until this object is released.
package final class ExclusiveFileLock: Sendable {
    /// Why the lock was not taken.
    package enum Failure: Error, Sendable, Equatable {
        /// Another process holds it (its PID, when the file names one).
        case held(holder: Int32?)
        /// The file exists and is not a lock file of ours: it is left as it was.
        case foreignFile
        /// A system call failed.
        case system(operation: String, errno: Int32)
    }

    /// The lock file's path.
    package let path: String
    /// The file named a holder before this one: the resource was used before.
    package let wasHeldBefore: Bool
    private let fd: Int32

    /// Takes the lock on `path` (creating the file) or throws at once.
    ///
    /// The lock is on the file `path` names when it is taken: a holder may remove the file
    /// as it lets go (``unlinkAndRelease()``), so one locked just after it was removed is
    /// let go and the path opened again.
    package init(path: String) throws(Failure) {
        self.path = path
        var fd: Int32 = -1
        for _ in 0..<100 {
            fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
            guard fd >= 0 else { throw .system(operation: "open", errno: errno) }
            guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { break }  // held: decided below
            var opened = stat()
            var named = stat()
            if fstat(fd, &opened) == 0, lstat(path, &named) == 0, opened.st_ino == named.st_ino,
                opened.st_dev == named.st_dev
            {
                break
            }
            close(fd)  // removed by its last holder since it was opened: the path again
            fd = -1
        }
        guard fd >= 0 else { throw .system(operation: "open", errno: EAGAIN) }
        var field = [UInt8](repeating: 0, count: Self.fieldSize + 1)
        let count = pread(fd, &field, field.count, 0)
        let existing = field.prefix(max(0, count))
        // An empty file, or the field this type writes: a PID padded with spaces, a newline.
        let ours =
            existing.isEmpty
            || (existing.count == Self.fieldSize && existing.last == UInt8(ascii: "\n")
                && existing.dropLast().allSatisfy { $0 == UInt8(ascii: " ") || (48...57).contains($0) })
        guard ours else {
            close(fd)
            throw .foreignFile
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            close(fd)
            guard code == EWOULDBLOCK else { throw .system(operation: "flock", errno: code) }
            let text = String(decoding: existing.filter { (48...57).contains($0) }, as: UTF8.self)
            throw .held(holder: Int32(text))
        }
        self.fd = fd
        wasHeldBefore = !existing.isEmpty
        // Padded to a fixed width and written in place: the same bytes every time.
        let pid = String(getpid())
        let padded = Array((pid + String(repeating: " ", count: Self.fieldSize - 1 - pid.count) + "\n").utf8)
        _ = writeAll(fd, padded, to: .fileAt(0))
    }

    private static let fieldSize = 16

    /// Removes the lock file, then lets go: the path is free and nothing is left behind.
    /// Safe while others try to take it: an opener that locked the removed file sees it is
    /// no longer the one the path names, and opens the path again.
    package func unlinkAndRelease() {
        unlink(path)
    }

    deinit {
        // Unlocked before the close: a child being spawned on another thread holds a copy of
        // the descriptor until its exec, and the lock would live on in that copy.
        flock(fd, LOCK_UN)
        close(fd)
    }
}
