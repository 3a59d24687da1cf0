import Dispatch
import Overtime
import OvertimeLogUploader

#if canImport(Glibc)
    import Glibc
#endif

/// Feeds lines into the spool from stdin and from a Unix datagram socket, each on a
/// thread of its own (blocking reads never touch the runtime's loop). Whatever one read
/// returns is appended as one batch, so a burst becomes one group commit.
final class LineInput: Sendable {
    let spool: Spool
    private let rejected = Locked(0)

    init(spool: Spool) {
        self.spool = spool
    }

    /// Lines the spool refused (a full disk or quota); each is reported on stderr.
    var failed: Int { rejected.withLock { $0 } }

    func readStandardInput(onEnd: @escaping @Sendable () -> Void) {
        spawnThread(name: "stdin-reader") { [self] in
            var pending: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let count = read(STDIN_FILENO, &buffer, buffer.count)
                if count <= 0 { break }
                pending += buffer[0..<count]
                guard let lastNewline = pending.lastIndex(of: UInt8(ascii: "\n")) else { continue }
                append(pending[..<lastNewline].split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true))
                pending.removeSubrange(...lastNewline)
            }
            if !pending.isEmpty { append([pending[...]]) }
            onEnd()
        }
    }

    func readDatagrams(at path: String) throws {
        unlink(path)
        let socket = makeUnixSocket(datagram: true)
        guard socket >= 0, let address = UnixSocketAddress(path), address.withSockAddr({ bind(socket, $0, $1) }) == 0
        else { throw SpoolError.io(operation: "bind", path: path, errno: errno) }
        spawnThread(name: "dgram-reader") { [self] in
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let count = recv(socket, &buffer, buffer.count, 0)
                if count < 0 { break }
                append(buffer[0..<count].split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true))
            }
        }
    }

    private func append(_ lines: [ArraySlice<UInt8>]) {
        guard !lines.isEmpty else { return }
        do {
            try spool.append(lines)
        } catch {
            rejected.withLock { $0 += lines.count }
            let text = "log-uploader: could not spool \(lines.count) lines: \(error)\n"
            _ = text.withCString { write(STDERR_FILENO, $0, strlen($0)) }
        }
    }
}

/// The progress line: lines spooled, uploaded, pending, and time left in the grant.
final class Progress: Sendable {
    let runtime: Runtime
    let spool: Spool
    let uploader: LogUploader
    let input: LineInput

    init(runtime: Runtime, spool: Spool, uploader: LogUploader, input: LineInput) {
        self.runtime = runtime
        self.spool = spool
        self.uploader = uploader
        self.input = input
    }

    func every(seconds: Double) {
        spawnThread(name: "progress") { [self] in
            while runtime.state != .terminated {
                usleep(UInt32(seconds * 1_000_000))
                print()
            }
        }
    }

    func print() {
        let left = runtime.backgroundTimeRemaining
        let grant =
            left == Runtime.unlimitedTime
            ? "unlimited"
            : "\(Double(Int(left.components.seconds * 10) + Int(left.components.attoseconds / 100_000_000_000_000_000)) / 10)s"
        let statistics = uploader.statistics
        let line =
            "spooled=\(spool.appendedLines) uploaded=\(statistics.uploadedLines) pending=\(spool.pendingLines)"
            + " rejected=\(input.failed) state=\(runtime.state) time-left=\(grant)\n"
        _ = line.withCString { write(STDERR_FILENO, $0, strlen($0)) }
    }
}
