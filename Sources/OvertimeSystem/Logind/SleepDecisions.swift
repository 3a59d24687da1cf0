// What the program does about logind's sleep and shutdown: a pure part that returns actions.

import Overtime

/// The rules between systemd-logind and the runtime's lifecycle, as actions to perform.
///
/// While the program runs it holds a delay inhibitor lock, so logind waits (up to its
/// `InhibitDelayMaxSec`) before the system sleeps or shuts down. When logind says it is
/// about to sleep, the program goes to the background with a budget that ends before
/// logind stops waiting, and lets go of the lock as soon as nothing runs (it suspends) —
/// never later than that budget. On resume it takes the lock again and returns to the
/// state it had.
///
/// A shutdown announced is not a termination: the service manager's SIGTERM follows, with
/// the stop's own (longer) budget. The announcement starts the work early — the program
/// goes to the background with its own budget, not cut to logind's delay — and the lock
/// goes when nothing runs or logind's delay is up, whichever is first; the SIGTERM ends
/// what still runs. A shutdown called off (`PrepareForShutdown(false)`) is a resume.
struct SleepDecisions {
    enum Action: Equatable {
        /// Ask logind for a delay lock.
        case takeLock
        /// Close the lock's descriptor: logind may go on.
        case releaseLock
        /// Enter the background, with a budget of at most this long (`nil`: the runtime's own).
        case enterBackground(budgetAtMost: Duration?)
        /// Release the lock after this long whatever still runs.
        case releaseLockAfter(Duration)
        /// Return to the foreground (the program was there before the announcement).
        case returnToForeground
    }

    /// What logind announced and has not called off.
    enum Announcement: Equatable {
        case sleep
        case shutdown
    }

    /// How long before logind's limit the budget ends: the program's last moment to finish.
    let margin: Duration
    /// logind's `InhibitDelayMaxSec` (its default 5 s until the property is read).
    private(set) var delay: Duration = .seconds(5)
    /// A lock is held, or asked for.
    private(set) var holdsLock = false
    /// Between `PrepareForSleep(true)` and `(false)`, or `PrepareForShutdown(true)` and `(false)`.
    private(set) var announced: Announcement?
    private(set) var foregroundBefore = false

    init(margin: Duration) {
        self.margin = margin
    }

    /// The budget a sleep or shutdown leaves: logind's delay less the margin, never negative.
    var budget: Duration { max(delay - margin, .zero) }

    /// logind's `InhibitDelayMaxSec`, read.
    mutating func delayRead(_ delay: Duration) {
        self.delay = delay
    }

    /// logind is on the bus (connected, or it appeared): take the lock, unless a sleep or
    /// shutdown is under way (a lock taken now would hold nothing back; the resume takes it).
    mutating func logindAvailable() -> [Action] {
        guard !holdsLock, announced == nil else { return [] }
        holdsLock = true
        return [.takeLock]
    }

    /// The lock came back from logind. Taken while a sleep or shutdown began: let go at once.
    mutating func lockGranted() -> [Action] {
        guard announced != nil else { return [] }
        holdsLock = false
        return [.releaseLock]
    }

    /// logind refused the lock, or the bus went away: no lock is held now.
    mutating func lockLost() {
        holdsLock = false
    }

    /// `PrepareForSleep(true)` while the program is in `state`.
    mutating func sleepComing(state: LifecycleState) -> [Action] {
        announce(.sleep, state: state, budgetAtMost: budget)
    }

    /// `PrepareForShutdown(true)` while the program is in `state`: the work starts now, in
    /// the runtime's own budget; the SIGTERM that follows ends it.
    mutating func shutdownComing(state: LifecycleState) -> [Action] {
        announce(.shutdown, state: state, budgetAtMost: nil)
    }

    /// Nothing runs any more (the program suspended), or logind's delay is up.
    mutating func nothingRuns() -> [Action] {
        guard announced != nil, holdsLock else { return [] }
        return release()
    }

    /// `PrepareForSleep(false)`: the system is back.
    mutating func resumed() -> [Action] {
        calledOff(.sleep)
    }

    /// `PrepareForShutdown(false)`: the shutdown was called off.
    mutating func shutdownCalledOff() -> [Action] {
        calledOff(.shutdown)
    }

    private mutating func announce(_ what: Announcement, state: LifecycleState, budgetAtMost: Duration?) -> [Action] {
        guard announced == nil else { return [] }
        announced = what
        foregroundBefore = state == .active || state == .inactive
        guard holdsLock else { return [] }
        if state == .suspended || state == .terminated { return release() }
        return [.enterBackground(budgetAtMost: budgetAtMost), .releaseLockAfter(budget)]
    }

    private mutating func calledOff(_ what: Announcement) -> [Action] {
        guard announced == what else { return [] }
        announced = nil
        var actions: [Action] = []
        if !holdsLock {
            holdsLock = true
            actions.append(.takeLock)
        }
        if foregroundBefore { actions.append(.returnToForeground) }
        return actions
    }

    private mutating func release() -> [Action] {
        holdsLock = false
        return [.releaseLock]
    }
}
