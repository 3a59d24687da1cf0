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
            let gate = Locked<InstrumentedStore?>(nil)
            let h = try SchedulerHarness(configure: { configuration in
                let path = configuration.storePath
                configuration.database = ScheduleDatabase(description: "gated") { context throws(ScheduleStoreError) in
                    let store = InstrumentedStore(
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
