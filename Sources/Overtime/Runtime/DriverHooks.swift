// What drivers asked the core to call them for: lifecycle events, steps of the wall clock,
// a loop that was away, changes of the status line, shutdown. The seam adds; the core calls.

/// The drivers' hooks, in the order they were added. Loop-confined: held by the core,
/// filled through ``DriverContext``.
struct DriverHooks {
    /// Called with every lifecycle event, before observers see it.
    var lifecycleEvents: [(LifecycleEvent) -> Void] = []
    /// Called when the wall clock is set.
    var wallClockSteps: [() -> Void] = []
    /// What notices a step of the wall clock (made with the first hook).
    var wallClockWatcher: WallClockStepWatcher?
    /// Called when the wake alarm fires.
    var wakeAlarmFired: [() -> Void] = []
    /// The timer that wakes the system (made when first armed; none under a virtual clock).
    var wakeAlarm: WakeAlarm?
    /// When the wake alarm is armed for (under a virtual clock too), `nil`: not armed.
    var wakeAlarmTime: WallClockInstant?
    /// Parts of the status line (the scheduler's next run), asked each time it is made.
    var statusParts: [() -> String?] = []
    /// Called when a part of the status line changed.
    var statusChanges: [() -> Void] = []
    /// Called at shutdown, before the remaining handles close.
    var shutdown: [() -> Void] = []
    /// Called with how long the loop was away, when that reaches their threshold.
    private(set) var stalls: [(threshold: Duration, hook: (Duration) -> Void)] = []
    /// The shortest threshold among ``stalls``: below it a turn checks nothing.
    private(set) var shortestStall: Duration?

    /// Adds a hook for a loop away at least `threshold`.
    mutating func addStall(threshold: Duration, _ hook: @escaping (Duration) -> Void) {
        stalls.append((threshold, hook))
        shortestStall = min(shortestStall ?? threshold, threshold)
    }

    /// Takes every hook out (the runtime shut down) and returns the shutdown hooks to call.
    mutating func removeAll() -> [() -> Void] {
        defer { self = DriverHooks() }
        return shutdown
    }
}
