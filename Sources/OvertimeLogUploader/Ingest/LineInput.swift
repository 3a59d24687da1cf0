import Dispatch
import Metrics
import Overtime
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Feeds lines into a spool from standard input and from a Unix datagram socket, each on
/// a thread of its own (blocking I/O never touches the runtime's loop). Whatever one read
/// returns is appended as one batch, so a burst becomes one group commit.
///
/// On termination, ``readToEnd(then:)`` makes each reader take what is already buffered
/// (stdin up to what `FIONREAD` reports, datagrams until `EAGAIN`) before the final drain,
/// so lines a producer already wrote are not left in a pipe when the process exits.
///
/// After a burst (a full buffer or more read), a reader gives the allocator's free memory
/// back to the system at the first moment its input is quiet, so a daemon's size after a
/// burst is its size before it.
///
/// A line standard input had not finished when the reader was stopped (a producer cut off
/// mid-line by the stop) is stored with ``cutMarker`` after its bytes and counted as
/// truncated: never passed off as whole. At the end of the input (EOF) a last line without
/// a newline is whole, as in any text file.
///
/// Counted: `overtime_ingest_rejected_lines_total` (the spool refused them: a full disk or
/// quota) and `overtime_ingest_truncated_lines_total` (cut to the line limit, or at stop).
public final class LineInput: Sendable {
    /// The spool lines go to.
    public let spool: Spool
    private let counts = Locked(Counts())
    private let stopPipe: (read: Int32, write: Int32)
    private let readers = DispatchGroup()
    private let rejectedLines = Counter(label: "overtime_ingest_rejected_lines_total")
    private let truncatedLines = Counter(label: "overtime_ingest_truncated_lines_total")

    private struct Counts {
        var rejected = 0
        var truncated = 0
        var truncatedDatagrams = 0
        var cutAtStop = 0
    }

    /// What follows the bytes of a line cut by the stop, so a collector can tell it from a
    /// whole one.
    public static let cutMarker = " [cut: log-uploader stopped before this line ended]"

    /// Reads into `spool`; nothing is read until a `read…` method is called.
    public init(spool: Spool) {
        self.spool = spool
        var ends: [Int32] = [-1, -1]
        _ = pipe(&ends)
        stopPipe = (ends[0], ends[1])
    }

    /// Lines the spool refused (a full disk or quota); each batch is reported on stderr.
    public var rejected: Int { counts.withLock { $0.rejected } }
    /// Lines cut to the spool's line limit (1 MiB), or cut by the stop.
    public var truncated: Int { counts.withLock { $0.truncated + $0.truncatedDatagrams + $0.cutAtStop } }

    /// Reads lines from standard input until it ends (then calls `onEnd`, on the reader's
    /// thread) or ``readToEnd(then:)`` is called.
    public func readStandardInput(onEnd: @escaping @Sendable () -> Void) {
        readers.enter()
        spawnThread(name: "stdin-reader") { [self] in
            var splitter = LineSplitter()
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            var burst = BurstMemoryPolicy(threshold: buffer.count)
            var stopping = false
            var leftAtStop: Int?
            var atEnd = false
            while !atEnd {
                if !stopping {
                    var fds = [
                        pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0),
                        pollfd(fd: stopPipe.read, events: Int16(POLLIN), revents: 0),
                    ]
                    // Only after a burst: one more poll, that does not wait, to see quiet.
                    if burst.isDue, poll(&fds, 2, 0) == 0, burst.quiet() { AllocatorMemory.returnFreeMemory() }
                    if poll(&fds, 2, -1) < 0 { continue }
                    stopping = fds[1].revents != 0
                    if stopping, fds[0].revents == 0 { break }
                }
                // Stopping: only what was buffered when the stop came, so the read never
                // blocks and a producer that keeps writing cannot hold the stop.
                if stopping, leftAtStop == nil {
                    var available: Int32 = 0
                    leftAtStop = ioctl(STDIN_FILENO, UInt(FIONREAD), &available) == 0 ? Int(available) : 0
                }
                if let left = leftAtStop, left <= 0 { break }
                let count = read(STDIN_FILENO, &buffer, min(buffer.count, leftAtStop ?? buffer.count))
                if count > 0, let left = leftAtStop { leftAtStop = left - count }
                if count < 0, errno == EINTR { continue }
                atEnd = count <= 0
                if count > 0 {
                    append(splitter.split(buffer[0..<count]))
                    burst.read(count)
                }
                let newlyTruncated = counts.withLock { counts in
                    defer { counts.truncated = splitter.truncatedLines }
                    return splitter.truncatedLines - counts.truncated
                }
                if newlyTruncated > 0 { truncatedLines.increment(by: Int64(newlyTruncated)) }
            }
            if let last = splitter.finish() {
                if atEnd {
                    append([last])
                } else {
                    // Stopped mid-line: the rest never comes, so it is stored marked as cut.
                    let marker = Array(Self.cutMarker.utf8)
                    append([last.prefix(splitter.maximumLineBytes - marker.count) + marker])
                    counts.withLock { $0.cutAtStop += 1 }
                    truncatedLines.increment()
                    report("the line being read when the input was stopped was cut; stored marked as cut")
                }
            }
            if burst.quiet() { AllocatorMemory.returnFreeMemory() }  // the input is over: quiet for good
            readers.leave()
            if atEnd { onEnd() }
        }
    }

    /// Reads datagrams at `path` (each a batch of lines; at most 64 KiB: longer ones are
    /// truncated, counted and reported). The path is claimed as the runtime's control
    /// socket is (a lock beside it for the socket's life, the socket renamed into place
    /// with mode `mode` — 0600 by default: only the daemon's user may send): a path that
    /// is anything but a stale socket of an earlier run is refused. The socket is removed
    /// by ``readToEnd(then:)``, if the path still names it.
    ///
    /// - Throws: ``SpoolError/socketUnavailable(path:reason:)`` for a path that is taken,
    ///   or an I/O error when the socket cannot be made or bound.
    public func readDatagrams(at path: String, mode: mode_t = 0o600) throws(SpoolError) {
        try readDatagrams(from: .path(path), mode: mode)
    }

    /// Reads datagrams from `endpoint`: a path bound as ``readDatagrams(at:mode:)`` binds
    /// it, or the datagram socket the service manager passed under a name (its `.socket`
    /// unit sets its path and mode; it is closed, not removed, by ``readToEnd(then:)``, and
    /// what is sent while the daemon is stopped waits in it for the next start).
    ///
    /// - Throws: ``SpoolError/socketUnavailable(path:reason:)`` for a path that is taken
    ///   or a name under which no Unix datagram socket was passed, or an I/O error when the
    ///   socket cannot be made or bound.
    public func readDatagrams(from endpoint: SocketEndpoint, mode: mode_t = 0o600) throws(SpoolError) {
        let (socket, claim) = try Self.datagramSocket(endpoint, mode: mode)
        if let warning = endpoint.path.flatMap(SocketPathClaim.sharedFolderWarning(for:)) { report(warning) }
        readers.enter()
        spawnThread(name: "dgram-reader") { [self] in
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            var burst = BurstMemoryPolicy(threshold: buffer.count)
            var stopping = false
            while true {
                if !stopping {
                    var fds = [
                        pollfd(fd: socket, events: Int16(POLLIN), revents: 0),
                        pollfd(fd: stopPipe.read, events: Int16(POLLIN), revents: 0),
                    ]
                    if poll(&fds, 2, -1) < 0 { continue }
                    stopping = fds[1].revents != 0
                }
                // MSG_TRUNC: the datagram's real length, so a longer one is seen, not cut silently.
                let count = recv(socket, &buffer, buffer.count, Int32(MSG_DONTWAIT | MSG_TRUNC))
                if count < 0 {
                    let code = errno
                    if code == EAGAIN, !stopping, burst.quiet() { AllocatorMemory.returnFreeMemory() }
                    if code == EINTR || (code == EAGAIN && !stopping) { continue }
                    break
                }
                burst.read(count)
                if count > buffer.count {
                    counts.withLock { $0.truncatedDatagrams += 1 }
                    truncatedLines.increment()
                    report("a datagram of \(count) bytes was truncated to \(buffer.count)")
                }
                var splitter = LineSplitter()
                var lines = splitter.split(buffer[0..<min(count, buffer.count)])
                if let last = splitter.finish() { lines.append(last) }
                append(lines)
            }
            claim?.remove()
            close(socket)
            readers.leave()
        }
    }

    /// The datagram socket `endpoint` names: bound at its path under a claim, or taken from
    /// the sockets the service manager passed (no claim: its path is the manager's).
    private static func datagramSocket(_ endpoint: SocketEndpoint, mode: mode_t) throws(SpoolError) -> (
        Int32, SocketPathClaim?
    ) {
        let path = endpoint.description
        guard endpoint.path != nil else {
            do throws(ListeningSocket.Failure) {
                return (try InheritedSockets.passed.take(name: endpoint.inheritedName ?? "", datagram: true).fd, nil)
            } catch {
                throw SpoolError(error, path: path)
            }
        }
        let socket = makeUnixSocket(datagram: true)
        guard socket >= 0 else { throw .io(operation: "socket", path: path, errno: errno) }
        do throws(ListeningSocket.Failure) {
            let claim = try SocketPathClaim(path: path, datagram: true)
            try claim.place(socket, mode: mode)
            return (socket, claim)
        } catch {
            close(socket)
            throw SpoolError(error, path: path)
        }
    }

    /// Makes every reader take what is already buffered, then calls `body` (on a reader's
    /// thread or the caller's).
    public func readToEnd(then body: @escaping @Sendable () -> Void) {
        var one: UInt8 = 1
        _ = write(stopPipe.write, &one, 1)
        readers.notify(queue: .global(), execute: body)
    }

    private func append(_ lines: [[UInt8]]) {
        guard !lines.isEmpty else { return }
        do {
            try spool.append(lines)
        } catch {
            counts.withLock { $0.rejected += lines.count }
            rejectedLines.increment(by: Int64(lines.count))
            report("could not spool \(lines.count) lines: \(error)")
        }
    }

    private func report(_ text: String) {
        let line = "log-uploader: \(text)\n"
        _ = line.withCString { write(STDERR_FILENO, $0, strlen($0)) }
    }
}
