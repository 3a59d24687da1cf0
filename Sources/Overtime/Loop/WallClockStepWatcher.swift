// Noticing that the wall clock was set (NTP stepping it, an operator, a resume from
// suspend): a CLOCK_REALTIME timerfd armed with TFD_TIMER_CANCEL_ON_SET.

import CLibUV

#if canImport(Glibc)
    import Glibc
#endif

/// Calls back on the loop thread whenever the wall clock is set discontinuously, so that
/// plans kept in wall-clock time are recomputed. The kernel cancels the timer (its read
/// fails with `ECANCELED`) on every such change; it is then re-armed. Loop-thread only.
final class WallClockStepWatcher {
    private let descriptor: Int32
    private let poll: UnsafeMutablePointer<uv_poll_t>
    private let onStep: () -> Void

    // <sys/timerfd.h>'s flags; Glibc's module leaves the macros out.
    private static let absoluteTime: Int32 = 1 << 0
    private static let cancelOnSet: Int32 = 1 << 1

    /// Starts watching on `loop`; `nil` (logged by the caller) when the kernel refuses.
    init?(loop: EventLoop, onStep: @escaping () -> Void) {
        let descriptor = timerfd_create(CLOCK_REALTIME, Int32(TFD_NONBLOCK) | Int32(TFD_CLOEXEC))
        guard descriptor >= 0 else { return nil }
        self.descriptor = descriptor
        self.onStep = onStep
        poll = loop.makeHandle(uv_poll_t.self)
        guard arm() else {
            close(descriptor)
            return nil
        }
        uv_poll_init(loop.raw, poll, descriptor)
        poll.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        uv_poll_start(poll, Int32(UV_READABLE.rawValue)) { handle, _, _ in
            Unmanaged<WallClockStepWatcher>.fromOpaque(handle!.pointee.data).takeUnretainedValue().readable()
        }
    }

    deinit {
        close(descriptor)
    }

    /// Arms the timer at the far end of time, so it only ever ends by being cancelled.
    private func arm() -> Bool {
        var setting = itimerspec()
        setting.it_value.tv_sec = Int(Int32.max)
        return timerfd_settime(descriptor, Self.absoluteTime | Self.cancelOnSet, &setting, nil) == 0
    }

    private func readable() {
        var expirations: UInt64 = 0
        let count = read(descriptor, &expirations, 8)
        guard count < 0, errno == ECANCELED else { return }
        _ = arm()
        onStep()
    }
}
