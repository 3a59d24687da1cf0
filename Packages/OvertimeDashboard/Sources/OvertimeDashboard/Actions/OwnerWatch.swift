// Whether the schedule's owner answers, for the warning every page carries while it does
// not: asked at most once every few seconds, however many pages are read meanwhile.

import NIOConcurrencyHelpers

/// The owner's last answer to ``ScheduleActions/ownerNotAnswering()``, kept for
/// `interval`. The first page read after it is older asks again and waits for the answer
/// (at once when no daemon listens, a second at most when one is silent); pages read while
/// it asks are shown the last answer.
final class OwnerWatch: Sendable {
    private struct Known {
        var asked: ContinuousClock.Instant?
        var answer: String?
        var asking = false
    }

    private let actions: (any ScheduleActions)?
    private let interval: Duration
    private let known = NIOLockedValueBox(Known())

    init(actions: (any ScheduleActions)?, interval: Duration = .seconds(3)) {
        self.actions = actions
        self.interval = interval
    }

    /// Why the owner does not answer, or `nil`: it answers, or there is no owner to ask
    /// (a dashboard without actions shows what is stored and promises nothing).
    func problem() async -> String? {
        guard let actions else { return nil }
        let now = ContinuousClock.now
        let ask = known.withLockedValue { known -> Bool in
            if let asked = known.asked, now - asked < interval || known.asking { return false }
            known.asking = true
            return true
        }
        guard ask else { return known.withLockedValue { $0.answer } }
        let answer = await actions.ownerNotAnswering()
        known.withLockedValue { $0 = Known(asked: now, answer: answer) }
        return answer
    }
}
