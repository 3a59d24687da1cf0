// One process per spool: an exclusive `flock` on `<directory>/lock`, which the kernel
// releases when the holder exits, kill -9 included. The holder's PID is written into the
// file (in place, so taking the lock needs no free block on a full disk) for the message
// a second instance prints.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

final class SpoolLock: Sendable {
    private let fd: Int32

    /// Takes the lock or throws ``SpoolError/locked(path:holder:)`` at once.
    init(directory: String) throws(SpoolError) {
        let path = directory + "/lock"
        let fd = try SpoolFiles.open(path, flags: O_RDWR | O_CREAT)
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            defer { close(fd) }
            guard code == EWOULDBLOCK else { throw .io(operation: "flock", path: path, errno: code) }
            var field = [UInt8](repeating: 0, count: Self.fieldSize)
            let count = pread(fd, &field, field.count, 0)
            let text = String(decoding: field.prefix(max(0, count)), as: UTF8.self).trimmingWhitespace()
            throw .locked(path: directory, holder: Int32(text))
        }
        self.fd = fd
        // Padded to a fixed width and written in place: the same bytes every time.
        let pid = String(getpid())
        let padded = Array((pid + String(repeating: " ", count: Self.fieldSize - 1 - pid.count) + "\n").utf8)
        try? SpoolFiles.writeAll(fd, padded, at: 0, path: path)
    }

    private static let fieldSize = 16

    deinit {
        close(fd)  // releases the lock
    }
}
