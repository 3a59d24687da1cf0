import CLibUV
import OvertimeSupport
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The one libuv loop of a runtime and the handles the runtime itself owns.
///
/// The deadline timer is a `timerfd` watched by a `uv_poll_t`, not a `uv_timer_t`:
/// libuv counts timer time in whole milliseconds from a cached loop time, so a libuv
/// timer fires up to two milliseconds late; a timerfd fires within the kernel's timer
/// slack (50 µs by default) of the nanosecond asked for.
///
/// Ownership: every handle's memory is allocated here and freed in `deinit`, after
/// `uv_loop_close`, so a close callback can never touch freed memory. All methods
/// except ``wake()`` and ``isCurrentThread`` run on the loop thread.
final class EventLoop: @unchecked Sendable {
    let raw: UnsafeMutablePointer<uv_loop_t>
    private let wakeHandle: UnsafeMutablePointer<uv_async_t>
    private let timerHandle: UnsafeMutablePointer<uv_poll_t>
    private let timerDescriptor: Int32
    private var ownedHandles: [UnsafeMutableRawPointer] = []
    private let loopThread = Atomic<UInt>(0)
    private let wakeGate = Locked<Bool>(true)  // true while the wake handle may be signalled

    /// Called on the loop thread after one or more ``wake()`` calls (coalesced).
    var onWake: () -> Void = {}
    /// Called on the loop thread when the deadline timer fires.
    var onTimer: () -> Void = {}
    /// What `uv_loop_close` returned once ``run()`` finished; `0` means every handle closed.
    private(set) var closeResult: Int32?

    init() throws(RuntimeError) {
        let descriptor = timerfd_create(CLOCK_MONOTONIC, Int32(TFD_NONBLOCK) | Int32(TFD_CLOEXEC))
        guard descriptor >= 0 else { throw RuntimeError.system(call: "timerfd_create", errno: errno) }
        raw = .allocate(capacity: 1)
        wakeHandle = .allocate(capacity: 1)
        timerHandle = .allocate(capacity: 1)
        timerDescriptor = descriptor
        let status = uv_loop_init(raw)
        guard status == 0 else {
            raw.deallocate()
            wakeHandle.deallocate()
            timerHandle.deallocate()
            close(descriptor)
            throw RuntimeError.libuv(call: "uv_loop_init", code: status)
        }
        ownedHandles = [UnsafeMutableRawPointer(wakeHandle), UnsafeMutableRawPointer(timerHandle)]
        raw.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        uv_async_init(raw, wakeHandle) { handle in
            EventLoop.owner(of: handle!.pointee.loop).onWake()
        }
        uv_poll_init(raw, timerHandle, descriptor)
        uv_poll_start(timerHandle, Int32(UV_READABLE.rawValue)) { handle, _, _ in
            let owner = EventLoop.owner(of: handle!.pointee.loop)
            var expirations: UInt64 = 0
            guard read(owner.timerDescriptor, &expirations, 8) == 8 else { return }  // spurious
            owner.onTimer()
        }
    }

    deinit {
        if closeResult == nil {
            // Never ran: close the handles so the loop can be closed and freed.
            closeAllHandles()
            uv_run(raw, UV_RUN_DEFAULT)
            _ = uv_loop_close(raw)
        }
        close(timerDescriptor)
        for handle in ownedHandles { handle.deallocate() }
        raw.deallocate()
    }

    private static func owner(of loop: UnsafeMutablePointer<uv_loop_t>?) -> EventLoop {
        Unmanaged<EventLoop>.fromOpaque(loop!.pointee.data).takeUnretainedValue()
    }

    /// Allocates a handle whose memory lives as long as the loop (freed in `deinit`, after
    /// `uv_loop_close`). For handles that exist until shutdown, such as signal watchers.
    func makeHandle<Handle>(_ type: Handle.Type) -> UnsafeMutablePointer<Handle> {
        let handle = UnsafeMutablePointer<Handle>.allocate(capacity: 1)
        ownedHandles.append(UnsafeMutableRawPointer(handle))
        return handle
    }

    /// Whether the caller runs on the loop thread.
    @inline(__always)
    var isCurrentThread: Bool {
        let owner = loopThread.load(ordering: .acquiring)
        // glibc's pthread_t is the thread's address: equal values are the same thread, and
        // comparing them directly saves a library call on every begin and end.
        return owner != 0 && owner == UInt(pthread_self())
    }

    /// Wakes the loop from any thread. Returns `false` once the loop has shut down.
    @discardableResult
    func wake() -> Bool {
        wakeGate.withLock { open in
            // Under the gate so that the handle cannot be closed between check and send.
            if open { uv_async_send(wakeHandle) }
            return open
        }
    }

    /// Arms the single deadline timer to fire after `nanoseconds` (replacing any earlier arming).
    func armTimer(nanoseconds: UInt64) {
        let delay = max(nanoseconds, 1)  // an all-zero value would disarm it
        var setting = itimerspec()
        setting.it_value.tv_sec = Int(delay / 1_000_000_000)
        setting.it_value.tv_nsec = Int(delay % 1_000_000_000)
        timerfd_settime(timerDescriptor, 0, &setting, nil)
    }

    /// Stops the deadline timer.
    func disarmTimer() {
        var setting = itimerspec()
        timerfd_settime(timerDescriptor, 0, &setting, nil)
    }

    /// Makes the calling thread the loop thread, before the loop runs on it (drivers set
    /// up their handles there first).
    func adoptCurrentThread() {
        loopThread.store(UInt(pthread_self()), ordering: .releasing)
    }

    /// Runs the loop on the calling thread until every handle is closed, then closes the loop.
    func run() {
        adoptCurrentThread()
        uv_run(raw, UV_RUN_DEFAULT)
        // libuv's inotify descriptor (the loop's file-system watches: a folder a socket is
        // awaited in) is closed in uv_loop_close, and its last close waits for fsnotify's
        // reaper, an SRCU grace period: 4-20 ms, most of a daemon's SIGTERM → exit. Held by a
        // ring, the loop's close is not the last; the ring's leaves that to a kernel worker.
        let inotify = raw.pointee.inotify_fd
        let holder = inotify >= 0 ? overtime_hold_in_io_uring(inotify) : -1
        closeResult = uv_loop_close(raw)
        if holder >= 0 { close(holder) }
        loopThread.store(0, ordering: .releasing)
    }

    /// Closes every handle on the loop (the runtime's and any a driver added), so that
    /// ``run()`` returns. Runs on the loop thread.
    func closeAllHandles() {
        wakeGate.withLock { $0 = false }
        uv_walk(
            raw,
            { handle, _ in
                if uv_is_closing(handle) == 0 { uv_close(handle, nil) }
            }, nil)
    }
}
