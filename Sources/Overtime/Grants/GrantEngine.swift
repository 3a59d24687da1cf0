// The grants' state in one place: the table of open grants, when each is due, and the
// rules that decide what a deadline means.

/// Everything the runtime knows about grants, owned by the loop thread (held by the core,
/// which performs what ``GrantDecisions`` decides and calls the user's handlers).
///
/// A value of `let`s held by a `let`: the begin/end path reaches the table through
/// immutable references only, so it neither retains nor checks exclusivity (a `var` on
/// the way cost two retains and two releases per begin/end pair).
struct GrantEngine {
    /// What a deadline, a begin or an expiration point means (pure; see ``GrantDecisions``).
    let decisions: GrantDecisions
    /// The open grants, by slot, and ends that came before their begins.
    let grants = GrantTable()
    /// When each grant's expiration and deadline are due, and the budget's.
    let deadlines: DeadlineSchedule

    init(leadTime: Duration, terminationPolicy: TerminationPolicy) {
        decisions = GrantDecisions(leadTime: leadTime, terminationPolicy: terminationPolicy)
        deadlines = DeadlineSchedule(leadTime: leadTime)
    }
}
