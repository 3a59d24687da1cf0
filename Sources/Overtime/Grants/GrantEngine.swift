// The grants' state in one place: the table of open grants, when each is due, the rules
// that decide what a deadline means, and ends that came before their begins.

/// Everything the runtime knows about grants, owned by the loop thread (held by the core,
/// which performs what ``GrantDecisions`` decides and calls the user's handlers).
///
/// A class held by a `let`: the begin/end path reads it without copying or exclusivity
/// checks (see the core's rule for `@exclusivity(unchecked)`).
final class GrantEngine {
    /// What a deadline, a begin or an expiration point means (pure; see ``GrantDecisions``).
    let decisions: GrantDecisions
    /// The open grants, by slot.
    let grants = GrantTable()
    /// When each grant's expiration and deadline are due, and the budget's.
    @exclusivity(unchecked) var deadlines: DeadlineSchedule
    /// Queued IDs ended on the loop before their begin was applied (see `RuntimeCore.end`).
    @exclusivity(unchecked) var earlyQueuedEnds: [UInt64: (callSite: CallSite, queued: Bool)] = [:]

    init(leadTime: Duration, terminationPolicy: TerminationPolicy) {
        decisions = GrantDecisions(leadTime: leadTime, terminationPolicy: terminationPolicy)
        deadlines = DeadlineSchedule(leadTime: leadTime)
    }
}
