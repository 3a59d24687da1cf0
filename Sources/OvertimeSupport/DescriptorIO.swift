// Writing a whole buffer to a descriptor: the one loop every module uses.

// libuv's header brings <sys/socket.h> in whole; Glibc's module map leaves MSG_NOSIGNAL
// out of some builds (release, whole-module).
import CLibUV

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// How ``writeAll(_:_:to:)`` writes.
package enum WriteTarget {
    /// `send` with `MSG_NOSIGNAL`: a peer that hung up is `EPIPE`, never SIGPIPE.
    case socket
    /// `write` at the file offset.
    case file
    /// `pwrite` at this position (the file offset does not move).
    case fileAt(Int)
}

/// Writes every byte of `bytes` to `fd`, retrying after `EINTR` and short writes;
/// returns 0, or the `errno` of the call that failed (the bytes before it were written).
package func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, to target: WriteTarget) -> Int32 {
    var offset = 0
    while offset < bytes.count {
        let pointer = bytes.baseAddress! + offset
        let left = bytes.count - offset
        let written: Int
        switch target {
        case .socket: written = send(fd, pointer, left, Int32(MSG_NOSIGNAL))
        case .file: written = write(fd, pointer, left)
        case .fileAt(let position): written = pwrite(fd, pointer, left, off_t(position + offset))
        }
        if written < 0 {
            if errno == EINTR { continue }
            return errno
        }
        offset += written
    }
    return 0
}

/// ``writeAll(_:_:to:)`` for an array.
package func writeAll(_ fd: Int32, _ bytes: [UInt8], to target: WriteTarget) -> Int32 {
    bytes.withUnsafeBytes { writeAll(fd, $0, to: target) }
}
