// What the program does about logind's sleep and shutdown: a pure part that returns actions.

import Overtime

/// The rules between systemd-logind and the runtime's lifecycle, as actions to perform.
///
/// While the program runs it holds a delay inhibitor lock, so logind waits (up to its
/// `InhibitDelayMaxSec`) before the system sleeps or shuts down. When logind says it is
/// about to sleep, the program goes to the background with a budget that ends before
/// logind stops waiting, and lets go of the lock as soon as nothing runs (it suspends) —
/// never later than that budget. On resume it takes the lock again and returns to the
/// state it had. A shutdown is a termination request, in the same budget.
struct SleepDecisions {
    enum Action: Equatable {
        /// Ask logind for a delay lock.
        case takeLock
        /// Close the lock's descriptor: logind may go on.
        case releaseLock
        /// Enter the background with a budget of at most this long.
        case enterBackground(budgetAtMost: Duration)
        /// Release the lock after this long whatever still runs.
        case releaseLockAfter(Duration)
        /// Return to the foreground (the program was there before the sleep).
        case returnToForeground
        /// Terminate, with a budget of at most this long.
        case terminate(budgetAtMost: Duration)
    }

    /// How long before logind's limit the budget ends: the program's last moment to finish.
    let margin: Duration
    /// logind's `InhibitDelayMaxSec` (its default 5 s until the property is read).
    private(set) var delay: Duration = .seconds(5)
    /// A lock is held, or asked for.
    private(set) var holdsLock = false
    /// Between `PrepareForSleep(true)` and `(false)`.
    private(set) var preparingForSleep = false
    private(set) var foregroundBeforeSleep = false

    init(margin: Duration) {
        self.margin = margin
    }

    /// The budget a sleep or shutdown leaves: logind's delay less the margin, never negative.
    var budget: Duration { max(delay - margin, .zero) }

    /// logind's `InhibitDelayMaxSec`, read.
    mutating func delayRead(_ delay: Duration) {
        self.delay = delay
    }

    /// logind is on the bus (connected, or it appeared): take the lock, unless a sleep is
    /// under way (a lock taken now would hold nothing back; the resume takes it).
    mutating func logindAvailable() -> [Action] {
        guard !holdsLock, !preparingForSleep else { return [] }
        holdsLock = true
        return [.takeLock]
    }

    /// The lock came back from logind. Taken while a sleep began: let go at once.
    mutating func lockGranted() -> [Action] {
        guard preparingForSleep else { return [] }
        holdsLock = false
        return [.releaseLock]
    }

    /// logind refused the lock, or the bus went away: no lock is held now.
    mutating func lockLost() {
        holdsLock = false
    }

    /// `PrepareForSleep(true)` while the program is in `state`.
    mutating func sleepComing(state: LifecycleState) -> [Action] {
        guard !preparingForSleep else { return [] }
        preparingForSleep = true
        foregroundBeforeSleep = state == .active || state == .inactive
        guard holdsLock else { return [] }
        if state == .suspended || state == .terminated { return release() }
        return [.enterBackground(budgetAtMost: budget), .releaseLockAfter(budget)]
    }

    /// Nothing runs any more (the program suspended), or the budget's time is up.
    mutating func nothingRuns() -> [Action] {
        guard preparingForSleep, holdsLock else { return [] }
        return release()
    }

    /// `PrepareForSleep(false)`: the system is back.
    mutating func resumed() -> [Action] {
        guard preparingForSleep else { return [] }
        preparingForSleep = false
        var actions: [Action] = []
        if !holdsLock {
            holdsLock = true
            actions.append(.takeLock)
        }
        if foregroundBeforeSleep { actions.append(.returnToForeground) }
        return actions
    }

    /// `PrepareForShutdown(true)`: terminate inside logind's delay; the lock goes with the process.
    mutating func shutdownComing() -> [Action] {
        [.terminate(budgetAtMost: budget)]
    }

    private mutating func release() -> [Action] {
        holdsLock = false
        return [.releaseLock]
    }
}
