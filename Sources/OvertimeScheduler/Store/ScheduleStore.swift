// The storage seam: what a scheduler keeps and asks, whichever database keeps it.

import Overtime

// A store outside this module (the PostgreSQL store for fleets) implements it through the
// `ScheduleStore` SPI: `@_spi(ScheduleStore) import OvertimeScheduler`. The SPI is for store
// implementations only; programs choose a store with ``ScheduleDatabase``.

/// One request as a store keeps it: what was submitted and where its schedule stands.
@_spi(ScheduleStore) public struct StoredRequest: Sendable, Hashable {
    /// The request as submitted (or updated).
    public var request: ScheduledTaskRequest
    /// Where its schedule stands.
    public var plan: PlanState
    /// When it was submitted (wall clock).
    public var submittedAt: WallClockInstant
    /// The run in progress or being retried (its ID stays across attempts), or `nil`. A
    /// store that gives out run IDs itself (a fleet's) sets it on the requests
    /// ``ScheduleStore/due(at:unmet:limit:)`` returns; the scheduler then uses it.
    public var currentRunID: Int64?
    /// A run of this identifier is in progress: it is not selected to run again.
    public var isRunning = false
    /// The store's own key for the row it was read from, when it has one (SQLite's rowid):
    /// writing the plan back finds the row without a search by identifier.
    public var rowID: Int64?
    /// In a store that instances share: the instance whose run is in progress (its name),
    /// as ``ScheduleStore/pendingRequests()`` reads it.
    public var holder: String?
    /// When it was cancelled (``RequestWrite/cancel(_:at:)``): it is finished, and nothing
    /// more of it runs. `nil` for a request that was not.
    public var cancelledAt: WallClockInstant? {
        get { extras?.cancelledAt }
        set { setExtras { $0.cancelledAt = newValue } }
    }
    /// A request with prerequisites: what it waits on, what they handed on, what stopped
    /// it; `nil` for a request without prerequisites.
    public var chain: ChainState? {
        get { extras?.chain }
        set { setExtras { $0.chain = newValue } }
    }

    /// The cancellation and the chain, behind one optional reference (none for most
    /// requests): a stored request is copied several times a run.
    private var extras: Extras?

    private final class Extras: Sendable, Hashable {
        let cancelledAt: WallClockInstant?
        let chain: ChainState?
        init(cancelledAt: WallClockInstant?, chain: ChainState?) {
            self.cancelledAt = cancelledAt
            self.chain = chain
        }
        static func == (lhs: Extras, rhs: Extras) -> Bool {
            lhs.cancelledAt == rhs.cancelledAt && lhs.chain == rhs.chain
        }
        func hash(into hasher: inout Hasher) {
            hasher.combine(cancelledAt)
            hasher.combine(chain)
        }
    }

    private mutating func setExtras(_ change: (inout (cancelledAt: WallClockInstant?, chain: ChainState?)) -> Void) {
        var values = (cancelledAt: extras?.cancelledAt, chain: extras?.chain)
        change(&values)
        extras =
            values.cancelledAt == nil && values.chain == nil
            ? nil : Extras(cancelledAt: values.cancelledAt, chain: values.chain)
    }

    /// A stored request.
    public init(
        request: ScheduledTaskRequest, plan: PlanState, submittedAt: WallClockInstant, currentRunID: Int64?,
        isRunning: Bool = false, rowID: Int64? = nil, holder: String? = nil, cancelledAt: WallClockInstant? = nil,
        chain: ChainState? = nil
    ) {
        if cancelledAt != nil || chain != nil { extras = Extras(cancelledAt: cancelledAt, chain: chain) }
        self.request = request
        self.plan = plan
        self.submittedAt = submittedAt
        self.currentRunID = currentRunID
        self.isRunning = isRunning
        self.rowID = rowID
        self.holder = holder
    }
}

extension StoredRequest {
    /// Attempt `attempt` of run `runID` was interrupted by the end of its process or of its
    /// claim (`twice`: the attempt before it was too): re-planned as
    /// ``SchedulePlanner/interrupted(_:_:attempt:twice:now:)`` says. A run still to be
    /// retried keeps its ID; one given up is over, and the next run takes an ID of its own —
    /// under this one, its first attempt would be written over this run's in the history.
    @_spi(ScheduleStore) public mutating func interrupt(
        runID: Int64, attempt: Int, twice: Bool, now: WallClockInstant
    ) {
        plan = SchedulePlanner.interrupted(plan, request, attempt: attempt, twice: twice, now: now)
        currentRunID = plan.failedAttempts == 0 ? nil : runID
    }
}

/// What happens to a request a batch writes.
@_spi(ScheduleStore) public enum RequestWrite: Sendable {
    /// Inserted, or replaces the request of its identifier (its submission order stays).
    case save(StoredRequest)
    /// Inserted unless a request of its identifier is pending (not finished): a finished
    /// one-shot, or one failed for good, is replaced (WorkManager's KEEP). The commit says
    /// which happened (`CommitRefusals.kept`, `CommitRefusals.resubmitted`).
    case insertUnlessPending(StoredRequest)
    /// The request's plan, corrected from `from` (the plan as it was read): written only
    /// where the request still stands at `from`, not running and not finished. In a store
    /// instances share, another may have started, ended or cancelled a run of it since the
    /// read, and the correction, made from what is gone, must not undo that.
    case replan(StoredRequest, from: PlanState)
    /// The pending request of the identifier is cancelled at the time given: finished,
    /// nothing more of it runs, and it stays (with its history, and its run in progress
    /// until that ends) as cancelled until retention prunes it. A finished one is left as
    /// it is.
    case cancel(String, at: WallClockInstant)
    /// Every pending request cancelled at the time given (see ``cancel(_:at:)``).
    case cancelAll(at: WallClockInstant)
}

extension RequestWrite {
    /// Inserted only when no pending request of its identifier exists.
    @available(*, deprecated, renamed: "insertUnlessPending")
    public static func insertIfAbsent(_ stored: StoredRequest) -> RequestWrite { .insertUnlessPending(stored) }
}

/// An attempt's end as a batch records it.
@_spi(ScheduleStore) public struct RunEnd: Sendable {
    /// The attempt, ended.
    public let record: RunRecord
    /// The request's plan after the attempt; `nil` when the request was cancelled or
    /// replaced meanwhile (only the attempt is recorded, and its identifier is free again).
    public let plan: StoredRequest?
    /// The scope of the request the attempt ran for: whose history records it.
    public let scope: RequestScope

    /// The end of `record`, with its request's plan after it (`nil`: cancelled or replaced
    /// meanwhile) and the request's scope.
    public init(record: RunRecord, plan: StoredRequest?, scope: RequestScope) {
        self.record = record
        self.plan = plan
        self.scope = scope
    }
}

/// Changes that become durable together, in one transaction: the scheduler's group
/// commit (the ends of runs, the starts of new ones, submitted requests).
@_spi(ScheduleStore) public struct ScheduleBatch: Sendable {
    /// Request writes, in order.
    public var writes: [RequestWrite] = []
    /// Attempts that ended, with their requests' plans.
    public var ends: [RunEnd] = []
    /// Attempts that start, with their requests' plans (marked running).
    public var starts: [(record: RunRecord, plan: StoredRequest)] = []
    /// How late each start of ``starts`` is, by identifier: the time from its due time to
    /// its start. A start that was not due (run now) has none. Stores that keep an
    /// overview's lateness count these (``LatenessBuckets``).
    public var lateness: [String: Duration] = [:]
    /// What operators did, recorded (``ScheduleStore/operatorActions(limit:)`` reads them).
    /// The scheduler commits them in a batch of their own, after the action is done; a
    /// store may write them in a transaction apart from the rest of a batch.
    public var actions: [OperatorAction] = []

    /// Nothing to write.
    public var isEmpty: Bool { writes.isEmpty && ends.isEmpty && starts.isEmpty && actions.isEmpty }

    /// A batch of `writes`, `ends`, `starts` and `actions`.
    public init(
        writes: [RequestWrite] = [], ends: [RunEnd] = [], starts: [(record: RunRecord, plan: StoredRequest)] = [],
        actions: [OperatorAction] = []
    ) {
        self.writes = writes
        self.ends = ends
        self.starts = starts
        self.actions = actions
    }
}

/// What a commit could not do: starts another scheduler claimed first (a fleet's store),
/// and requests kept because one of their identifier is pending; and the finished
/// requests its writes replaced.
@_spi(ScheduleStore) public struct CommitRefusals: Sendable, Hashable {
    /// Identifiers whose start was not written: their handlers must not run.
    public var starts: Set<String> = []
    /// Identifiers of `RequestWrite.insertUnlessPending` writes not written: a
    /// pending request of the identifier is kept.
    public var kept: Set<String> = []
    /// Identifiers of `RequestWrite.insertUnlessPending` writes that replaced a
    /// finished request (a one-shot done, or failed for good).
    public var resubmitted: Set<String> = []
    /// Identifiers of runs whose ends came after their claims were taken over by another
    /// instance: recorded as superseded, their plans left to the instance that took them.
    public var superseded: Set<String> = []

    /// Nothing refused.
    public init(starts: Set<String> = [], kept: Set<String> = [], resubmitted: Set<String> = []) {
        self.starts = starts
        self.kept = kept
        self.resubmitted = resubmitted
    }
}

/// What a store tells its scheduler between calls (a fleet's store: another instance
/// changed the schedule, or a claim is about to lapse).
@_spi(ScheduleStore) public struct ScheduleStoreEvents: Sendable {
    /// The schedule changed elsewhere (a submit, a run's end): decide again.
    public let changed: @Sendable () -> Void
    /// The claims of these runs (identifiers) could not be renewed and are about to end:
    /// the runs must stop (their expiration handlers) before another instance takes them.
    public let claimsLapsing: @Sendable ([String]) -> Void
}

/// Where a scheduler keeps its requests, plans and history, and what it asks of them.
/// Nothing is kept in memory but runs in progress: the store is the index of due times, so
/// a million pending requests cost the program nothing until they come due. Every
/// ``commit(_:lastRunID:)`` is one transaction that survives a crash of the process when
/// it returns; ``sync()`` puts every commit so far on disk. The SQLite store is the
/// embedded default; a PostgreSQL store for fleets implements the same.
///
/// Its reads and writes are `async`: a store on a network database answers them without a
/// thread held while it waits, and the scheduler's queue starts nothing else meanwhile; a
/// store on a local file answers at once. What is read when the scheduler is made
/// (``lastRunID()``), the disk sync (on a thread of its own) and what a store keeps in
/// memory (claims, its clock) are synchronous.
@_spi(ScheduleStore) public protocol ScheduleStore: Sendable {
    /// The request of `identifier`, or `nil`.
    func request(_ identifier: String) async throws(ScheduleStoreError) -> StoredRequest?
    /// Every request not finished, in submission order.
    func pendingRequests() async throws(ScheduleStoreError) -> [StoredRequest]
    /// Every request not finished that has the tag `tag`, in submission order.
    func pendingRequests(tagged tag: String) async throws(ScheduleStoreError) -> [StoredRequest]
    /// Finished requests not cancelled whose identifiers come after `after` (`nil`: from
    /// the first) and begin with `prefix`, and that have the tag `tag`, when given: at most
    /// `limit`, in the identifiers' order (a bulk retry reads them a page at a time). Every
    /// one that failed for good or was stopped by a prerequisite is among them; one that
    /// succeeded may be left out (the SQLite and PostgreSQL stores read only those their
    /// index of what may have failed for good holds). The caller checks each.
    func finishedRequests(after: String?, prefix: String?, tagged tag: String?, limit: Int)
        async throws(ScheduleStoreError) -> [StoredRequest]
    /// What operators did (``ScheduleBatch/actions``), newest first, at most `limit`.
    func operatorActions(limit: Int) async throws(ScheduleStoreError) -> [OperatorAction]
    /// The requests not finished that wait on one of `identifiers` (their
    /// ``StoredRequest/chain`` names it), each once. Asked about requests that this
    /// store's last commit concluded (finished, failed for good, cancelled), once: a store
    /// may answer only about those (the PostgreSQL store spares the round trip for an end
    /// that nothing waits on).
    func dependents(of identifiers: [String]) async throws(ScheduleStoreError) -> [StoredRequest]
    /// The requests not finished that wait on a prerequisite that has finished or that no
    /// request has any more: what a process that ended between a prerequisite's end and
    /// its dependents' update left.
    func waitingOnFinishedPrerequisites() async throws(ScheduleStoreError) -> [StoredRequest]
    /// The earliest next start of the requests not running that wake the system
    /// (``ScheduledTaskRequest/wakesSystem``), or `nil`.
    func nextWakingStart() async throws(ScheduleStoreError) -> WallClockInstant?
    /// How many requests are not finished.
    func pendingCount() async throws(ScheduleStoreError) -> Int
    /// Of the requests not finished and not running: how many wait for a next start after
    /// `now` (`enqueued`), and how many are due at `now` but not started, or wait on a
    /// prerequisite (`blocked`). Read when metrics are collected, off the loop.
    func waitingCounts(at now: WallClockInstant) async throws(ScheduleStoreError) -> (enqueued: Int, blocked: Int)
    /// Requests not running whose next start is at or before `now` and whose
    /// requirements share no bit with `unmet`, earliest first, at most `limit`.
    func due(at now: WallClockInstant, unmet: Int64, limit: Int) async throws(ScheduleStoreError) -> [StoredRequest]
    /// The request not running with the earliest next start after `now`, and that time.
    /// (A fleet's store may return an earlier time to look again: when a claim held
    /// elsewhere may end. `unmet` is the requirements that do not hold here, as for
    /// ``due(at:unmet:limit:)``.)
    func nextDue(after now: WallClockInstant, unmet: Int64) async throws(ScheduleStoreError) -> (
        identifier: String, at: WallClockInstant
    )?
    /// Whether a request not running is due at `now` but needs one of `requirements` (a mask).
    func dueWaiting(at now: WallClockInstant, on requirements: Int64) async throws(ScheduleStoreError) -> Bool
    /// Repeating requests whose previous planned window still lies after `now`: the wall
    /// clock went back since they were planned.
    func plannedAheadOfClock(_ now: WallClockInstant) async throws(ScheduleStoreError) -> [StoredRequest]
    /// Requests not running whose next start stands for a length of time (a retry, a
    /// one-shot without an earliest begin) and lies after `threshold`: what a step of the
    /// wall clock moves, earliest first.
    func waitsForALength(after threshold: WallClockInstant) async throws(ScheduleStoreError) -> [StoredRequest]
    /// The runtime's wall clock was set: a store that reckons on another clock (a shared
    /// database's) measures the difference again before its next answer.
    func localWallClockStepped()
    /// The highest run ID given out so far; a store that gives out run IDs itself
    /// (``newRunID()``) may answer 0 without asking its database.
    func lastRunID() throws(ScheduleStoreError) -> Int64
    /// A new run ID from the store, for a store many schedulers share; `nil`: the
    /// scheduler counts on from ``lastRunID()`` itself.
    func newRunID() async throws(ScheduleStoreError) -> Int64?
    /// Applies `batch` in one transaction, which a crash of the process cannot lose once
    /// it returns (on disk once ``sync()`` returns); `lastRunID` is the highest run ID given
    /// out, recorded with it. Returns the starts it did not write (another scheduler
    /// claimed them first); requests ``due(at:unmet:limit:)`` returned that the batch does
    /// not start are free again for others once it returns. A cycle that claimed requests
    /// and starts none of them commits an empty batch.
    func commit(_ batch: ScheduleBatch, lastRunID: Int64) async throws(ScheduleStoreError) -> CommitRefusals
    /// Puts every commit so far on disk (a power loss cannot lose them). Called from a
    /// thread of its own, beside commits.
    func sync() throws(ScheduleStoreError)
    /// The attempts of `identifier`, newest first, at most `limit`.
    func history(identifier: String, limit: Int) async throws(ScheduleStoreError) -> [RunRecord]
    /// Deletes the attempts that ended before `endedBefore` and those beyond the newest
    /// `keepingPerIdentifier` of each identifier (`nil`: no bound of that kind), the
    /// finished requests not running, submitted (and cancelled) before `endedBefore`, whose
    /// attempts are all gone or ended before it, and the operators' actions done before it.
    /// Never a request that is pending or an attempt in progress. Returns how many attempts
    /// it deleted.
    func pruneHistory(endedBefore: WallClockInstant?, keepingPerIdentifier: Int?) async throws(ScheduleStoreError)
        -> Int
    /// Closes the store and lets another process (or scheduler) open it; every later call
    /// fails.
    func close()
    /// Starts telling `events` what happens between calls. Called once, at the scheduler's
    /// start.
    func start(_ events: ScheduleStoreEvents)
    /// What opening the store found and repaired.
    var recovery: StoreRecovery { get }
    /// How long the process may be away (paused, frozen, starved) before the claims of the
    /// runs it holds must be checked before anything else runs; `nil`: it holds no claims.
    var stallThreshold: Duration? { get }
    /// The runs held here whose claims were taken or may have ended (not renewed in time):
    /// they must stop before another instance runs them.
    func claimsNoLongerSafe() -> [String]
    /// Whether this process still safely holds the claim on the run in progress of
    /// `identifier` (a store one scheduler owns: always).
    func isClaimHeld(_ identifier: String) -> Bool
    /// This instance's name as ``StoredRequest/holder`` shows it, in a store instances
    /// share; `nil` in one a scheduler owns.
    var holderName: String? { get }
    /// The wall-clock time on the store's clock, given the runtime's (`local`): a store
    /// many machines share compares due times on its own clock, so that a machine whose
    /// clock is off runs nothing early.
    func wallClock(_ local: WallClockInstant) -> WallClockInstant
    /// Records the handlers this program registered (``RegisteredHandlers``, of this
    /// store's instance), replacing its earlier record: written once, as the scheduler
    /// starts, for inspectors to tell a request no program can run.
    func recordHandlers(identifiers: [String], prefixes: [String], at now: WallClockInstant)
        async throws(ScheduleStoreError)
    /// Records the progress run `runID` of `identifier` reported last, replacing the one
    /// recorded before, for inspectors to show beside that attempt while it is in progress
    /// (``RunningAttempt/progress``). Written at most once a second per run; nothing when
    /// the run is no longer the request's attempt in progress.
    func recordProgress(_ identifier: String, runID: Int64, _ progress: RunProgress, at now: WallClockInstant)
        async throws(ScheduleStoreError)
}

extension ScheduleStore {
    /// A store that keeps no record of handlers: inspectors do not ask about them.
    public func recordHandlers(identifiers: [String], prefixes: [String], at now: WallClockInstant)
        async throws(ScheduleStoreError)
    {}

    /// A store that keeps no record of progress: inspectors do not ask about it.
    public func recordProgress(_ identifier: String, runID: Int64, _ progress: RunProgress, at now: WallClockInstant)
        async throws(ScheduleStoreError)
    {}

    /// Counted from ``pendingRequests()``: a store with a cheaper count implements its own.
    public func waitingCounts(at now: WallClockInstant) async throws(ScheduleStoreError) -> (
        enqueued: Int, blocked: Int
    ) {
        var counts = (enqueued: 0, blocked: 0)
        for stored in try await pendingRequests() where !stored.isRunning {
            if let start = SchedulePlanner.nextStart(stored.plan, stored.request), start > now {
                counts.enqueued += 1
            } else {
                counts.blocked += 1
            }
        }
        return counts
    }

    /// A store one scheduler owns has no instances to tell apart.
    public var holderName: String? { nil }

    /// A store one scheduler owns has nothing to tell between calls.
    public func start(_ events: ScheduleStoreEvents) {}

    /// The scheduler counts run IDs itself.
    public func newRunID() async throws(ScheduleStoreError) -> Int64? { nil }

    /// A store one machine owns keeps the runtime's clock.
    public func wallClock(_ local: WallClockInstant) -> WallClockInstant { local }

    /// A store one machine owns keeps the runtime's clock: nothing to measure again.
    public func localWallClockStepped() {}

    /// A store one scheduler owns gives no claims.
    public var stallThreshold: Duration? { nil }

    /// A store one scheduler owns gives no claims.
    public func claimsNoLongerSafe() -> [String] { [] }

    /// A store one scheduler owns: its runs are its own.
    public func isClaimHeld(_ identifier: String) -> Bool { true }
}

/// Why the schedule store failed.
public struct ScheduleStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, one sentence with the path and the cause.
    public let message: String
    /// Another process holds the store.
    let isLocked: Bool

    /// An error saying `message`.
    @_spi(ScheduleStore) public init(_ message: String) {
        self.init(message, isLocked: false)
    }

    init(_ message: String, isLocked: Bool) {
        self.message = message
        self.isLocked = isLocked
    }

    /// The message.
    public var description: String { message }
}

/// What opening the store found and repaired.
public struct StoreRecovery: Sendable, Hashable {
    /// A damaged store was moved aside to this path and a new, empty one made.
    public internal(set) var movedAside: String?
    /// What was wrong with it.
    public internal(set) var damage: String?
    /// Runs that were in progress when the process last ended: marked interrupted, each
    /// retried once.
    public internal(set) var interruptedRuns: [RunRecord] = []

    /// Nothing found.
    @_spi(ScheduleStore) public init() {}

    /// Runs found in progress from a process that ended: `interruptedRuns`, recorded as
    /// interrupted.
    @_spi(ScheduleStore) public init(interruptedRuns: [RunRecord]) {
        self.interruptedRuns = interruptedRuns
    }

    /// Whether nothing needed repair.
    public var isClean: Bool { movedAside == nil && interruptedRuns.isEmpty }
}
