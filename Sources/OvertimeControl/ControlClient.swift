// Talking to a daemon's control socket: one request, one answer, over a blocking Unix
// socket — what overtimectl does, for programs too (a dashboard's actions).

import OvertimeControlProtocol
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Why talking to the daemon failed, with the exit status it maps to.
package struct ControlClientError: Error, CustomStringConvertible {
    package let description: String
    /// 1: it answered an error; 64 (`EX_USAGE`): a bad path; 69 (`EX_UNAVAILABLE`): no daemon
    /// there; 71 (`EX_OSERR`): no socket could be made; 76 (`EX_PROTOCOL`): its answer is not
    /// the protocol's; 77 (`EX_NOPERM`): refused.
    package let exitStatus: Int32
}

/// One request, one response, over a blocking Unix socket.
package struct ControlClient {
    package let path: String
    package var timeoutSeconds = 10

    package init(path: String, timeoutSeconds: Int = 10) {
        self.path = path
        self.timeoutSeconds = timeoutSeconds
    }

    /// The longest answer read: far above any the runtime gives (a table of 100,000 open
    /// tasks is about 10 MB).
    package static let maximumAnswerBytes = 64 << 20

    /// Sends `request` and returns the answer and its line as the daemon wrote it. With
    /// `waitForClose`, then waits (without a timeout) until the daemon closes the
    /// connection, which it does as it exits.
    package func send(
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
                let code = errno
                if let writeError { throw writeError }
                if count < 0, code == EAGAIN || code == EWOULDBLOCK {
                    // SO_RCVTIMEO ran out: say so, not as the errno it is reported with.
                    throw ControlClientError(
                        description: "\(path): the daemon did not answer: timed out after \(timeoutSeconds) s",
                        exitStatus: 69)
                }
                throw ControlClientError(
                    description: count == 0
                        ? "the daemon closed the connection without answering"
                        : "read from \(path): \(errnoDescription(code))",
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

/// A client of an Overtime daemon's control socket, for programs: what `overtimectl`
/// sends, one command at a time. Each call connects, sends one request, reads one answer
/// and closes; it blocks the calling thread for at most the timeout (call it off any
/// event loop).
///
/// ```swift
/// let daemon = ControlSocketClient(path: "/run/report/control.sock")
/// let message = try daemon.call("run", ["com.example.report"])  // "started run 7 of …"
/// ```
public struct ControlSocketClient: Sendable {
    /// The socket's path.
    public let path: String
    /// How long a call waits for the daemon to accept, read and answer.
    public let timeout: Duration

    /// A client of the daemon listening at `path`.
    public init(path: String, timeout: Duration = .seconds(10)) {
        self.path = path
        self.timeout = timeout
    }

    /// Sends `command` with `arguments` and returns the daemon's answer (the message it
    /// printed, or `ok`); throws ``ControlSocketError`` when the daemon refused it or could
    /// not be reached.
    public func call(_ command: String, _ arguments: [String] = []) throws(ControlSocketError) -> String {
        let seconds = Int(max(1, timeout.components.seconds))
        let answer: ControlResponse
        do {
            answer = try ControlClient(path: path, timeoutSeconds: seconds)
                .send(ControlRequest(command: command, arguments: arguments.isEmpty ? nil : arguments)).response
        } catch {
            throw ControlSocketError(message: error.description, isRefusal: false)
        }
        guard answer.ok else {
            throw ControlSocketError(message: answer.error ?? "the daemon refused", isRefusal: true)
        }
        return answer.message ?? "ok"
    }
}

/// Why a ``ControlSocketClient`` call failed.
public struct ControlSocketError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong: the daemon's own error, or why it could not be reached.
    public let message: String
    /// `true`: the daemon answered and refused (an unknown identifier, a finished request);
    /// `false`: no answer (no daemon at the path, permission denied, a timeout, an answer
    /// that is not the protocol's).
    public let isRefusal: Bool

    /// The message.
    public var description: String { message }
}
