#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The address of a Unix-domain socket: a path, or an abstract name written `@name`
/// (as systemd writes `NOTIFY_SOCKET`).
package struct UnixSocketAddress: Sendable {
    private var storage = sockaddr_un()
    package private(set) var length: socklen_t = 0

    /// Parses `path`; `nil` when it is empty or longer than `sun_path` holds.
    package init?(_ path: String) {
        var bytes = Array(path.utf8)
        guard !bytes.isEmpty else { return nil }
        let abstract = bytes[0] == UInt8(ascii: "@")
        if abstract { bytes[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: storage.sun_path)
        guard bytes.count < capacity else { return nil }
        storage.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &storage.sun_path) { raw in
            raw.copyBytes(from: bytes)
        }
        let pathOffset = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)!
        // An abstract name is exactly its bytes; a path includes its terminating NUL.
        length = socklen_t(pathOffset + bytes.count + (abstract ? 0 : 1))
    }

    /// Calls `body` with the address as a `sockaddr` pointer and its length.
    package func withSockAddr<Result>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> Result) -> Result {
        withUnsafePointer(to: storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
        }
    }
}

/// `socket(AF_UNIX, type | SOCK_CLOEXEC, 0)`; -1 with `errno` set on failure.
package func makeUnixSocket(datagram: Bool, nonBlocking: Bool = false) -> Int32 {
    #if canImport(Glibc)
        let type = Int32(datagram ? SOCK_DGRAM.rawValue : SOCK_STREAM.rawValue)
    #else
        let type = datagram ? SOCK_DGRAM : SOCK_STREAM
    #endif
    return socket(AF_UNIX, type | socketFlags(nonBlocking: nonBlocking), 0)
}

/// `SOCK_CLOEXEC`, with `SOCK_NONBLOCK` when `nonBlocking`: for `socket` and `accept4`.
package func socketFlags(nonBlocking: Bool) -> Int32 {
    #if canImport(Glibc)
        Int32(SOCK_CLOEXEC.rawValue) | (nonBlocking ? Int32(SOCK_NONBLOCK.rawValue) : 0)
    #else
        SOCK_CLOEXEC | (nonBlocking ? SOCK_NONBLOCK : 0)
    #endif
}

/// The text of the current `errno`.
package func errnoDescription(_ code: Int32 = errno) -> String {
    "\(String(cString: strerror(code))) (errno \(code))"
}
