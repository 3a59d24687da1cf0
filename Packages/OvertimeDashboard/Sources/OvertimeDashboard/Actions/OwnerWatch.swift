// Whether the schedule's owner answers, for the warning every page carries while it does
// not: asked at most once every few seconds, however many pages are read meanwhile.

import NIOConcurrencyHelpers

/// The owner's last answer to ``ScheduleActions/ownerNotAnswering()``, kept for
/// `interval`. Pages read meanwhile share it; the first page after it is older waits for
/// the next answer (at once when no daemon listens, a second at most when one is silent).
final class OwnerWatch: Sendable {
    private let actions: (any ScheduleActions)?
    private let interval: Duration
    private let last = NIOLockedValueBox<(asked: ContinuousClock.Instant, answer: Task<String?, Never>)?>(nil)

    init(actions: (any ScheduleActions)?, interval: Duration = .seconds(3)) {
        self.actions = actions
        self.interval = interval
    }

    /// Why the owner does not answer, or `nil`: it answers, or there is no owner to ask
    /// (a dashboard without actions shows what is stored and promises nothing).
    func problem() async -> String? {
        guard let actions else { return nil }
        let answer = last.withLockedValue { last -> Task<String?, Never> in
            let now = ContinuousClock.now
            if let last, now - last.asked < interval { return last.answer }
            let asking = Task { await actions.ownerNotAnswering() }
            last = (now, asking)
            return asking
        }
        return await answer.value
    }
}
