import Foundation
import OvertimeSupport
import OvertimeTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A loopback TCP relay between a sink and its collector that has the collector killed
/// partway through a session, every time: a kill timed by watching the collector's output
/// raced the sink, which sends 4,000 lines in a fifth of a second, and under load it landed
/// after the last session had ended (no session broken, busy run 124).
///
/// A connection is interrupted once `afterBytes` of the client's bytes have been passed to
/// the collector: no more are, `interrupt` runs (the test kills the collector with -9 and
/// starts it again), and the relay closes both ends. The first connection is interrupted,
/// and after each interruption the next connection is passed whole, in both directions (so
/// the client makes progress), until `interruptions` have been done; then every
/// connection is passed whole. A connection that ends before `afterBytes` is passed whole.
///
/// One thread of its own accepts and relays one connection at a time, as a sink opens them.
final class SessionInterruptingRelay: @unchecked Sendable {  // the listener's number, fixed; the rest is the thread's
    /// The loopback port clients connect to.
    let port: Int
    private let listener: Int32
    private let interruptionsDone = Locked(0)
    private let stopping = Locked(false)
    private let ended = DispatchSemaphore(value: 0)

    /// Relays 127.0.0.1:`port` (a free one) to 127.0.0.1:`collectorPort`.
    init(
        to collectorPort: Int, interruptions: Int, afterBytes: Int,
        interrupt: @escaping @Sendable () -> Void
    ) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = loopbackAddress(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
                bind(listener, pointer, length) == 0 && listen(listener, 16) == 0
                    && getsockname(listener, pointer, &length) == 0
            }
        }
        guard listening else {
            let code = errno
            close(listener)
            throw NSError(domain: "SessionInterruptingRelay", code: Int(code))
        }
        self.listener = listener
        port = Int(UInt16(bigEndian: address.sin_port))
        let (done, stopping, ended) = (interruptionsDone, stopping, ended)
        Thread.detachNewThread {
            var armed = true
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { break }  // shut down by deinit
                _ = fcntl(client, F_SETFD, FD_CLOEXEC)  // not inherited by the collector started meanwhile
                let interrupting = armed && done.withLock { $0 } < interruptions
                let interrupted = relay(
                    client, to: collectorPort, stopping: stopping,
                    interruptingAfter: interrupting ? afterBytes : nil, with: interrupt)
                if interrupted { done.withLock { $0 += 1 } }
                armed = !interrupted
            }
            close(listener)  // here, after accept returned: closed by deinit, the number could be reused meanwhile
            ended.signal()
        }
    }

    /// How many connections were interrupted (each with the collector killed).
    var interruptions: Int { interruptionsDone.withLock { $0 } }

    deinit {
        stopping.withLock { $0 = true }  // a connection still open is closed
        shutdown(listener, Int32(SHUT_RDWR))  // the thread's accept returns, and it closes the listener
        ended.wait()
    }
}

/// Passes bytes both ways between `client` and a new connection to the collector until
/// either end closes or the relay stops, or, with `limit`, until `limit` of the client's
/// bytes have been passed on: then, no more passed, runs `interrupt` with both connections
/// open. Closes both. Returns whether it was interrupted.
private func relay(
    _ client: Int32, to collectorPort: Int, stopping: Locked<Bool>, interruptingAfter limit: Int?,
    with interrupt: () -> Void
) -> Bool {
    defer { close(client) }
    let collector = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    defer { close(collector) }
    var address = loopbackAddress(port: collectorPort)
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(collector, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
    }
    guard connected else { return false }  // the client sees its connection closed: as if refused
    var passed = 0
    var buffer = [UInt8](repeating: 0, count: 16 * 1024)
    var ends = [
        pollfd(fd: client, events: Int16(POLLIN), revents: 0), pollfd(fd: collector, events: Int16(POLLIN), revents: 0),
    ]
    while !stopping.withLock({ $0 }) {
        for index in ends.indices { ends[index].revents = 0 }
        guard poll(&ends, 2, 100) >= 0 || errno == EINTR else { return false }
        for (index, end) in ends.enumerated() where end.revents != 0 {
            let from = end.fd
            let to = index == 0 ? collector : client
            var wanted = buffer.count
            if index == 0, let limit { wanted = min(wanted, limit - passed) }
            let count = recv(from, &buffer, wanted, 0)
            guard count > 0 else { return false }  // an end closed (or failed): the other is closed too
            guard sendAll(buffer[0..<count], to: to) else { return false }
            if index == 0 {
                passed += count
                if let limit, passed >= limit {
                    interrupt()
                    return true
                }
            }
        }
    }
    return false
}

private func sendAll(_ bytes: ArraySlice<UInt8>, to fd: Int32) -> Bool {
    var rest = bytes
    while !rest.isEmpty {
        let sent = rest.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent > 0 else { return false }
        rest = rest.dropFirst(sent)
    }
    return true
}
