// Why a request has not run yet, as the store alone can tell it: a pure decision from the
// stored request and the time, tested as a transcript.

import Overtime

/// What a pending request waits for, as its stored schedule tells it. What only the daemon
/// knows now (whether a requirement holds, how many runs it has going, whether it has a
/// grant) is named as what the daemon decides, with the time since when it could run.
public enum ScheduleWait: Sendable, Hashable, CustomStringConvertible {
    /// Its next planned time (never before its earliest begin).
    case plannedTime(WallClockInstant)
    /// A failed attempt's retry, after its backoff.
    case retry(at: WallClockInstant)
    /// A prerequisite that has not succeeded yet (the first left, in identifier order).
    case prerequisite(String)
    /// Due since the time given, and it needs these requirements: it starts when they
    /// hold (the `background` requirement: when the program is in the background).
    case requirements([Requirement], dueSince: WallClockInstant)
    /// Due since the time given, with nothing of its own to wait for: the daemon starts it
    /// at its turn (the concurrency limit, start spacing, a grant the runtime gives).
    case turn(dueSince: WallClockInstant)
    /// A handler: none of the programs that run the schedule registered one for it, as
    /// they recorded their handlers when they started (`instances`: the fleet's instances
    /// that did, in name order; empty for the one daemon that owns a store; `recordedAt`:
    /// the newest record). It runs when a program with a handler for it starts.
    case handler(instances: [String], recordedAt: WallClockInstant)

    /// A sentence.
    public var description: String {
        switch self {
        case .plannedTime(let time): "its planned time, \(time)"
        case .retry(let time): "its retry at \(time)"
        case .prerequisite(let identifier): "prerequisite '\(identifier)'"
        case .requirements(let requirements, let since):
            "requirement\(requirements.count == 1 ? "" : "s") "
                + requirements.map { "'\($0)'" }.joined(separator: ", ") + " (due since \(since))"
        case .turn(let since): "its turn: the concurrency limit or a grant (due since \(since))"
        case .handler(let instances, let recordedAt):
            instances.isEmpty
                ? "a handler: the daemon registered none for it (as it started, \(recordedAt))"
                : "a handler: no instance registered one for it (\(instances.joined(separator: ", ")); the newest "
                    + "started \(recordedAt))"
        }
    }

    /// What `stored` waits for at `now`, given the handlers its programs recorded (none
    /// recorded: a handler is not asked about); `nil` when it runs or is finished. A request
    /// no program has a handler for waits for one, whatever else it waits for.
    static func of(
        _ stored: StoredRequest, at now: WallClockInstant, handlers: [RegisteredHandlers] = []
    ) -> ScheduleWait? {
        guard !stored.isRunning, !stored.plan.isFinished, stored.cancelledAt == nil else { return nil }
        if !handlers.isEmpty, !handlers.contains(where: { $0.serves(stored.request.identifier) }) {
            let named = handlers.map(\.instance).filter { !$0.isEmpty }.sorted()
            return .handler(instances: named, recordedAt: handlers.map(\.recordedAt).max()!)
        }
        if let chain = stored.chain, chain.isWaiting, let first = chain.waitingOn.min() {
            return .prerequisite(first)
        }
        guard let due = SchedulePlanner.nextStart(stored.plan, stored.request) else { return .turn(dueSince: now) }
        if due > now {
            return stored.plan.retryAt != nil ? .retry(at: due) : .plannedTime(due)
        }
        let needed = Requirement.all.filter { stored.request.requirements.contains($0) }
        return needed.isEmpty ? .turn(dueSince: due) : .requirements(needed, dueSince: due)
    }
}

extension InspectedRequest {
    /// `stored` at `now`, given the attempt in progress and the result of its newest ended
    /// attempt (`nil` when none ended) and when its newest attempt started: for store
    /// implementations.
    @_spi(ScheduleStore) public init(
        _ stored: StoredRequest, running: RunningAttempt?, lastResult: RunResult?, position: Int64,
        lastRunAt: WallClockInstant? = nil, at now: WallClockInstant, handlers: [RegisteredHandlers] = []
    ) {
        self.lastRunAt = running?.startedAt ?? lastRunAt
        request = stored.request
        submittedAt = stored.submittedAt
        cancelledAt = stored.cancelledAt
        stoppedBy = stored.chain?.stoppedBy
        self.running = running
        self.position = position
        waitingFor = ScheduleWait.of(stored, at: now, handlers: handlers)
        if stored.cancelledAt != nil {
            state = .cancelled
        } else if stored.isRunning {
            state = .running
        } else if stored.plan.isFinished {
            state = stored.chain?.stoppedBy == nil && lastResult.map { !$0.isFailure } ?? true ? .succeeded : .failed
        } else {
            switch waitingFor {
            case .plannedTime, .retry: state = .enqueued
            default: state = .blocked
            }
        }
        attempt =
            running?.attempt ?? (state.isFinished || stored.plan.isFinished ? 0 : stored.plan.failedAttempts + 1)
    }
}
