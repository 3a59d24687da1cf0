// The producer's side of the acknowledged ingestion protocol (`IngestProtocol.swift`).

import Overtime
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Sends batches of lines to a ``SpoolIngestServer`` and returns once the spool made each
/// durable: what a producer may then discard.
///
/// ```swift
/// let client = try SpoolIngestClient(path: "/run/log-uploader/ingest.sock")
/// let stored = try client.send(["first line", "second line"])   // durable: 41...42
/// ```
///
/// Blocking; one batch at a time per client. Not for the loop thread.
public final class SpoolIngestClient {
    private let fd: Int32
    private var splitter = LineSplitter(keepsEmptyLines: true)
    private var replies: [String] = []

    /// Why a batch was not acknowledged.
    public enum Failure: Error, Sendable, CustomStringConvertible {
        /// The spool refused the batch: nothing of it was stored.
        case refused(String)
        /// The connection broke before the answer: the batch may or may not be stored.
        case connection(String)

        /// A sentence naming the cause.
        public var description: String {
            switch self {
            case .refused(let reason): "refused: \(reason)"
            case .connection(let reason): "connection: \(reason)"
            }
        }
    }

    /// Connects to the server at `path`.
    public init(path: String) throws(Failure) {
        guard let address = UnixSocketAddress(path) else {
            throw .connection("\(path) is too long for a socket address")
        }
        fd = makeUnixSocket(datagram: false)
        guard fd >= 0 else { throw .connection("socket: \(errnoDescription())") }
        guard address.withSockAddr({ connect(fd, $0, $1) }) == 0 else {
            let reason = "connect \(path): \(errnoDescription())"
            close(fd)
            throw .connection(reason)
        }
    }

    deinit {
        close(fd)
    }

    /// Sends `lines` (without newlines; empty ones are skipped) as one batch and returns
    /// the sequences they were made durable at, or nil when none was sent.
    @discardableResult
    public func send(_ lines: [String]) throws(Failure) -> ClosedRange<UInt64>? {
        var bytes: [UInt8] = []
        for line in lines where !line.isEmpty {
            guard !line.utf8.contains(UInt8(ascii: "\n")) else { throw .refused("a line contains a newline") }
            bytes += line.utf8
            bytes.append(UInt8(ascii: "\n"))
        }
        bytes.append(UInt8(ascii: "\n"))
        let failure = writeAll(fd, bytes, to: .socket)
        if failure != 0 { throw .connection("send: \(errnoDescription(failure))") }
        switch try nextReply() {
        case .stored(let range): return range
        case .refused(let reason): throw .refused(reason)
        }
    }

    private func nextReply() throws(Failure) -> IngestProtocol.Reply {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while replies.isEmpty {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else {
                throw .connection(count == 0 ? "the server closed the connection" : errnoDescription())
            }
            replies += splitter.split(buffer[0..<count]).map { String(decoding: $0, as: UTF8.self) }
        }
        let line = replies.removeFirst()
        guard let reply = IngestProtocol.decode(line) else { throw .connection("unexpected reply '\(line)'") }
        return reply
    }
}
