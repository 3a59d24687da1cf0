// The SQLite store with what tests need to play a fleet's database with it.

import Overtime
import OvertimeSupport

@_spi(ScheduleStore) @testable import OvertimeScheduler

/// The SQLite store behind a gate, and with claims. While the gate is shut, every call the
/// scheduler's decisions make waits, as a call to a stopped database server would. Its
/// claims are what the test says: the runs named in ``unsafeClaims`` may have lost theirs
/// (a paused process, a database out of reach), and the scheduler hears what the store's
/// own thread would tell it through ``events``.
final class InstrumentedStore: ScheduleStore {
    let inner: any ScheduleStore
    let shut = Locked(false)
    /// Calls waiting at the gate now.
    let waiting = Locked(0)
    /// The runs whose claims are no longer safe.
    let unsafeClaims = Locked<Set<String>>([])
    /// What the scheduler gave at its start.
    let events = Locked<ScheduleStoreEvents?>(nil)
    let stallThreshold: Duration?

    /// `stallThreshold`: `nil` for a store without claims, as the SQLite store is.
    init(_ inner: any ScheduleStore, stallThreshold: Duration? = nil) {
        self.inner = inner
        self.stallThreshold = stallThreshold
    }

    func start(_ events: ScheduleStoreEvents) { self.events.withLock { $0 = events } }
    func claimsNoLongerSafe() -> [String] { unsafeClaims.withLock { $0.sorted() } }
    func isClaimHeld(_ identifier: String) -> Bool { !unsafeClaims.withLock { $0.contains(identifier) } }

    func close(gate: Bool) {
        shut.withLock { $0 = gate }
        shut.broadcast()
    }

    private func pass() {
        waiting.withLock { $0 += 1 }
        shut.withLock(waitingUntil: { !$0 }) { _, _ in }
        waiting.withLock { $0 -= 1 }
    }

    func request(_ identifier: String) throws(ScheduleStoreError) -> StoredRequest? {
        pass()
        return try inner.request(identifier)
    }
    func pendingRequests() throws(ScheduleStoreError) -> [StoredRequest] {
        pass()
        return try inner.pendingRequests()
    }
    func pendingRequests(tagged tag: String) throws(ScheduleStoreError) -> [StoredRequest] {
        pass()
        return try inner.pendingRequests(tagged: tag)
    }
    func pendingCount() throws(ScheduleStoreError) -> Int { try inner.pendingCount() }
    func dependents(of identifiers: [String]) throws(ScheduleStoreError) -> [StoredRequest] {
        try inner.dependents(of: identifiers)
    }
    func nextWakingStart() throws(ScheduleStoreError) -> WallClockInstant? { try inner.nextWakingStart() }
    func waitingOnFinishedPrerequisites() throws(ScheduleStoreError) -> [StoredRequest] {
        try inner.waitingOnFinishedPrerequisites()
    }
    func due(at now: WallClockInstant, unmet: Int64, limit: Int) throws(ScheduleStoreError) -> [StoredRequest] {
        pass()
        return try inner.due(at: now, unmet: unmet, limit: limit)
    }
    func nextDue(after now: WallClockInstant, unmet: Int64) throws(ScheduleStoreError) -> (
        identifier: String, at: WallClockInstant
    )? {
        pass()
        return try inner.nextDue(after: now, unmet: unmet)
    }
    func dueWaiting(at now: WallClockInstant, on requirements: Int64) throws(ScheduleStoreError) -> Bool {
        pass()
        return try inner.dueWaiting(at: now, on: requirements)
    }
    func plannedAheadOfClock(_ now: WallClockInstant) throws(ScheduleStoreError) -> [StoredRequest] {
        try inner.plannedAheadOfClock(now)
    }
    func waitsForALength(after threshold: WallClockInstant) throws(ScheduleStoreError) -> [StoredRequest] {
        try inner.waitsForALength(after: threshold)
    }
    func lastRunID() throws(ScheduleStoreError) -> Int64 { try inner.lastRunID() }
    func commit(_ batch: ScheduleBatch, lastRunID: Int64) throws(ScheduleStoreError) -> CommitRefusals {
        pass()
        return try inner.commit(batch, lastRunID: lastRunID)
    }
    func sync() throws(ScheduleStoreError) { try inner.sync() }
    func history(identifier: String, limit: Int) throws(ScheduleStoreError) -> [RunRecord] {
        pass()
        return try inner.history(identifier: identifier, limit: limit)
    }
    func pruneHistory(endedBefore: WallClockInstant?, keepingPerIdentifier: Int?) throws(ScheduleStoreError) -> Int {
        pass()
        return try inner.pruneHistory(endedBefore: endedBefore, keepingPerIdentifier: keepingPerIdentifier)
    }
    func close() { inner.close() }
    var recovery: StoreRecovery { inner.recovery }
}
