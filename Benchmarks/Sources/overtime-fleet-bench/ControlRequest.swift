// One connection to a runtime's control socket, as `overtimectl` makes it.

#if canImport(Glibc)
    import Glibc
#endif

/// A connection to the control socket at a path: commands out, answer lines in.
final class ControlRequest {
    private let descriptor: Int32
    private var pending: [UInt8] = []

    /// Connects; `nil` when nothing listens there.
    init?(_ path: String) {
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: Array(path.utf8.prefix(raw.count - 1)) + [0])
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard descriptor >= 0, connected == 0 else {
            if descriptor >= 0 { close(descriptor) }
            return nil
        }
    }

    deinit { close(descriptor) }

    /// Sends `{"command":"<command>"}`.
    func send(_ command: String) {
        let line = Array("{\"command\":\"\(command)\"}\n".utf8)
        _ = line.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    }

    /// The next answer line, or `nil` when none comes in time.
    func readLine(timeoutMilliseconds: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            if let end = pending.firstIndex(of: UInt8(ascii: "\n")) {
                defer { pending.removeSubrange(...end) }
                return String(decoding: pending[..<end], as: UTF8.self)
            }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, timeoutMilliseconds) == 1 else { return nil }
            let count = read(descriptor, &buffer, buffer.count)
            guard count > 0 else { return nil }
            pending += buffer[0..<count]
        }
    }

    /// `command` on a connection of its own: its answer, or `nil` (nothing listens, or no
    /// answer in time).
    static func ask(_ path: String, _ command: String, timeoutMilliseconds: Int32) -> String? {
        guard let request = ControlRequest(path) else { return nil }
        request.send(command)
        return request.readLine(timeoutMilliseconds: timeoutMilliseconds)
    }
}
