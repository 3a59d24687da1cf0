import Overtime
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Sends each record as an RFC 5424 message over TCP, framed by RFC 6587 octet counting
/// (what rsyslog's `imtcp` accepts by default), with the stream ID and sequence number in
/// structured data: `[overtime@32473 stream="…" seq="42" segment="7"]`.
///
/// Best effort, made as safe as plain TCP allows: before sending, a kept connection the
/// collector closed (a restart) is noticed and replaced, so a segment is never written
/// into a dead connection; after sending, the segment counts as stored only once the
/// collector's TCP acknowledged every byte (the send queue is empty) and the connection is
/// still up. What a collector acknowledged at TCP level but had not yet processed when it
/// died is still lost: use `RELPSink` (module `OvertimeRELP`) (application-level acknowledgements) where that
/// matters. A retry after a partial send repeats messages; the structured data lets the
/// collector drop those duplicates. Blocking socket I/O runs on a queue of its own.
public final class SyslogSink: LogSink {
    /// The collector's host (an IPv4 address or a name).
    public let host: String
    /// The collector's TCP port.
    public let port: Int
    /// APP-NAME in every message.
    public let appName: String
    private let hostname: String
    private let queue = SerialWorkQueue(name: "overtime-syslog")
    private let connection = Locked<Int32>(-1)

    /// Sends to `host:port` as `appName`.
    public init(host: String, port: Int, appName: String = "overtime") {
        self.host = host
        self.port = port
        self.appName = appName
        hostname = SyslogMessage.hostname
    }

    deinit {
        connection.withLock { if $0 >= 0 { close($0) } }
    }

    /// `syslog://host:port`.
    public var description: String { "syslog://\(host):\(port)" }

    /// Sends every record of the segment, in order.
    public func store(_ segment: SealedSegment) async throws(SinkError) {
        let payload = try SyslogMessage.messages(of: segment, hostname: hostname, appName: appName).flatMap {
            message in
            let bytes = Array(message.utf8)
            return Array("\(bytes.count) ".utf8) + bytes  // RFC 6587 octet counting
        }
        try await runBlockingSinkWork(on: queue) { [self] isCancelled in
            send(payload, isCancelled: isCancelled)
        } onCancel: { [connection] in
            connection.withLock { if $0 >= 0 { shutdown($0, Int32(SHUT_RDWR)) } }  // unblocks a send
        }
    }

    private func send(_ payload: [UInt8], isCancelled: () -> Bool) -> Result<Void, SinkError> {
        if isCancelled() { return .failure(.cancelled) }
        var fd = connection.withLock { $0 }
        if fd >= 0, !Self.isAlive(fd) {
            // The collector closed it (a restart, an idle timeout): never write into it.
            dropConnection()
            fd = -1
        }
        if fd < 0 {
            switch connect() {
            case .success(let opened):
                fd = opened
                connection.withLock { $0 = opened }
            case .failure(let error): return .failure(error)
            }
        }
        let failure = writeAll(fd, payload, to: .socket)
        if failure == 0 {
            // Stored only once the collector's TCP has every byte and the connection still stands.
            if let problem = Self.waitUntilAcknowledged(fd, isCancelled: isCancelled) {
                dropConnection()
                return isCancelled() ? .failure(.cancelled) : .failure(.retryable(problem, retryAfter: nil))
            }
            return .success(())
        }
        dropConnection()
        if isCancelled() { return .failure(.cancelled) }
        return .failure(.retryable("send to \(host):\(port): \(errnoDescription(failure))", retryAfter: nil))
    }

    private func dropConnection() {
        connection.withLock {
            if $0 >= 0 { close($0) }
            $0 = -1
        }
    }

    /// Whether a connection the collector never writes to is still open: readable means
    /// end of stream or an error.
    static func isAlive(_ fd: Int32) -> Bool {
        let peerHungUp: Int16 = 0x2000  // POLLRDHUP (Linux), which Glibc's module does not export
        var probe = pollfd(fd: fd, events: Int16(POLLIN) | peerHungUp, revents: 0)
        guard poll(&probe, 1, 0) >= 0 else { return false }
        let broken: Int16 = Int16(POLLERR) | Int16(POLLHUP) | Int16(POLLNVAL) | peerHungUp
        if probe.revents & broken != 0 { return false }
        guard probe.revents & Int16(POLLIN) != 0 else { return true }
        var byte: UInt8 = 0
        let count = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return count > 0 || (count < 0 && errno == EAGAIN)
    }

    /// Waits (up to 10 s) until the kernel's send queue is empty: the peer's TCP acknowledged
    /// every byte. A problem when it does not, or the connection broke meanwhile.
    static func waitUntilAcknowledged(_ fd: Int32, isCancelled: () -> Bool) -> String? {
        let siocoutq: UInt = 0x5411  // TIOCOUTQ: bytes not yet acknowledged by the peer
        for _ in 0..<10_000 {
            var unacknowledged: Int32 = 0
            guard ioctl(fd, siocoutq, &unacknowledged) == 0 else { return "ioctl(SIOCOUTQ): \(errnoDescription())" }
            if unacknowledged == 0 {
                return isAlive(fd) ? nil : "the collector closed the connection while receiving"
            }
            if isCancelled() { return "cancelled" }
            if !isAlive(fd) { return "the collector closed the connection with bytes unacknowledged" }
            usleep(1000)
        }
        return "the collector did not acknowledge the segment within 10 s"
    }

    private func connect() -> Result<Int32, SinkError> {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var results: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &results) == 0, let first = results else {
            return .failure(.retryable("cannot resolve \(host)", retryAfter: nil))
        }
        defer { freeaddrinfo(results) }
        let fd = socket(first.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .failure(.retryable("socket: \(errnoDescription())", retryAfter: nil)) }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard Glibc.connect(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0 else {
            let code = errno
            close(fd)
            return .failure(.retryable("connect to \(host):\(port): \(errnoDescription(code))", retryAfter: nil))
        }
        return .success(fd)
    }
}
