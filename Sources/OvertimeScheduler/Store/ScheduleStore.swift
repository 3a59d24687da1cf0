import Overtime

/// One request as a store keeps it: what was submitted and where its schedule stands.
struct StoredRequest: Sendable, Hashable {
    var request: ScheduledTaskRequest
    var plan: PlanState
    var submittedAt: WallClockInstant
    /// The run in progress or being retried (its ID stays across attempts), or `nil`.
    var currentRunID: Int64?
}

/// Where a scheduler keeps its requests, plans and history. Every method is one
/// transaction: what it returns from is durable. The SQLite store is the embedded
/// default; a PostgreSQL store for fleets implements the same.
protocol ScheduleStore: Sendable {
    /// Every request, in submission order.
    func requests() throws(ScheduleStoreError) -> [StoredRequest]
    /// Inserts or replaces a request and its plan.
    func save(_ request: StoredRequest) throws(ScheduleStoreError)
    /// Inserts or replaces requests and their plans, all in one transaction.
    func saveAll(_ requests: [StoredRequest]) throws(ScheduleStoreError)
    /// Removes a request (its history stays).
    func delete(identifier: String) throws(ScheduleStoreError)
    /// Removes every request (their history stays).
    func deleteAll() throws(ScheduleStoreError)
    /// A new run ID for `identifier`.
    func nextRunID() throws(ScheduleStoreError) -> Int64
    /// An attempt started: its record and the request's plan, together.
    func recordStart(_ record: RunRecord, plan: StoredRequest) throws(ScheduleStoreError)
    /// An attempt ended: its record and the request's plan (`nil`: the request is gone or
    /// was replaced; only the attempt is recorded), together.
    func recordEnd(_ record: RunRecord, plan: StoredRequest?) throws(ScheduleStoreError)
    /// Closes the store and lets another process (or scheduler) open it; every later call
    /// fails.
    func close()
    /// The attempts of `identifier`, newest first, at most `limit`.
    func history(identifier: String, limit: Int) throws(ScheduleStoreError) -> [RunRecord]
}

/// Why the schedule store failed.
public struct ScheduleStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, one sentence with the path and the cause.
    public let message: String
    /// Another process holds the store.
    let isLocked: Bool

    init(_ message: String, isLocked: Bool = false) {
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

    /// Whether nothing needed repair.
    public var isClean: Bool { movedAside == nil && interruptedRuns.isEmpty }
}
