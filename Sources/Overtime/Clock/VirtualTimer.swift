/// The handle through which a virtual clock drives one runtime's deadlines.
///
/// Created by the runtime and passed to ``VirtualTimeDriver/register(_:)``.
/// All members are safe to use from any thread.
public final class VirtualTimer: Sendable {
    private let state = Locked<MonotonicInstant?>(nil)
    private let fireHandler: @Sendable () -> Void
    private let settleHandler: @Sendable () -> Void

    init(fire: @escaping @Sendable () -> Void, settle: @escaping @Sendable () -> Void) {
        self.fireHandler = fire
        self.settleHandler = settle
    }

    /// The earliest instant at which the runtime has something to do, or `nil`.
    public var wakeup: MonotonicInstant? {
        state.withLock { $0 }
    }

    func setWakeup(_ instant: MonotonicInstant?) {
        state.withLock { $0 = instant }
    }

    /// Runs everything the runtime has due at the clock's current instant, and returns
    /// when it is done. Call it from a thread other than the runtime's loop thread.
    public func fire() {
        fireHandler()
    }

    /// Returns once the runtime has applied every request queued before this call.
    public func settle() {
        settleHandler()
    }
}
