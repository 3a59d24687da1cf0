// The descriptor a memory pressure source is told on, polled on the runtime's loop.

import CLibUV
import Overtime
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// An opened memory pressure source: a PSI file (`POLLPRI`, never read), a FIFO or a
/// connected Unix stream socket (`POLLIN`, whatever arrives read and discarded).
struct OpenedPressureSource: Sendable {
    enum Kind: Sendable { case pressureFile, fifo, socket }

    let descriptor: Int32
    let kind: Kind
    /// An io_uring holding the PSI trigger's file (`overtime_hold_in_io_uring`), or -1: the
    /// trigger's last close waits for an RCU grace period (5-20 ms measured), which on the
    /// descriptor's own close would be on the program's way out after SIGTERM. With the
    /// ring's reference, the descriptor's close is not the last, and the ring's close leaves
    /// the last to a kernel worker.
    var holder: Int32 = -1

    /// Closes the descriptor (and the ring holding its file).
    func closeDescriptors() {
        close(descriptor)
        if holder >= 0 { close(holder) }
    }

    /// Opens or connects to `source.path` and writes `source.written` to it, as systemd's
    /// protocol says; on the caller's thread (a connect can wait).
    static func opening(_ source: MemoryPressureSource) throws(MemoryPressureError) -> OpenedPressureSource {
        let path = source.path
        var info = stat()
        guard stat(path, &info) == 0 else { throw .cannotWatch(path: path, operation: "stat", errno: errno) }
        var opened: OpenedPressureSource
        switch info.st_mode & S_IFMT {
        case S_IFREG:
            // A PSI file takes its trigger in one write, which needs it open for writing.
            let descriptor = open(path, (source.written.isEmpty ? O_RDONLY : O_RDWR) | O_NONBLOCK | O_CLOEXEC)
            guard descriptor >= 0 else { throw .cannotWatch(path: path, operation: "open", errno: errno) }
            opened = OpenedPressureSource(descriptor: descriptor, kind: .pressureFile)
        case S_IFIFO:
            // Read and write: holding a writer of its own, the FIFO never reports a hang-up
            // (which would wake the loop without end) when the teller closes its end.
            let descriptor = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)
            guard descriptor >= 0 else { throw .cannotWatch(path: path, operation: "open", errno: errno) }
            opened = OpenedPressureSource(descriptor: descriptor, kind: .fifo)
        case S_IFSOCK:
            guard let address = UnixSocketAddress(path) else {
                throw .cannotWatch(path: path, operation: "a Unix socket path", errno: ENAMETOOLONG)
            }
            let descriptor = makeUnixSocket(datagram: false)
            guard descriptor >= 0 else { throw .cannotWatch(path: path, operation: "socket", errno: errno) }
            let connected = address.withSockAddr { connect(descriptor, $0, $1) }
            guard connected == 0 else {
                let code = errno
                close(descriptor)
                throw .cannotWatch(path: path, operation: "connect", errno: code)
            }
            opened = OpenedPressureSource(descriptor: descriptor, kind: .socket)
        default:
            throw .unavailable("\(path) is not a pressure stall information file, a FIFO or a Unix socket")
        }
        // epoll takes what implements poll (PSI files, FIFOs, sockets), never a plain file:
        // checked before anything is written, so a path naming some other file never has
        // a trigger written into it.
        let pollError = overtime_check_pollable(opened.descriptor, opened.kind == .pressureFile ? 1 : 0)
        guard pollError == 0 else {
            close(opened.descriptor)
            throw .cannotWatch(path: path, operation: "poll (not a pressure stall information file?)", errno: pollError)
        }
        if !source.written.isEmpty {
            let code = writeAll(opened.descriptor, source.written, to: opened.kind == .socket ? .socket : .file)
            guard code == 0 else {
                close(opened.descriptor)
                // EINVAL from a PSI file: a trigger it does not take (a window outside
                // 500 ms to 10 s, or not a multiple of 2 s for an unprivileged process).
                throw .cannotWatch(path: path, operation: "write the trigger", errno: code)
            }
        }
        if opened.kind == .pressureFile, !source.written.isEmpty {
            // Without a ring (io_uring turned off or filtered), the close waits: slower, not wrong.
            opened.holder = overtime_hold_in_io_uring(opened.descriptor)
        }
        if opened.kind == .fifo {
            _ = opened.discardQueued()  // what was written before watching (its own write too) is no pressure
        }
        if opened.kind == .socket {
            _ = fcntl(opened.descriptor, F_SETFL, fcntl(opened.descriptor, F_GETFL) | O_NONBLOCK)
        }
        return opened
    }

    /// Reads and discards what is queued; `false` when the other end closed.
    func discardQueued() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 512)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count > 0 { continue }
            if count < 0, errno == EINTR { continue }
            return count != 0
        }
    }
}

/// Polls an opened source on the loop; loop thread only.
final class MemoryPressureWatcher {
    private let source: OpenedPressureSource
    private let poll: UnsafeMutablePointer<uv_poll_t>
    private let onPressure: () -> Void
    private let onEnd: (String) -> Void
    private var stopped = false

    /// Starts polling; `onPressure` for each report, `onEnd` once when the source fails
    /// or closes (the watcher has then stopped).
    init(
        _ source: OpenedPressureSource, context: DriverContext, onPressure: @escaping () -> Void,
        onEnd: @escaping (String) -> Void
    ) throws(MemoryPressureError) {
        context.assertOnLoop()
        self.source = source
        self.onPressure = onPressure
        self.onEnd = onEnd
        poll = context.makeHandle(uv_poll_t.self)
        let initialized = uv_poll_init(context.loop, poll, source.descriptor)
        guard initialized == 0 else {
            // A descriptor epoll refuses (a plain file is not a PSI file). The handle's memory
            // is the loop's, freed when it closes.
            source.closeDescriptors()
            stopped = true
            throw .cannotWatch(path: "descriptor \(source.descriptor)", operation: "poll", errno: -initialized)
        }
        poll.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        let events = source.kind == .pressureFile ? UV_PRIORITIZED.rawValue : UV_READABLE.rawValue
        uv_poll_start(poll, Int32(events)) { handle, status, _ in
            Unmanaged<MemoryPressureWatcher>.fromOpaque(handle!.pointee.data).takeUnretainedValue().ready(status)
        }
    }

    /// Stops polling and closes the descriptor; again is nothing.
    func stop() {
        guard !stopped else { return }
        stopped = true
        uv_poll_stop(poll)
        uv_close(UnsafeMutableRawPointer(poll).assumingMemoryBound(to: uv_handle_t.self), nil)  // memory: the loop's
        source.closeDescriptors()
    }

    private func ready(_ status: Int32) {
        guard status >= 0 else {
            stop()
            return onEnd("polling failed: \(String(cString: uv_strerror(status)))")
        }
        switch source.kind {
        case .pressureFile:
            onPressure()
        case .fifo, .socket:
            guard source.discardQueued() else {
                stop()
                return onEnd("the other end closed the socket")
            }
            onPressure()
        }
    }
}
