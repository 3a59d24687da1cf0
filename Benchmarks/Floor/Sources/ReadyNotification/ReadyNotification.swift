// `READY=1` on `NOTIFY_SOCKET`, as systemd's notify protocol has it: how the programs the
// footprint rows start say they are ready (the peer, and the runner's own children).

#if canImport(Glibc)
    import Glibc
#endif

/// Sends `READY=1` to the datagram socket `NOTIFY_SOCKET` names; nothing without one.
public func notifyReady() {
    guard let path = getenv("NOTIFY_SOCKET").map({ String(cString: $0) }) else { return }
    let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        raw.copyBytes(from: Array(path.utf8.prefix(raw.count - 1)) + [0])
    }
    let message = Array("READY=1".utf8)
    _ = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            sendto(fd, message, message.count, 0, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
    }
}
