// The spool's side of the acknowledged ingestion protocol (`IngestProtocol.swift`).

import Dispatch
import Overtime
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Serves the acknowledged ingestion protocol on a Unix stream socket: each batch a
/// producer sends is appended to the spool as one group commit and answered with the
/// sequences it was made durable at.
///
/// One thread polls the listener and every connection (at most 64, or an eighth of the
/// process's descriptor limit when that is lower; more are told so and closed). A producer that
/// does not read its answers is disconnected once 64 KiB of them wait. ``stop()`` answers
/// the complete batches already received, then closes everything and removes the socket.
public final class SpoolIngestServer: Sendable {
    /// The socket's path (for a passed socket: where its service manager bound it).
    public let path: String
    private let spool: Spool
    private let listener: ListeningSocket
    /// A pipe: `stop()` writes a byte, the serving thread's poll wakes.
    private let wakeup: (read: Int32, write: Int32)
    private let stopped = DispatchSemaphore(value: 0)
    private let counters = Locked(Counts())

    private struct Counts {
        var batches = 0
        var refusedBatches = 0
        var refusedConnections = 0
        var disconnectedSlowReaders = 0
        var stopping = false
    }

    private static let maximumPendingReplyBytes = 64 * 1024

    /// Binds `path` (mode `mode`, 0600 by default: the daemon's user only) and starts
    /// serving. Refuses a path that is anything but a stale socket of an earlier run.
    public convenience init(path: String, spool: Spool, mode: mode_t = 0o600) throws(SpoolError) {
        try self.init(endpoint: .path(path), spool: spool, mode: mode)
    }

    /// Serves `endpoint`: a path bound as ``init(path:spool:mode:)`` binds it, or the
    /// listening stream socket the service manager passed under a name (its `.socket`
    /// unit sets its path, mode and group; ``stop()`` closes it and leaves its file).
    ///
    /// - Throws: ``SpoolError/socketUnavailable(path:reason:)`` for a path that is taken
    ///   or a name under which no listening Unix stream socket was passed.
    public init(endpoint: SocketEndpoint, spool: Spool, mode: mode_t = 0o600) throws(SpoolError) {
        do throws(ListeningSocket.Failure) {
            listener = try ListeningSocket(endpoint, mode: mode, backlog: 64)
        } catch {
            throw SpoolError(error, path: endpoint.description)
        }
        let path = endpoint.path ?? (listener.path.isEmpty ? endpoint.description : listener.path)
        self.path = path
        self.spool = spool
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else {
            let code = errno
            listener.closeAndRemove()
            throw .io(operation: "pipe", path: path, errno: code)
        }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        wakeup = (ends[0], ends[1])
        spawnThread(name: "ingest-socket") { [self] in serve() }
    }

    /// Batches stored, batches refused, connections refused (over the limit), and
    /// producers disconnected for not reading their answers.
    public var statistics: (batches: Int, refusedBatches: Int, refusedConnections: Int, slowReaders: Int) {
        counters.withLock { ($0.batches, $0.refusedBatches, $0.refusedConnections, $0.disconnectedSlowReaders) }
    }

    /// Answers the complete batches already received, closes every connection, removes
    /// the socket file and returns. Safe to call more than once.
    public func stop() {
        let first = counters.withLock { counts in
            defer { counts.stopping = true }
            return !counts.stopping
        }
        guard first else { return }
        var one: UInt8 = 1
        _ = write(wakeup.write, &one, 1)
        stopped.wait()
    }

    private final class Connection {
        let fd: Int32
        var splitter = LineSplitter(keepsEmptyLines: true)
        var batch: [[UInt8]] = []
        var refusal: String?
        var replies: [UInt8] = []
        var closed = false

        init(fd: Int32) { self.fd = fd }
    }

    private func serve() {
        var connections: [Connection] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        /// While out of descriptors with none in reserve, the listener is not watched until then.
        var pausedUntil: ContinuousClock.Instant?
        while true {
            let stopping = counters.withLock { $0.stopping }
            if let until = pausedUntil, ContinuousClock.now >= until { pausedUntil = nil }
            let watching = !stopping && pausedUntil == nil
            var fds = [pollfd(fd: wakeup.read, events: Int16(POLLIN), revents: 0)]
            if watching { fds.append(pollfd(fd: listener.fd, events: Int16(POLLIN), revents: 0)) }
            for connection in connections {
                let events = POLLIN | (connection.replies.isEmpty ? 0 : POLLOUT)
                fds.append(pollfd(fd: connection.fd, events: Int16(events), revents: 0))
            }
            // Stopping: one last pass over what is readable now, without waiting.
            let timeout: Int32 = stopping ? 0 : pausedUntil == nil ? -1 : 100
            if poll(&fds, nfds_t(fds.count), timeout) < 0, errno != EINTR { break }
            if watching, fds[1].revents != 0, !acceptAll(&connections) {
                pausedUntil = .now + .milliseconds(100)
            }
            for connection in connections {
                read(connection, into: &buffer)
                flushReplies(connection)
            }
            connections.removeAll { connection in
                if connection.closed { close(connection.fd) }
                return connection.closed
            }
            if stopping { break }
        }
        for connection in connections { close(connection.fd) }
        listener.closeAndRemove()
        close(wakeup.read)
        close(wakeup.write)
        stopped.signal()
    }

    /// Accepts every waiting client; false when out of descriptors with none in reserve.
    private func acceptAll(_ connections: inout [Connection]) -> Bool {
        let outOfDescriptors = IngestProtocol.encode(.refused("the spool's process is out of file descriptors"))
        while true {
            switch listener.accept(refusal: outOfDescriptors) {
            case .none: return true
            case .exhausted: return false
            case .turnedAway: counters.withLock { $0.refusedConnections += 1 }
            case .connection(let fd):
                guard connections.count < IngestProtocol.maximumConnections else {
                    counters.withLock { $0.refusedConnections += 1 }
                    ListeningSocket.refuse(fd, IngestProtocol.encode(.refused("too many connections")))
                    continue
                }
                connections.append(Connection(fd: fd))
            }
        }
    }

    private func read(_ connection: Connection, into buffer: inout [UInt8]) {
        while !connection.closed {
            let count = recv(connection.fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if count == 0 || (count < 0 && errno != EAGAIN && errno != EINTR) {
                connection.closed = true  // an unfinished batch was never acknowledged: the producer resends
                return
            }
            guard count > 0 else { return }
            let truncatedBefore = connection.splitter.truncatedLines
            let lines = connection.splitter.split(buffer[0..<count])
            if connection.splitter.truncatedLines > truncatedBefore {
                connection.refusal = "a line is longer than \(SegmentFormat.maximumLineBytes) bytes"
            }
            for line in lines {
                if line.isEmpty {
                    answerBatch(connection)
                } else if connection.batch.count < IngestProtocol.maximumBatchLines {
                    connection.batch.append(line)
                } else {
                    connection.refusal = "more than \(IngestProtocol.maximumBatchLines) lines in one batch"
                }
            }
            if connection.replies.count > Self.maximumPendingReplyBytes {
                counters.withLock { $0.disconnectedSlowReaders += 1 }
                connection.closed = true
            }
        }
    }

    private func answerBatch(_ connection: Connection) {
        defer {
            connection.batch = []
            connection.refusal = nil
        }
        let reply: IngestProtocol.Reply
        if let refusal = connection.refusal {
            reply = .refused(refusal)
        } else {
            do throws(SpoolError) {
                reply = .stored(try spool.append(connection.batch))
            } catch {
                reply = .refused("\(error)")
            }
        }
        counters.withLock {
            if case .stored = reply { $0.batches += 1 } else { $0.refusedBatches += 1 }
        }
        connection.replies += IngestProtocol.encode(reply)
    }

    private func flushReplies(_ connection: Connection) {
        while !connection.closed, !connection.replies.isEmpty {
            let sent = send(
                connection.fd, connection.replies, connection.replies.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            if sent < 0 {
                if errno != EAGAIN && errno != EINTR { connection.closed = true }
                return
            }
            connection.replies.removeFirst(sent)
        }
    }
}
