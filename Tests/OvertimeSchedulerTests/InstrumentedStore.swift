// A store around another with what tests need to play a fleet's database with it, and a
// scheduler harness on one.

import Overtime
import OvertimeSchedulerTesting
import OvertimeSupport

@_spi(ScheduleStore) @testable import OvertimeScheduler

/// A store (the SQLite one or the in-memory one) behind a gate, and with claims. While the
/// gate is shut, every call the scheduler's decisions make waits (suspended: no thread held),
/// as a call to a stopped database server would. Its claims are what the test says: the runs named in ``unsafeClaims`` may have lost theirs
/// (a paused process, a database out of reach), and the scheduler hears what the store's
/// own thread would tell it through ``events``.
final class InstrumentedStore: ScheduleStore {
    let inner: any ScheduleStore
    private let gate = Locked(Gate())
    /// Calls waiting at the gate now.
    let waiting = Locked(0)
    /// The calls that waited at the shut gate, by name, in order: what reached the store.
    let stopped = Locked<[String]>([])
    /// The runs whose claims are no longer safe.
    let unsafeClaims = Locked<Set<String>>([])
    /// What the scheduler gave at its start.
    let events = Locked<ScheduleStoreEvents?>(nil)
    /// How many times the scheduler has asked for the next due time.
    let nextDueReads = Locked(0)
    let stallThreshold: Duration?

    /// `stallThreshold`: `nil` for a store without claims, as the SQLite store is.
    init(_ inner: any ScheduleStore, stallThreshold: Duration? = nil) {
        self.inner = inner
        self.stallThreshold = stallThreshold
    }

    func start(_ events: ScheduleStoreEvents) { self.events.withLock { $0 = events } }
    func claimsNoLongerSafe() -> [String] { unsafeClaims.withLock { $0.sorted() } }
    func isClaimHeld(_ identifier: String) -> Bool { !unsafeClaims.withLock { $0.contains(identifier) } }

    private struct Gate {
        var shut = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    func close(gate shut: Bool) {
        let opened = gate.withLock { gate in
            gate.shut = shut
            defer { if !shut { gate.waiting = [] } }
            return shut ? [] : gate.waiting
        }
        for call in opened { call.resume() }
    }

    private func pass(_ name: String = #function) async {
        waiting.withLock { $0 += 1 }
        await withCheckedContinuation { (call: CheckedContinuation<Void, Never>) in
            let open = gate.withLock { gate in
                if gate.shut { gate.waiting.append(call) }
                return !gate.shut
            }
            if !open { stopped.withLock { $0.append(name) } }
            if open { call.resume() }
        }
        waiting.withLock { $0 -= 1 }
    }

    func request(_ identifier: String) async throws(ScheduleStoreError) -> StoredRequest? {
        await pass()
        return try await inner.request(identifier)
    }
    func pendingRequests() async throws(ScheduleStoreError) -> [StoredRequest] {
        await pass()
        return try await inner.pendingRequests()
    }
    func pendingRequests(tagged tag: String) async throws(ScheduleStoreError) -> [StoredRequest] {
        await pass()
        return try await inner.pendingRequests(tagged: tag)
    }
    func finishedRequests(after: String?, prefix: String?, tagged tag: String?, limit: Int)
        async throws(ScheduleStoreError) -> [StoredRequest]
    {
        await pass()
        return try await inner.finishedRequests(after: after, prefix: prefix, tagged: tag, limit: limit)
    }
    func operatorActions(limit: Int) async throws(ScheduleStoreError) -> [OperatorAction] {
        await pass()
        return try await inner.operatorActions(limit: limit)
    }
    func pendingCount() async throws(ScheduleStoreError) -> Int { try await inner.pendingCount() }
    /// Not behind the gate: metrics are collected for every scheduler of the process at
    /// once (``MetricSamplers``), so another test's collection would otherwise put a read
    /// at this test's gate that none of its calls made.
    func waitingCounts(at now: WallClockInstant) async throws(ScheduleStoreError) -> (enqueued: Int, blocked: Int) {
        try await inner.waitingCounts(at: now)
    }
    func dependents(of identifiers: [String]) async throws(ScheduleStoreError) -> [StoredRequest] {
        try await inner.dependents(of: identifiers)
    }
    func nextWakingStart() async throws(ScheduleStoreError) -> WallClockInstant? { try await inner.nextWakingStart() }
    func waitingOnFinishedPrerequisites() async throws(ScheduleStoreError) -> [StoredRequest] {
        try await inner.waitingOnFinishedPrerequisites()
    }
    func due(at now: WallClockInstant, unmet: Int64, limit: Int) async throws(ScheduleStoreError) -> [StoredRequest] {
        await pass()
        return try await inner.due(at: now, unmet: unmet, limit: limit)
    }
    func nextDue(after now: WallClockInstant, unmet: Int64) async throws(ScheduleStoreError) -> (
        identifier: String, at: WallClockInstant
    )? {
        await pass()
        nextDueReads.withLock { $0 += 1 }
        return try await inner.nextDue(after: now, unmet: unmet)
    }
    func dueWaiting(at now: WallClockInstant, on requirements: Int64) async throws(ScheduleStoreError) -> Bool {
        await pass()
        return try await inner.dueWaiting(at: now, on: requirements)
    }
    func plannedAheadOfClock(_ now: WallClockInstant) async throws(ScheduleStoreError) -> [StoredRequest] {
        try await inner.plannedAheadOfClock(now)
    }
    func waitsForALength(after threshold: WallClockInstant) async throws(ScheduleStoreError) -> [StoredRequest] {
        try await inner.waitsForALength(after: threshold)
    }
    func lastRunID() throws(ScheduleStoreError) -> Int64 { try inner.lastRunID() }
    func commit(_ batch: ScheduleBatch, lastRunID: Int64) async throws(ScheduleStoreError) -> CommitRefusals {
        await pass()
        return try await inner.commit(batch, lastRunID: lastRunID)
    }
    func sync() throws(ScheduleStoreError) { try inner.sync() }
    func history(identifier: String, limit: Int) async throws(ScheduleStoreError) -> [RunRecord] {
        await pass()
        return try await inner.history(identifier: identifier, limit: limit)
    }
    func pruneHistory(endedBefore: WallClockInstant?, keepingPerIdentifier: Int?) async throws(ScheduleStoreError)
        -> Int
    {
        await pass()
        return try await inner.pruneHistory(endedBefore: endedBefore, keepingPerIdentifier: keepingPerIdentifier)
    }
    func close() { inner.close() }
    var recovery: StoreRecovery { inner.recovery }
}

extension SchedulerHarness {
    /// A harness whose store is an ``InstrumentedStore`` over an in-memory schedule: one the
    /// test can make hang (a fleet's database stopped), whose reads it can count, and, with a
    /// `stallThreshold`, with claims.
    static func instrumented(
        identifiers: [String] = ["job"], prefixes: [String] = [], stallThreshold: Duration? = nil,
        configure: (inout SchedulerConfiguration) -> Void = { _ in }
    ) throws -> (SchedulerHarness, InstrumentedStore) {
        let made = Locked<InstrumentedStore?>(nil)
        let h = try SchedulerHarness(
            identifiers: identifiers, prefixes: prefixes,
            configure: { configuration in
                let schedule = InMemorySchedule()
                configuration.database = ScheduleDatabase(
                    description: "instrumented",
                    connecting: {
                        context async throws(ScheduleStoreError) in
                        let store = InstrumentedStore(
                            try await ScheduleDatabase.inMemory(schedule).openStore(context),
                            stallThreshold: stallThreshold)
                        made.withLock { $0 = store }
                        return store
                    })
                configure(&configuration)
            })
        guard let store = made.withLock({ $0 }) else { throw ScheduleStoreError("the store was not opened") }
        return (h, store)
    }
}
