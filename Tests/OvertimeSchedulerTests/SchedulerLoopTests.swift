import Foundation
import OvertimeControlProtocol
import OvertimeSupport
import OvertimeTestSupport
import OvertimeTesting
import Testing

@testable import Overtime
@_spi(ScheduleStore) @testable import OvertimeScheduler

/// The loop never waits for the scheduler's store: a store that does not answer (a
/// fleet's database stopped) delays the scheduler's decisions and answers, never the loop.
@Suite("Scheduler: the loop never waits for the store", .serialized, .timeLimit(.minutes(2)))
struct SchedulerLoopTests {
    /// The SQLite store behind a gate: while it is shut, every call the scheduler's
    /// decisions make waits, as a call to a stopped database server would.
    final class GatedStore: ScheduleStore {
        let inner: any ScheduleStore
        let shut = Locked(false)
        /// Calls waiting at the gate now.
        let waiting = Locked(0)

        init(_ inner: any ScheduleStore) { self.inner = inner }

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
        func pendingCount() throws(ScheduleStoreError) -> Int { try inner.pendingCount() }
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
        func close() { inner.close() }
        var recovery: StoreRecovery { inner.recovery }
    }

    /// Runs a control command the way the control socket does (on the loop) and returns
    /// its answer if it came at once, and a recorder that gets it if it comes later.
    private func control(_ runtime: Runtime, _ command: String) -> (ControlResponse?, Recorder<ControlResponse>) {
        let later = Recorder<ControlResponse>()
        let immediate = Locked<ControlResponse?>(nil)
        runtime.execute {
            let answer = runtime.controlCommands.handle(
                Array(#"{"command":"\#(command)"}"#.utf8), context: runtime.driverContext
            ) { later.append($0) }
            immediate.withLock { $0 = answer }
        }
        runtime.waitForQueuedRequests()
        return (immediate.withLock { $0 }, later)
    }

    @Test func enteringTheBackgroundAndControlCommandsNeverWaitForAStoreThatDoesNotAnswer() async throws {
        try await onOwnThread {
            let gate = Locked<GatedStore?>(nil)
            let h = try SchedulerHarness(configure: { configuration in
                let path = configuration.storePath
                configuration.database = ScheduleDatabase(description: "gated") { context throws(ScheduleStoreError) in
                    let store = GatedStore(
                        try SQLiteScheduleStore(path: path, now: context.now, logger: context.logger))
                    gate.withLock { $0 = store }
                    return store
                }
            })
            defer { h.finish() }
            let store = try #require(gate.withLock { $0 })
            h.script.withLock { $0 = { _ in .hang } }
            try h.current.start()
            var request = ScheduledTaskRequest(identifier: "job")
            request.requirements = [.background]
            try h.current.submit(request)
            h.advance(by: .seconds(60))
            #expect(h.attempts.count == 0, "waits for the background")

            store.close(gate: true)
            h.env.runtime.requestBackground()
            // The loop goes on: it answers while the scheduler waits at the gate, and a
            // grant keeps the program from suspending before the scheduler has decided.
            let open = h.env.runtime.openBackgroundTasks.map(\.name)
            #expect(open == ["overtime.scheduler: deciding"], "\(open)")
            #expect(h.env.runtime.state == .background)
            let (status, _) = control(h.env.runtime, "status")
            #expect(status?.status?.state == "background", "status answers at once")
            let (schedule, table) = control(h.env.runtime, "schedule")
            #expect(schedule == nil, "the schedule is answered later, by the scheduler's queue")
            for _ in 0..<10_000 where store.waiting.withLock({ $0 }) == 0 { usleep(1000) }
            #expect(store.waiting.withLock { $0 } >= 1, "the scheduler waits at the gate")
            #expect(table.count == 0)

            store.close(gate: false)
            h.settle()
            #expect(h.attempts.count == 1, "decided once the store answered: the run started")
            #expect(h.env.runtime.openBackgroundTasks.map(\.name) == ["job"], "the deciding grant ended")
            for _ in 0..<1000 where table.count == 0 { usleep(1000) }
            #expect(table.all.first?.message?.contains("job") == true, "\(table.all)")
        }
    }
}
