// What operators do to many requests at once — run a tag now, retry what failed for good
// (by tag or prefix) — and the record the scheduler keeps of who did what: in its store,
// beside the runs' history, so that every dashboard and `overtimectl actions` reads it.

import Overtime
import OvertimeSupport

/// What a bulk action did: how many requests it changed, and why it passed over the others.
struct BulkOutcome: Sendable, Equatable {
    var changed = 0
    /// Why each request it passed over was passed over (`'a' is running`).
    var passedOver: [String] = []

    /// `started 3 runs of requests tagged 'nightly'; passed over 1: 'a' is running`.
    func describe(_ done: String) -> String {
        guard !passedOver.isEmpty else { return done }
        let shown = passedOver.prefix(3).joined(separator: "; ")
        let more = passedOver.count > 3 ? "; and \(passedOver.count - 3) more" : ""
        return "\(done); passed over \(passedOver.count): \(shown)\(more)"
    }
}

/// A control command's arguments: the positional ones it takes, then `name=value` options.
/// Who asked is the option `by` (a dashboard's signed-in user, `overtimectl --by`).
struct OperatorArguments: Equatable {
    var positional: [String]
    var options: [String: String]

    /// Who did it when the client does not say.
    static let unnamed = "the control socket"

    /// `arguments` read as `positional` values then options among `allowed` (and `by`).
    /// - Throws: ``SchedulerError/Code/invalidRequest`` for a missing value, an option not
    ///   allowed or given twice, or a name that is not short printable text.
    init(_ arguments: [String], positional count: Int, options allowed: Set<String> = [], usage: String)
        throws(SchedulerError)
    {
        guard arguments.count >= count else { throw SchedulerError(code: .invalidRequest, message: "usage: \(usage)") }
        positional = Array(arguments.prefix(count))
        options = [:]
        for argument in arguments.dropFirst(count) {
            guard let equals = argument.firstIndex(of: "="), allowed.union(["by"]).contains(String(argument[..<equals]))
            else {
                throw SchedulerError(code: .invalidRequest, message: "unknown argument '\(argument)': usage: \(usage)")
            }
            let name = String(argument[..<equals])
            guard options.updateValue(String(argument[argument.index(after: equals)...]), forKey: name) == nil else {
                throw SchedulerError(code: .invalidRequest, message: "'\(name)' given twice: usage: \(usage)")
            }
        }
        if let by = options["by"] {
            let bytes = by.utf8
            guard !bytes.isEmpty, bytes.count <= OperatorAction.maximumNameBytes,
                !bytes.contains(where: { $0 < 0x20 || $0 == 0x7F })
            else {
                throw SchedulerError(
                    code: .invalidRequest,
                    message: "by: a name of 1 to \(OperatorAction.maximumNameBytes) bytes without control characters")
            }
        }
    }

    /// Who did it: the `by` option, else ``unnamed``.
    var by: String { options["by"] ?? Self.unnamed }
}

extension Scheduler {
    /// The most finished requests a bulk retry reads from the store at once.
    static let bulkRetryPage = 500

    /// Starts a run now of every pending request tagged `tag`, as `run ID` starts one: those
    /// running, waiting on a prerequisite or without a handler are passed over, each with
    /// why. On the queue.
    func runningNow(tag: String) async throws(SchedulerError) -> BulkOutcome {
        try ScheduleLimits.check(tag: tag, identifier: nil)
        guard state.value.started, !state.value.abandoned else {
            throw SchedulerError(code: .notStarted, message: "the scheduler is not started")
        }
        let tagged = try await fromStore { () async throws(ScheduleStoreError) in
            try await store.pendingRequests(tagged: tag)
        }
        var outcome = BulkOutcome()
        for stored in tagged {
            let identifier = stored.request.identifier
            if stored.isRunning || state.value.running[identifier] != nil {
                outcome.passedOver.append("'\(identifier)' is running")
            } else if let waiting = stored.chain?.waitingOn.sorted().first {
                outcome.passedOver.append("'\(identifier)' waits on its prerequisite '\(waiting)'")
            } else {
                do throws(SchedulerError) {
                    _ = try await startNow(stored)
                    outcome.changed += 1
                } catch {
                    outcome.passedOver.append(error.message)
                }
            }
        }
        return outcome
    }

    /// Submits again every request that failed for good whose identifier begins with
    /// `prefix` and that has the tag `tag` (each when given), as `retry ID` submits one:
    /// those whose handler is gone are passed over, each with why. Read from the store a page
    /// at a time (those the store's index of what may have failed for good holds). On the queue.
    func retryingFailed(tag: String?, prefix: String?) async throws(SchedulerError) -> BulkOutcome {
        if let tag { try ScheduleLimits.check(tag: tag, identifier: nil) }
        if let prefix { try ScheduleLimits.check(identifier: prefix, field: "prefix") }
        var outcome = BulkOutcome()
        var after: String?
        while true {
            let page = try await fromStore { [after] () async throws(ScheduleStoreError) in
                try await store.finishedRequests(after: after, prefix: prefix, tagged: tag, limit: Self.bulkRetryPage)
            }
            guard let last = page.last else { break }
            after = last.request.identifier
            var again: [ScheduledTaskRequest] = []
            for stored in page {
                let identifier = stored.request.identifier
                let lastRun = try await fromStore { () async throws(ScheduleStoreError) in
                    try await store.history(identifier: identifier, limit: 1)
                }
                guard Self.notFailedForGood(stored, lastRun: lastRun.first) == nil else { continue }
                do throws(SchedulerError) {
                    try validate(stored.request)
                    again.append(stored.request)
                } catch {
                    outcome.passedOver.append(error.message)
                }
            }
            if !again.isEmpty {
                let outcomes = try await submitting(again, ifExists: .keep)
                outcome.changed += outcomes.filter { $0 != .kept }.count
            }
            if page.count < Self.bulkRetryPage { break }
        }
        return outcome
    }

    /// Records that `by` did `action` to `subject`, changing `count` requests, answered
    /// `outcome`; returns `outcome`, with why it could not be recorded if it could not (the
    /// action stands: it was done).
    func recorded(_ action: String, _ subject: String, by: String, count: Int, _ outcome: String) async -> String {
        let record = OperatorAction(
            at: wallClockNow, by: by, action: action, subject: subject, count: count, outcome: outcome)
        do throws(SchedulerError) {
            _ = try await commit(ScheduleBatch(actions: [record]))
            return outcome
        } catch {
            return "\(outcome) (not recorded: \(error.message))"
        }
    }

    /// What operators did, newest first: `overtimectl actions`.
    static func actionsTable(_ actions: [OperatorAction]) -> String {
        guard !actions.isEmpty else { return "no actions recorded" }
        let rows = actions.map { [String(describing: $0.at), $0.by, $0.action, $0.subject, "\($0.count)", $0.outcome] }
        return TextTable.render([["AT", "BY", "ACTION", "SUBJECT", "COUNT", "OUTCOME"]] + rows)
    }
}
