import Foundation
import OvertimeTestSupport

/// A loopback TCP client that does only what a test tells it: send bytes, read to the end,
/// or hold the connection and never read.
final class ScrapeClient {
    private(set) var fd: Int32

    init(port: UInt16) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(fd)
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
    }

    /// Closes the connection now, once: a descriptor closed twice could be another thread's by then.
    func hangUp() {
        if fd >= 0 { close(fd) }
        fd = -1
    }

    deinit { hangUp() }

    func send(_ text: String) {
        _ = text.withCString { Glibc.send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
    }

    /// Whether bytes from the server wait to be read (or it closed its side) within
    /// `timeout`, without reading them: the server has taken the request and answered.
    func answerWaits(within timeout: Duration) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let (seconds, attoseconds) = timeout.components
        return poll(&entry, 1, Int32(seconds * 1000 + attoseconds / 1_000_000_000_000_000)) == 1
    }

    /// Everything until the server closes its side, however long its answer takes: every
    /// answer here ends with a close, and a server that never closes runs into the suite's
    /// time limit. No receive timeout: how soon an answer comes is not what these tests
    /// check, and under ThreadSanitizer with both cores busy a large answer takes seconds.
    func readToEnd() -> String {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { break }
            bytes += buffer[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The status line, headers and body of a whole answer.
    static func parts(_ answer: String) -> (status: String, headers: [String], body: String) {
        guard let split = answer.range(of: "\r\n\r\n") else { return (answer, [], "") }
        let head = answer[..<split.lowerBound].components(separatedBy: "\r\n")
        return (head.first ?? "", Array(head.dropFirst()), String(answer[split.upperBound...]))
    }
}

/// An HTTP GET on loopback, read to the end: the status line's code and the body.
func httpGet(port: Int, _ path: String) -> (status: Int, body: String)? {
    guard let client = try? ScrapeClient(port: UInt16(port)) else { return nil }
    client.send("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n")
    let answer = client.readToEnd()
    let (status, headers, body) = ScrapeClient.parts(answer)
    guard let code = Int(status.split(separator: " ").dropFirst().first ?? "") else { return nil }
    let chunked = headers.contains { $0.lowercased() == "transfer-encoding: chunked" }
    return (code, chunked ? dechunked(body) : body)
}

/// A chunked body joined.
private func dechunked(_ body: String) -> String {
    var rest = Substring(body)
    var joined = ""
    while let lineEnd = rest.range(of: "\r\n"), let size = Int(rest[..<lineEnd.lowerBound], radix: 16), size > 0 {
        let start = lineEnd.upperBound
        let end = rest.utf8.index(start, offsetBy: size)
        joined += rest[start..<end]
        rest = rest[end...].dropFirst(2)
    }
    return joined
}
