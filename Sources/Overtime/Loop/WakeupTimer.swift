/// The loop's one timer, for the earliest of every deadline and loop timer: the event
/// loop's timerfd, or, under a virtual clock, the ``VirtualTimer`` the clock drives.
///
/// Re-arms the timerfd only when the wake-up instant changes (a system call saved on
/// most turns). Loop-thread only.
struct WakeupTimer {
    private let loop: EventLoop
    private let virtual: VirtualTimer?
    private var armed: MonotonicInstant?

    init(loop: EventLoop, virtual: VirtualTimer?) {
        self.loop = loop
        self.virtual = virtual
    }

    /// Whether a virtual clock drives it.
    var isVirtual: Bool { virtual != nil }

    /// Wakes the loop at `next` (`nil`: not at all); `now` is read only when needed.
    mutating func arm(at next: MonotonicInstant?, now: () -> MonotonicInstant) {
        if let virtual {
            virtual.setWakeup(next)
            return
        }
        guard next != armed else { return }
        armed = next
        guard let next else {
            loop.disarmTimer()
            return
        }
        let current = now()
        loop.armTimer(nanoseconds: next > current ? next.nanoseconds - current.nanoseconds : 0)
    }

    /// The timer fired: the next arming must reach the timerfd even for the same instant.
    mutating func fired() {
        armed = nil
    }
}
