// GET /metrics on the runtime's loop: a libuv TCP listener, each client read, answered
// once and closed, bounded whatever clients do.

import CLibUV
import CoreMetrics
import Overtime

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Serves the exposition over HTTP/1.1 from the runtime's loop, one answer per connection.
///
/// Bounded whatever clients do, and never locked out by idle ones:
/// - a connection that has not sent a whole request head within ``headDeadline`` (1 s) is
///   closed (`kind="head_deadline"`); one whose answer is not read and closed by
///   ``connectionDeadline`` (10 s by default) after it was accepted is closed too;
/// - at most ``maximumConnections`` at once. A client that comes when they are all taken
///   takes the place of the oldest one still waiting for its head (`kind="idle_evicted"`):
///   a scrape is answered however many idle connections a local client holds open. Only
///   when every place holds a request being answered is the newcomer turned away with a
///   503, written without waiting;
/// - a request's head may take ``ScrapeRequest/maximumHeadBytes``.
///
/// Nothing runs while nobody connects: the listener is one epoll registration, and each
/// connection's deadline is a timer of its own on the runtime's clock (so a test on a
/// `ManualClock` moves it, and no deadline passes while it does not). Errors are counted
/// in `overtime_metrics_http_errors_total{kind}`.
final class MetricsHTTPServer {
    static let maximumConnections = 16
    static let connectionDeadline: Duration = .seconds(10)
    static let headDeadline: Duration = .seconds(1)

    private let runtime: Runtime
    private var context: DriverContext { runtime.driverContext }
    private let render: () -> [UInt8]
    private let errors: (String) -> Void
    private let deadline: Duration
    private var listener: UnsafeMutablePointer<uv_tcp_t>?
    private var connections: [ObjectIdentifier: MetricsConnection] = [:]
    /// Accepts so far: each connection's place in the order they came.
    private var accepted: UInt64 = 0

    init(
        runtime: Runtime, render: @escaping () -> [UInt8], errors: @escaping (String) -> Void,
        connectionDeadline: Duration = connectionDeadline
    ) {
        self.deadline = connectionDeadline
        self.runtime = runtime
        self.render = render
        self.errors = errors
    }

    /// Serves `socket` (already listening); its descriptor is the server's from here on.
    /// `false` when libuv cannot take it (the descriptor is closed).
    func start(_ socket: TCPListeningSocket) -> Bool {
        context.assertOnLoop()
        let handle = context.makeHandle(uv_tcp_t.self)
        uv_tcp_init(context.loop, handle)
        handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        let opened = uv_tcp_open(handle, uv_os_sock_t(socket.fd))
        let listening =
            opened == 0
            ? uv_listen(asStream(handle), 64) { server, status in
                let owner = Unmanaged<MetricsHTTPServer>.fromOpaque(server!.pointee.data).takeUnretainedValue()
                owner.context.turn { owner.accept(status: status) }
            } : opened
        listener = handle
        guard listening == 0 else {
            context.logger.error("metrics endpoint: cannot serve: \(String(cString: uv_strerror(listening)))")
            if opened != 0 { close(socket.fd) }
            stop()
            return false
        }
        context.onShutdown { [self] in stop() }
        return true
    }

    /// Closes every connection and the listener.
    func stop() {
        for connection in connections.values { connection.close() }
        if let listener, uv_is_closing(asHandle(listener)) == 0 {
            uv_close(asHandle(listener), nil)  // the handle's memory is the context's
        }
        listener = nil
    }

    private func accept(status: Int32) {
        guard let listener else { return }
        guard status == 0 else {
            errors("accept_failed")
            context.logger.warning("metrics endpoint: accept failed: \(String(cString: uv_strerror(status)))")
            return
        }
        let connection = MetricsConnection(server: self, runtime: runtime)
        guard uv_accept(asStream(listener), asStream(connection.tcp)) == 0 else {
            errors("accept_failed")
            connection.close()
            connections[ObjectIdentifier(connection)] = connection  // until its handles close
            return
        }
        accepted += 1
        connection.order = accepted
        let open = connections.values.filter { !$0.isClosing }
        if open.count >= Self.maximumConnections {
            // Full: the oldest connection still waiting for its request head gives way.
            if let idle = open.filter(\.waitsForHead).min(by: { $0.order < $1.order }) {
                errors("idle_evicted")
                idle.close()
            } else {
                connections[ObjectIdentifier(connection)] = connection
                errors(ScrapeAnswer.busy.errorKind ?? "")
                connection.turnAway(ScrapeAnswer.busy.bytes { [] })
                return
            }
        }
        connections[ObjectIdentifier(connection)] = connection
        connection.start(headDeadline: min(Self.headDeadline, deadline), deadline: deadline)
    }

    fileprivate func answer(_ answer: ScrapeAnswer) -> [UInt8] {
        if let kind = answer.errorKind { errors(kind) }
        return answer.bytes(exposition: render)
    }

    fileprivate func timedOut(waitingForHead: Bool) {
        errors(waitingForHead ? "head_deadline" : "deadline")
    }

    fileprivate func forget(_ connection: MetricsConnection) {
        connections.removeValue(forKey: ObjectIdentifier(connection))
    }
}

/// One client: its socket, its deadline, what it sent, the answer in flight.
private final class MetricsConnection {
    let tcp: UnsafeMutablePointer<uv_tcp_t>
    private let runtime: Runtime
    /// The deadline pending; it holds the connection until it fires or is cancelled.
    private var timer: LoopTimer?
    private let write = UnsafeMutablePointer<uv_write_t>.allocate(capacity: 1)
    private let shutdownRequest = UnsafeMutablePointer<uv_shutdown_t>.allocate(capacity: 1)
    private let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 1)
    /// The answer's bytes while libuv writes them.
    private var answerBytes: UnsafeMutableRawBufferPointer?
    // Strong until its handle closed: the close callback tells the server to forget it.
    private let server: MetricsHTTPServer
    private var context: DriverContext { runtime.driverContext }
    private var received: [UInt8] = []
    private var answered = false
    private(set) var isClosing = false
    /// Its place in the order connections came (the server's count of accepts).
    var order: UInt64 = 0
    /// The rest of the connection's deadline once its head came in time.
    private var afterHead: Duration = .zero

    /// Open and still waiting for a whole request head.
    var waitsForHead: Bool { !answered && !isClosing }

    init(server: MetricsHTTPServer, runtime: Runtime) {
        self.server = server
        self.runtime = runtime
        tcp = .allocate(capacity: 1)
        uv_tcp_init(context.loop, tcp)
        tcp.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        write.deallocate()
        shutdownRequest.deallocate()
        readBuffer.deallocate()
        answerBytes?.deallocate()
        tcp.deallocate()
    }

    private static func from(_ pointer: UnsafeMutableRawPointer?) -> MetricsConnection {
        Unmanaged<MetricsConnection>.fromOpaque(pointer!).takeUnretainedValue()
    }

    /// Reads the request: its head within `headDeadline`, the whole exchange within `deadline`.
    func start(headDeadline: Duration, deadline: Duration) {
        afterHead = deadline - headDeadline
        arm(after: headDeadline)
        uv_read_start(
            asStream(tcp),
            { handle, _, buffer in
                let connection = MetricsConnection.from(handle!.pointee.data)
                buffer!.pointee = uv_buf_init(
                    connection.readBuffer.baseAddress!.assumingMemoryBound(to: CChar.self),
                    UInt32(connection.readBuffer.count))
            },
            { stream, count, _ in
                let connection = MetricsConnection.from(stream!.pointee.data)
                connection.context.turn { connection.received(count: count) }
            })
    }

    /// The timer: at the head deadline a connection still waiting for its head is closed,
    /// one being answered gets the rest of its deadline; at that, it is closed.
    private func arm(after duration: Duration) {
        let bound = LoopBound(self, context: context)
        timer = runtime.schedule(after: duration) { bound.value.deadlineReached() }
    }

    private func deadlineReached() {
        guard !isClosing else { return }
        if answered, afterHead > .zero {
            let rest = afterHead
            afterHead = .zero
            arm(after: rest)
            return
        }
        server.timedOut(waitingForHead: !answered)
        close()
    }

    /// Answers a client the server has no room for, without waiting on it, and closes.
    func turnAway(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { raw in
            var buffer = uv_buf_init(
                UnsafeMutablePointer(mutating: raw.baseAddress!.assumingMemoryBound(to: CChar.self)),
                UInt32(raw.count))
            _ = uv_try_write(asStream(tcp), &buffer, 1)
        }
        close()
    }

    private func received(count: Int) {
        guard !isClosing else { return }
        guard count >= 0 else {
            close()  // the client closed or failed: nothing more to do for it
            return
        }
        guard !answered else { return }  // what follows an answered request is read and dropped
        received += UnsafeRawBufferPointer(rebasing: readBuffer[0..<count])
        guard case .answer(let answer) = ScrapeRequest.decide(received) else { return }
        answered = true
        received = []
        send(server.answer(answer))
    }

    /// Writes `bytes`, then ends the sending side; the connection closes when the client
    /// closes its side (or at its deadline), so that the client reads every byte first.
    private func send(_ bytes: [UInt8]) {
        let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 1)
        copy.copyBytes(from: bytes)
        answerBytes = copy
        write.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        var buffer = uv_buf_init(copy.baseAddress!.assumingMemoryBound(to: CChar.self), UInt32(copy.count))
        let status = uv_write(write, asStream(tcp), &buffer, 1) { request, status in
            let connection = MetricsConnection.from(request!.pointee.data)
            guard status == 0 else {
                connection.close()
                return
            }
            connection.finishSending()
        }
        if status != 0 { close() }
    }

    private func finishSending() {
        guard !isClosing else { return }
        shutdownRequest.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        if uv_shutdown(shutdownRequest, asStream(tcp), { _, _ in }) != 0 { close() }
    }

    func close() {
        guard !isClosing else { return }
        isClosing = true
        timer?.cancel()
        timer = nil
        uv_close(asHandle(tcp)) { handle in
            let connection = MetricsConnection.from(handle!.pointee.data)
            connection.server.forget(connection)
        }
    }
}

private func asStream(_ tcp: UnsafeMutablePointer<uv_tcp_t>) -> UnsafeMutablePointer<uv_stream_t> {
    UnsafeMutableRawPointer(tcp).assumingMemoryBound(to: uv_stream_t.self)
}

private func asHandle<Handle>(_ handle: UnsafeMutablePointer<Handle>) -> UnsafeMutablePointer<uv_handle_t> {
    UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)
}
