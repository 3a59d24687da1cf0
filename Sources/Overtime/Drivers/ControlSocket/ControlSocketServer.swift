import CLibUV
import Logging
import OvertimeControlProtocol
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The opt-in control socket: a Unix stream socket on the loop (libuv pipe), mode 0600,
/// peers checked with `SO_PEERCRED` (the owner or root only), one JSON request per line
/// and one JSON response per line. Bad requests get an error response; the server never
/// stops serving because of one.
///
/// Bounded whatever clients do: at most ``maximumConnections`` at once — 64, or an eighth
/// of the process's descriptor limit when that is lower, so held connections never take
/// the descriptors a drain needs — more are told so and closed; a connection idle for
/// ``idleTimeout`` is closed, and a client that does not read its answers is disconnected
/// once ``maximumUnreadBytes`` of them wait. Each is
/// counted (`overtime_control_errors_total{kind}`). Out of descriptors (EMFILE, ENFILE),
/// a waiting client is told so and closed, counted, never fatal, and the loop never spins
/// on the listener (`ListeningSocket`).
///
/// The socket's path is watched (inotify, through libuv: no wake-ups while nothing
/// happens): when anyone removes or replaces it, `overtimectl` can no longer reach this
/// daemon, and that is logged at critical level and counted (`socket_lost`) at once.
final class ControlSocketServer {
    static let maximumConnections = connectionLimit(preferred: 64)
    static let idleTimeout: Duration = .seconds(60)
    static let maximumUnreadBytes = 256 * 1024

    private let context: DriverContext
    private let commands: ControlCommands
    let path: String
    private var listener: ListeningSocket?
    /// Watches the socket's path for its removal or replacement.
    private var pathWatcher: UnsafeMutablePointer<uv_fs_event_t>?
    /// Watches the listener for clients.
    private var watcher: UnsafeMutablePointer<uv_poll_t>?
    /// Watches the listener again after a pause for want of descriptors.
    private var resumer: UnsafeMutablePointer<uv_timer_t>?
    fileprivate var connections: [UnsafeMutableRawPointer: ControlConnection] = [:]
    /// Closes idle connections; runs only while there are connections, so an idle daemon
    /// is never woken by it.
    private var sweeper: UnsafeMutablePointer<uv_timer_t>?

    init(context: DriverContext, listener: ListeningSocket, commands: ControlCommands) {
        self.context = context
        self.path = listener.path
        self.listener = listener
        self.commands = commands
    }

    /// Serves the listener the runtime made (and claimed) at its creation.
    func start() {
        guard let socket = listener else { return }
        let sweep = context.makeHandle(uv_timer_t.self)
        uv_timer_init(context.loop, sweep)
        sweep.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        sweeper = sweep
        let pause = context.makeHandle(uv_timer_t.self)
        uv_timer_init(context.loop, pause)
        pause.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        resumer = pause
        let poll = context.makeHandle(uv_poll_t.self)
        uv_poll_init(context.loop, poll, socket.fd)
        poll.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        watcher = poll
        watchListener()
        if !socket.isInherited { watchPath() }  // a passed socket's path is its service manager's
        context.onShutdown { [self] in stop() }
        context.logger.info("control socket listening", metadata: ["path": "\(path)"])
    }

    /// Closes every connection and the listener, and removes the socket file.
    func stop() {
        for connection in connections.values { connection.close() }
        if let sweeper { uv_timer_stop(sweeper) }
        if let resumer { uv_timer_stop(resumer) }
        if let pathWatcher { uv_fs_event_stop(pathWatcher) }
        if let watcher, let listener, uv_is_closing(asHandle(watcher)) == 0 {
            uv_close(asHandle(watcher), nil)  // stops the poll now; the descriptor may close
            listener.closeAndRemove()
        }
        listener = nil
    }

    /// Any change to the socket file (an unlink or a rename over it changes its link
    /// count) is checked against the socket this server listens on.
    private func watchPath() {
        let watcher = context.makeHandle(uv_fs_event_t.self)
        uv_fs_event_init(context.loop, watcher)
        watcher.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        pathWatcher = watcher
        let status = uv_fs_event_start(
            watcher,
            { handle, _, _, _ in
                let server = Unmanaged<ControlSocketServer>.fromOpaque(handle!.pointee.data).takeUnretainedValue()
                server.context.turn { server.checkPath() }
            }, path, 0)
        if status != 0 {
            context.logger.warning(
                "control socket: cannot watch \(path) for removal: \(String(cString: uv_strerror(status)))")
        }
    }

    private func checkPath() {
        guard let listener, !listener.isIntact else { return }
        if let pathWatcher { uv_fs_event_stop(pathWatcher) }  // said once
        context.countControlError("socket_lost")
        context.logger.critical(
            "control socket: \(path) was removed or replaced by something else; overtimectl can no longer reach this daemon (restart it to make the socket again)"
        )
    }

    private func watchListener() {
        guard let watcher else { return }
        uv_poll_start(watcher, Int32(UV_READABLE.rawValue)) { poll, _, _ in
            let server = Unmanaged<ControlSocketServer>.fromOpaque(poll!.pointee.data).takeUnretainedValue()
            server.context.turn { server.acceptWaiting() }
        }
    }

    private func acceptWaiting() {
        guard let listener else { return }
        let outOfDescriptors = ControlProtocol.encode(
            .failure("the daemon is out of file descriptors; try again later"))
        while true {
            switch listener.accept(refusal: outOfDescriptors) {
            case .connection(let fd): admit(fd)
            case .turnedAway: context.countControlError("accept_failed")
            case .none: return
            case .exhausted:
                // Not even the reserve is left: stop watching for a moment, or the loop spins.
                context.countControlError("accept_failed")
                context.logger.error("control socket: out of file descriptors; not accepting for 100 ms")
                if let watcher, let resumer {
                    uv_poll_stop(watcher)
                    uv_timer_start(
                        resumer,
                        { timer in
                            Unmanaged<ControlSocketServer>.fromOpaque(timer!.pointee.data).takeUnretainedValue()
                                .watchListener()
                        }, 100, 0)
                }
                return
            }
        }
    }

    /// Takes an accepted client, or turns it away at once (over the limit, or a peer
    /// that is neither the owner nor root) without holding its descriptor.
    private func admit(_ fd: Int32) {
        guard connections.count < Self.maximumConnections else {
            context.countControlError("too_many_connections")
            ListeningSocket.refuse(
                fd,
                ControlProtocol.encode(
                    .failure("too many connections (at most \(Self.maximumConnections)); try again later")))
            return
        }
        var uid: UInt32 = .max
        if overtime_peer_uid(fd, &uid) != 0 || (uid != geteuid() && uid != 0) {
            context.countControlError("peer_refused")
            context.logger.warning("control socket: refused a peer", metadata: ["peer_uid": "\(uid)"])
            ListeningSocket.refuse(
                fd,
                ControlProtocol.encode(
                    .failure("permission denied: uid \(uid) is neither the daemon's owner (\(geteuid())) nor root")))
            return
        }
        let connection = ControlConnection(server: self, context: context, commands: commands)
        let opened = uv_pipe_open(connection.pipe, fd)
        guard opened == 0 else {
            context.countControlError("accept_failed")
            context.logger.error("control socket: accept failed: \(String(cString: uv_strerror(opened)))")
            close(fd)
            connection.close()
            return
        }
        connections[UnsafeMutableRawPointer(connection.pipe)] = connection
        armSweeper()
        connection.startReading()
    }

    fileprivate func forget(_ connection: ControlConnection) {
        connections.removeValue(forKey: UnsafeMutableRawPointer(connection.pipe))
        if connections.isEmpty, let sweeper { uv_timer_stop(sweeper) }
    }

    private func armSweeper() {
        guard let sweeper, uv_is_active(UnsafeMutableRawPointer(sweeper).assumingMemoryBound(to: uv_handle_t.self)) == 0
        else { return }
        let period = UInt64(Self.idleTimeout.components.seconds * 1000 / 4)
        uv_timer_start(
            sweeper,
            { timer in
                Unmanaged<ControlSocketServer>.fromOpaque(timer!.pointee.data).takeUnretainedValue().sweep()
            }, period, period)
    }

    private func sweep() {
        context.turn {
            let now = SystemClock.monotonicNanoseconds()
            let limit = UInt64(Self.idleTimeout.components.seconds) * 1_000_000_000
            for connection in connections.values where now &- connection.lastActivity > limit {
                context.countControlError("idle_timeout")
                connection.close()
            }
        }
    }
}

/// One accepted client: reads lines, answers each, closes on EOF or error.
private final class ControlConnection {
    let pipe: UnsafeMutablePointer<uv_pipe_t>
    // Strong: a connection closing after shutdown still reports to its server; the close
    // callback removes the connection from the server, which ends the cycle.
    private let server: ControlSocketServer
    private let context: DriverContext
    private let commands: ControlCommands
    private var framer = LineFramer(limit: ControlProtocol.maximumRequestBytes)
    private let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 * 1024, alignment: 1)
    private var isClosing = false
    /// Answers not yet sent, in request order: `nil` where a command still works on its
    /// answer. Later answers wait for earlier ones, so a client reads them in the order
    /// it asked.
    private var answers: [Answer?] = []
    /// How many answers were sent: the number of the first in ``answers``.
    private var answersSent = 0
    /// The client closed its side: close once every answer has gone out.
    private var closeWhenAnswered = false
    /// The most answers one connection may wait for at once.
    static let maximumPendingAnswers = 64

    private struct Answer {
        let response: ControlResponse
        let thenClose: Bool
    }

    /// Monotonic nanoseconds of the last request or accept, for the idle timeout.
    private(set) var lastActivity = SystemClock.monotonicNanoseconds()

    init(server: ControlSocketServer, context: DriverContext, commands: ControlCommands) {
        self.server = server
        self.context = context
        self.commands = commands
        pipe = .allocate(capacity: 1)
        uv_pipe_init(context.loop, pipe, 0)
        pipe.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        readBuffer.deallocate()
    }

    private static func from(_ pointer: UnsafeMutableRawPointer?) -> ControlConnection {
        Unmanaged<ControlConnection>.fromOpaque(pointer!).takeUnretainedValue()
    }

    func startReading() {
        uv_read_start(
            asStream(pipe),
            { handle, _, buffer in
                let connection = ControlConnection.from(handle!.pointee.data)
                buffer!.pointee = uv_buf_init(
                    connection.readBuffer.baseAddress!.assumingMemoryBound(to: CChar.self),
                    UInt32(connection.readBuffer.count))
            },
            { stream, count, _ in
                ControlConnection.from(stream!.pointee.data).received(count: count)
            })
    }

    private func received(count: Int) {
        guard count >= 0 else {
            // EOF: the client may only have closed its side after its last request (`nc -N`,
            // `socat`): the answers queued or still being worked on go out before the
            // connection closes. A read error: the client is gone.
            if count == Int(UV_EOF.rawValue) {
                uv_read_stop(asStream(pipe))
                closeWhenAnswered = true
                sendReadyAnswers()
            } else {
                close()
            }
            return
        }
        lastActivity = SystemClock.monotonicNanoseconds()
        context.turn {
            for output in framer.feed(UnsafeRawBufferPointer(rebasing: readBuffer[0..<count])) {
                guard !isClosing, !closeWhenAnswered else { return }
                switch output {
                case .line(let line) where line.allSatisfy({ $0 == 32 || $0 == 9 }):
                    continue  // blank lines are allowed between requests
                case .line(let line):
                    guard answers.count < Self.maximumPendingAnswers else {
                        // Asking faster than commands answer: each waiting answer is memory.
                        context.countControlError("too_many_pending")
                        close()
                        return
                    }
                    let slot = answersSent + answers.count
                    answers.append(nil)
                    // Held by the reply until it comes (a closed connection ignores it).
                    let bound = LoopBound(self, context: context)
                    let context = self.context
                    let response = commands.handle(line, context: context) { response in
                        _ = context.execute { bound.value.answer(slot, response) }
                    }
                    if let response { answer(slot, response) }
                case .tooLong:
                    context.countControlError("too_large")
                    uv_read_stop(asStream(pipe))
                    answers.append(
                        Answer(
                            response: .failure("request longer than \(ControlProtocol.maximumRequestBytes) bytes"),
                            thenClose: true))
                    closeWhenAnswered = true
                    sendReadyAnswers()
                    return
                }
            }
        }
    }

    /// Fills answer number `slot` and sends every answer that is ready in order.
    private func answer(_ slot: Int, _ response: ControlResponse) {
        guard !isClosing, slot >= answersSent, slot - answersSent < answers.count else { return }
        if !response.ok { context.countControlError("bad_request") }
        answers[slot - answersSent] = Answer(response: response, thenClose: false)
        sendReadyAnswers()
    }

    private func sendReadyAnswers() {
        while !isClosing, let first = answers.first, let ready = first {
            answers.removeFirst()
            answersSent += 1
            send(ready.response, thenClose: ready.thenClose)
        }
        if !isClosing, answers.isEmpty, closeWhenAnswered { closeAfterAnswers() }
    }

    func send(_ response: ControlResponse, thenClose: Bool) {
        guard !isClosing else { return }
        let request = WriteRequest(bytes: ControlProtocol.encode(response), connection: thenClose ? self : nil)
        if thenClose { uv_read_stop(asStream(pipe)) }
        request.write(to: asStream(pipe))
        if uv_stream_get_write_queue_size(asStream(pipe)) > ControlSocketServer.maximumUnreadBytes {
            // A client that asks and never reads: its answers would grow the daemon without bound.
            context.countControlError("slow_reader")
            context.logger.warning("control socket: disconnected a client that does not read its answers")
            close()
        }
    }

    /// Stops reading and closes once every answer queued has been written (at once when
    /// none is): libuv writes in order, so the shutdown request completes after them.
    private func closeAfterAnswers() {
        guard !isClosing else { return }
        uv_read_stop(asStream(pipe))
        guard uv_stream_get_write_queue_size(asStream(pipe)) > 0 else {
            close()
            return
        }
        let shutdown = UnsafeMutablePointer<uv_shutdown_t>.allocate(capacity: 1)
        shutdown.pointee.data = Unmanaged.passRetained(self).toOpaque()
        let status = uv_shutdown(shutdown, asStream(pipe)) { request, _ in
            let connection = Unmanaged<ControlConnection>.fromOpaque(request!.pointee.data).takeRetainedValue()
            request!.deallocate()
            connection.close()
        }
        if status != 0 {
            Unmanaged<ControlConnection>.fromOpaque(shutdown.pointee.data).release()
            shutdown.deallocate()
            close()
        }
    }

    func close() {
        guard !isClosing else { return }
        isClosing = true
        // Retained until the close callback, which frees the handle and forgets the connection.
        pipe.pointee.data = Unmanaged.passRetained(self).toOpaque()
        uv_close(asHandle(pipe)) { handle in
            let connection = Unmanaged<ControlConnection>.fromOpaque(handle!.pointee.data).takeRetainedValue()
            connection.server.forget(connection)
            connection.pipe.deallocate()
        }
    }
}

/// A write in flight: its bytes (a copy libuv may read until it calls back) and request.
private final class WriteRequest {
    private let bytes: UnsafeMutableRawBufferPointer
    private let request = UnsafeMutablePointer<uv_write_t>.allocate(capacity: 1)
    private let connectionToClose: ControlConnection?

    init(bytes: [UInt8], connection: ControlConnection?) {
        self.bytes = .allocate(byteCount: bytes.count, alignment: 1)
        self.bytes.copyBytes(from: bytes)
        self.connectionToClose = connection
    }

    deinit {
        bytes.deallocate()
        request.deallocate()
    }

    func write(to stream: UnsafeMutablePointer<uv_stream_t>) {
        request.pointee.data = Unmanaged.passRetained(self).toOpaque()
        var buffer = uv_buf_init(bytes.baseAddress!.assumingMemoryBound(to: CChar.self), UInt32(bytes.count))
        let status = uv_write(request, stream, &buffer, 1) { request, _ in
            let write = Unmanaged<WriteRequest>.fromOpaque(request!.pointee.data).takeRetainedValue()
            write.connectionToClose?.close()
        }
        if status != 0 {
            Unmanaged<WriteRequest>.fromOpaque(request.pointee.data).release()
            connectionToClose?.close()
        }
    }
}

private func asStream(_ pipe: UnsafeMutablePointer<uv_pipe_t>) -> UnsafeMutablePointer<uv_stream_t> {
    UnsafeMutableRawPointer(pipe).assumingMemoryBound(to: uv_stream_t.self)
}

private func asHandle<Handle>(_ handle: UnsafeMutablePointer<Handle>) -> UnsafeMutablePointer<uv_handle_t> {
    UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)
}
