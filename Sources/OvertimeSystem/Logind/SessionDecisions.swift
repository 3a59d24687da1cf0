// What the program does when its logind session is switched away or locked: a pure part.

/// The rules between a logind session and the runtime's lifecycle, as a session manager
/// moves a phone app: the program is in the foreground while its session is active (on
/// the seat's screen) and unlocked, and in the background otherwise.
///
/// Only changes act: the first reading moves the program only to the background (a
/// program that starts in the background because it chose to stays there), and a reading
/// that repeats the last one does nothing.
struct SessionDecisions {
    enum Action: Equatable {
        /// The session was switched away or locked.
        case enterBackground
        /// The session is active and unlocked again.
        case returnToForeground
    }

    private(set) var active: Bool?
    private(set) var locked = false
    private var lockedHint: Bool?
    private var inForeground: Bool?

    /// The session's `Active` property, read.
    mutating func activeRead(_ active: Bool) -> [Action] {
        self.active = active
        return decide()
    }

    /// The session's `Lock` signal.
    mutating func lockRequested() -> [Action] {
        locked = true
        return decide()
    }

    /// The session's `Unlock` signal.
    mutating func unlockRequested() -> [Action] {
        locked = false
        return decide()
    }

    /// The session's `LockedHint` property, read: a change of it locks or unlocks (its
    /// locker sets it after the `Lock` signal, or alone).
    mutating func lockedHintRead(_ hint: Bool) -> [Action] {
        defer { lockedHint = hint }
        guard hint != lockedHint else { return [] }
        locked = hint
        return decide()
    }

    /// The session is gone (logind lost it, or the bus went away): nothing is known; the
    /// program stays where it is.
    mutating func forgotten() {
        active = nil
        lockedHint = nil
        locked = false
        inForeground = nil
    }

    private mutating func decide() -> [Action] {
        guard let active else { return [] }
        let foreground = active && !locked
        defer { inForeground = foreground }
        switch (inForeground, foreground) {
        case (nil, false), (true, false): return [.enterBackground]
        case (false, true): return [.returnToForeground]
        default: return []
        }
    }
}
