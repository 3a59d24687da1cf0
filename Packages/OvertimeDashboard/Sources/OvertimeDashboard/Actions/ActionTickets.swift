// One confirmation, one action. A confirmation page hands its form a ticket; the first post
// of that ticket acts, and every later post of it (a double click, a post sent again from the
// browser's history, a page read again by the live script) gets the same outcome without
// acting again. The outcome is then read at an address of its own, which stays a result.

import NIOConcurrencyHelpers

/// The tickets the confirmation pages handed out, and what their first posts did.
final class ActionTickets: Sendable {
    /// The most tickets kept: a client reading confirmation pages without end cannot fill
    /// memory (the oldest go first; a form whose ticket went is asked to confirm again).
    static let maximum = 2_000

    /// What a ticket is for: one action on one subject, confirmed in one session.
    struct Purpose: Equatable, Sendable {
        let sessionID: String
        let action: String
        let subject: String
    }

    private enum State {
        case issued
        case acting(Task<ActionOutcome, Never>)
        case done(ActionOutcome)
    }

    private struct Entry {
        let purpose: Purpose
        var state: State
        let order: UInt64
    }

    private struct Book {
        var entries: [String: Entry] = [:]
        var issuedSoFar: UInt64 = 0
    }

    private let book = NIOLockedValueBox(Book())

    /// A new ticket for `purpose`, for the confirmation's form.
    func issue(for purpose: Purpose) -> String {
        let ticket = DashboardSessions.randomToken()
        book.withLockedValue { book in
            book.issuedSoFar += 1
            if book.entries.count >= Self.maximum,
                let oldest = book.entries.min(by: { $0.value.order < $1.value.order })
            {
                book.entries[oldest.key] = nil
            }
            book.entries[ticket] = Entry(purpose: purpose, state: .issued, order: book.issuedSoFar)
        }
        return ticket
    }

    /// The outcome of `ticket`'s action: done by `perform` on its first use, the same record
    /// for every later one (a use while the first still acts waits for it). Nil when the
    /// ticket is unknown (never issued, or gone) or was issued for another purpose.
    func use(
        _ ticket: String, for purpose: Purpose, perform: @escaping @Sendable () async -> ActionOutcome
    ) async -> ActionOutcome? {
        enum Next {
            case refuse
            case wait(Task<ActionOutcome, Never>)
            case answer(ActionOutcome)
        }
        let next: Next = book.withLockedValue { book in
            guard let entry = book.entries[ticket], entry.purpose == purpose else { return .refuse }
            switch entry.state {
            case .issued:
                // Its own task: a client that goes away mid-action does not cut the action short.
                let task = Task { await perform() }
                book.entries[ticket]?.state = .acting(task)
                return .wait(task)
            case .acting(let task): return .wait(task)
            case .done(let record): return .answer(record)
            }
        }
        switch next {
        case .refuse: return nil
        case .answer(let record): return record
        case .wait(let task):
            let record = await task.value
            book.withLockedValue { book in
                if case .acting = book.entries[ticket]?.state { book.entries[ticket]?.state = .done(record) }
            }
            return record
        }
    }

    /// What `ticket`'s action did, for the session it was issued in; nil when it was not
    /// used (or is unknown, or another session's).
    func outcome(of ticket: String, sessionID: String) async -> (Purpose, ActionOutcome)? {
        let found: (Purpose, State)? = book.withLockedValue { book in
            guard let entry = book.entries[ticket], entry.purpose.sessionID == sessionID else { return nil }
            return (entry.purpose, entry.state)
        }
        switch found {
        case .none, .some((_, .issued)): return nil
        case .some((let purpose, .acting(let task))): return (purpose, await task.value)
        case .some((let purpose, .done(let record))): return (purpose, record)
        }
    }
}
