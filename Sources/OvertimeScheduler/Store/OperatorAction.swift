// What an operator did to the schedule, kept by the store beside the runs' history: who
// retried, ran or cancelled what, whichever client (a dashboard, overtimectl) asked.

import Overtime

/// One action an operator took through the scheduler's control commands (`run`, `retry`,
/// `cancel`, and their bulk forms `run-tag`, `retry-failed`, `cancel-tag`), recorded by the
/// scheduler once it is done: every dashboard and `overtimectl actions` reads the same
/// record, whichever of them asked.
public struct OperatorAction: Sendable, Hashable {
    /// When it was done (the store's wall clock).
    public let at: WallClockInstant
    /// Who did it, as the client said (a dashboard's signed-in user, `overtimectl --by`):
    /// the control socket admits only the daemon's own user and root, each of whom could
    /// say any name.
    public let by: String
    /// The command: `run`, `retry`, `cancel`, `run-tag`, `retry-failed` or `cancel-tag`.
    public let action: String
    /// What it was done to: an identifier, `tag T`, `prefix P`, or `every request`.
    public let subject: String
    /// How many requests it changed.
    public let count: Int
    /// What the scheduler answered.
    public let outcome: String

    /// A record of `action` done by `by` to `subject` at `at`, changing `count` requests.
    public init(at: WallClockInstant, by: String, action: String, subject: String, count: Int, outcome: String) {
        self.at = at
        self.by = by
        self.action = action
        self.subject = subject
        self.count = count
        self.outcome = outcome
    }

    /// The longest name of who did it, in bytes: a client's name is text it chose.
    public static let maximumNameBytes = 256
}
