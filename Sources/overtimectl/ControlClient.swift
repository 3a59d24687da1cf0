import OvertimeControlProtocol
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Why talking to the daemon failed, with the exit status it maps to.
struct ControlClientError: Error, CustomStringConvertible {
    let description: String
    /// 1: it answered an error; 64 (`EX_USAGE`): a bad path; 69 (`EX_UNAVAILABLE`): no daemon
    /// there; 71 (`EX_OSERR`): no socket could be made; 76 (`EX_PROTOCOL`): its answer is not
    /// the protocol's; 77 (`EX_NOPERM`): refused.
    let exitStatus: Int32
}

/// One request, one response, over a blocking Unix socket.
struct ControlClient {
    let path: String
    var timeoutSeconds = 10
    /// The longest answer read: far above any the runtime gives (a table of 100,000 open
    /// tasks is about 10 MB).
    static let maximumAnswerBytes = 64 << 20

    /// Sends `request` and returns the answer and its line as the daemon wrote it. With
    /// `waitForClose`, then waits (without a timeout) until the daemon closes the
    /// connection, which it does as it exits.
    func send(
        _ request: ControlRequest, waitForClose: Bool = false
    ) throws(ControlClientError) -> (response: ControlResponse, line: String) {
        guard let address = UnixSocketAddress(path) else {
            throw ControlClientError(description: "'\(path)' is not a usable socket path", exitStatus: 64)
        }
        let fd = makeUnixSocket(datagram: false)
        guard fd >= 0 else { throw ControlClientError(description: "socket: \(errnoDescription())", exitStatus: 71) }
        defer { close(fd) }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if address.withSockAddr({ connect(fd, $0, $1) }) != 0 {
            let code = errno
            let hint =
                code == EACCES || code == EPERM
                ? " (the socket belongs to another user: run as the daemon's user or root)"
                : " (is the daemon running with a control socket there?)"
            throw ControlClientError(
                description: "cannot connect to \(path): \(errnoDescription(code))\(hint)",
                exitStatus: code == EACCES || code == EPERM ? 77 : 69)
        }
        let line = ControlProtocol.encode(request)
        var writeError: ControlClientError?
        let failure = writeAll(fd, line, to: .socket)
        if failure != 0 {
            // The daemon may have answered (a refusal) and closed first: read that below.
            writeError = ControlClientError(
                description: "write to \(path): \(errnoDescription(failure))", exitStatus: 69)
        }
        // Linear: only the bytes just read are searched for the end of the line, and the
        // answer is bounded (a daemon answering without end is a protocol error, not memory).
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var complete = false
        while !complete {
            let count = read(fd, &buffer, buffer.count)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else {
                if let writeError { throw writeError }
                throw ControlClientError(
                    description: count == 0
                        ? "the daemon closed the connection without answering"
                        : "read from \(path): \(errnoDescription())",
                    exitStatus: 69)
            }
            complete = buffer[0..<count].contains(UInt8(ascii: "\n"))
            received += buffer[0..<count]
            guard received.count <= Self.maximumAnswerBytes || complete else {
                throw ControlClientError(
                    description: "the daemon's answer is longer than \(Self.maximumAnswerBytes) bytes", exitStatus: 76)
            }
        }
        let answer = received.prefix { $0 != UInt8(ascii: "\n") }
        let response: ControlResponse
        do {
            response = try ControlResponse(json: Array(answer))
        } catch {
            throw ControlClientError(
                description: "the daemon's answer is not what it should be: \(error)", exitStatus: 76)
        }
        if waitForClose, response.ok {
            var forever = timeval(tv_sec: 0, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &forever, socklen_t(MemoryLayout<timeval>.size))
            while true {
                let count = read(fd, &buffer, buffer.count)
                if count == 0 || (count < 0 && errno != EINTR) { break }
            }
        }
        return (response, String(decoding: answer, as: UTF8.self))
    }
}
