// The hook through which a virtual clock (OvertimeTesting's ManualClock) drives a runtime.

import OvertimeSupport

/// A clock that drives its runtimes' timers itself instead of following real time.
/// Package-only: `OvertimeTesting.ManualClock` is the one users get.
package protocol VirtualTimeSource: AnyObject, Sendable {
    /// Called once, when a runtime using this clock is created.
    func register(_ timer: VirtualTimer)
}

/// The handle through which a virtual clock drives one runtime's timer.
///
/// The runtime keeps ``wakeup`` at its earliest due instant; the clock, when time reaches
/// it, calls ``fire()``. All members are safe to use from any thread.
package final class VirtualTimer: Sendable {
    private let state = Locked<MonotonicInstant?>(nil)
    private let fireHandler: @Sendable () -> Void
    private let waitHandler: @Sendable () -> Void
    private let stepHandler: @Sendable () -> Void

    init(
        fire: @escaping @Sendable () -> Void, waitForQueuedRequests: @escaping @Sendable () -> Void,
        wallClockStepped: @escaping @Sendable () -> Void
    ) {
        self.fireHandler = fire
        self.waitHandler = waitForQueuedRequests
        self.stepHandler = wallClockStepped
    }

    /// The earliest instant at which the runtime has something to do, or `nil`.
    package var wakeup: MonotonicInstant? {
        state.withLock { $0 }
    }

    func setWakeup(_ instant: MonotonicInstant?) {
        state.withLock { $0 = instant }
    }

    /// Runs everything the runtime has due at the clock's current instant, and returns
    /// when it is done. Call it from a thread other than the runtime's loop thread.
    package func fire() {
        fireHandler()
    }

    /// Tells the runtime its clock's wall-clock reading stepped, and returns once it has
    /// re-planned.
    package func wallClockStepped() {
        stepHandler()
    }

    /// Returns once the runtime has applied every request queued before this call.
    package func waitForQueuedRequests() {
        waitHandler()
    }
}
