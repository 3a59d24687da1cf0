// A TCP socket bound and listening, made on the caller's thread so that a bad address
// fails where the program can say so, before the loop serves it.

import CLibUV

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A listening TCP socket: its descriptor (non-blocking, close-on-exec) and the address it
/// is bound to (the port the kernel chose, for port 0).
struct TCPListeningSocket {
    let fd: Int32
    let address: MetricsListenAddress

    /// Binds `address` and listens; throws ``MetricsExportError`` (`cannotListen`) with the
    /// system's reason.
    static func bind(_ address: MetricsListenAddress) throws -> TCPListeningSocket {
        guard let family = MetricsListenAddress.family(of: address.host) else {
            throw MetricsExportError(.invalidAddress, "'\(address.host)' is not an IP address")
        }
        var storage = sockaddr_storage()
        let length: socklen_t
        let parsed = withUnsafeMutablePointer(to: &storage) { pointer -> Int32 in
            if family == AF_INET {
                return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                    uv_ip4_addr(address.host, Int32(address.port), $0)
                }
            }
            return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                uv_ip6_addr(address.host, Int32(address.port), $0)
            }
        }
        length = socklen_t(family == AF_INET ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size)
        guard parsed == 0 else {
            throw MetricsExportError(.invalidAddress, "'\(address.host)' is not an IP address")
        }
        let fd = socket(
            family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else {
            throw MetricsExportError(.cannotListen, "cannot listen on \(address): socket: \(Self.reason(errno))")
        }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, length) }
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            let failure = errno
            close(fd)
            throw MetricsExportError(.cannotListen, "cannot listen on \(address): \(Self.reason(failure))")
        }
        var actual = sockaddr_storage()
        var actualLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let port = withUnsafeMutablePointer(to: &actual) { pointer -> UInt16 in
            let named = pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                getsockname(fd, $0, &actualLength)
            }
            guard named == 0 else { return address.port }
            return family == AF_INET
                ? pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                    UInt16(bigEndian: $0.pointee.sin_port)
                }
                : pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    UInt16(bigEndian: $0.pointee.sin6_port)
                }
        }
        // The host was checked above, so this cannot throw.
        let boundAddress = (try? MetricsListenAddress(host: address.host, port: port)) ?? address
        return TCPListeningSocket(fd: fd, address: boundAddress)
    }

    private static func reason(_ code: Int32) -> String {
        switch code {
        case EADDRINUSE: "the address is in use (another program, or another instance, listens there)"
        case EADDRNOTAVAIL: "the address is not one of this machine's"
        case EACCES: "permission denied (ports below 1024 need CAP_NET_BIND_SERVICE)"
        default: String(cString: strerror(code))
        }
    }
}
