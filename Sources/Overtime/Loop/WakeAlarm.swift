// Waking the system from suspend at a wall-clock time, as systemd's WakeSystem= does: a
// CLOCK_REALTIME_ALARM timerfd, which the kernel lets only CAP_WAKE_ALARM arm.

import CLibUV
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A timer that wakes the machine from suspend at a wall-clock time and calls back on the
/// loop thread when it fires (woken for it, or simply reached while awake). Loop-thread
/// only.
final class WakeAlarm {
    private let descriptor: Int32
    private let poll: UnsafeMutablePointer<uv_poll_t>
    private let onFire: () -> Void

    // <sys/timerfd.h>'s flag and <time.h>'s clock; Glibc's module leaves the macros out.
    private static let absoluteTime: Int32 = 1 << 0
    private static let realtimeAlarm: clockid_t = 8

    /// Why this process cannot wake the system (no `CAP_WAKE_ALARM`: `EPERM`; a kernel
    /// without alarm timers: `EINVAL`), or `nil` when it can. From any thread.
    static func unavailableReason() -> String? {
        let descriptor = timerfd_create(realtimeAlarm, Int32(TFD_NONBLOCK) | Int32(TFD_CLOEXEC))
        guard descriptor < 0 else {
            close(descriptor)
            return nil
        }
        let error = errno
        let hint =
            error == EPERM
            ? " (it needs CAP_WAKE_ALARM: AmbientCapabilities=CAP_WAKE_ALARM in its unit)"
            : error == EINVAL ? " (this kernel has no alarm timers)" : ""
        return "timerfd_create(CLOCK_REALTIME_ALARM): \(errnoDescription(error))\(hint)"
    }

    /// An alarm on `loop`, not armed; `nil` (with `errno` set) when the kernel refuses.
    init?(loop: EventLoop, onFire: @escaping () -> Void) {
        let descriptor = timerfd_create(Self.realtimeAlarm, Int32(TFD_NONBLOCK) | Int32(TFD_CLOEXEC))
        guard descriptor >= 0 else { return nil }
        self.descriptor = descriptor
        self.onFire = onFire
        poll = loop.makeHandle(uv_poll_t.self)
        uv_poll_init(loop.raw, poll, descriptor)
        poll.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        uv_poll_start(poll, Int32(UV_READABLE.rawValue)) { handle, _, _ in
            Unmanaged<WakeAlarm>.fromOpaque(handle!.pointee.data).takeUnretainedValue().readable()
        }
    }

    deinit {
        uv_poll_stop(poll)
        close(descriptor)
    }

    /// Arms the alarm at `time` (`nil`: disarmed); `false`, with `errno` set, when the
    /// kernel refuses.
    func arm(at time: WallClockInstant?) -> Bool {
        var setting = itimerspec()
        if let time {
            // The epoch itself would disarm it: a time in the past fires at once.
            let nanoseconds = max(time.nanosecondsSinceEpoch, 1)
            setting.it_value.tv_sec = Int(nanoseconds / 1_000_000_000)
            setting.it_value.tv_nsec = Int(nanoseconds % 1_000_000_000)
        }
        return timerfd_settime(descriptor, Self.absoluteTime, &setting, nil) == 0
    }

    private func readable() {
        var expirations: UInt64 = 0
        guard read(descriptor, &expirations, 8) == 8 else { return }
        onFire()
    }
}
