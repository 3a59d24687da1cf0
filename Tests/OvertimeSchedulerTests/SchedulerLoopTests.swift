import Foundation
import OvertimeControlProtocol
import OvertimeSchedulerTesting
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
            let (h, store) = try SchedulerHarness.instrumented()
            defer { h.finish() }
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
            for _ in 0..<10_000 {
                guard store.waiting.withLock({ $0 }) == 0 else { break }
                usleep(1000)
            }
            #expect(store.waiting.withLock { $0 } >= 1, "the scheduler waits at the gate")
            #expect(table.count == 0)

            store.close(gate: false)
            h.settle()
            #expect(h.attempts.count == 1, "decided once the store answered: the run started")
            #expect(h.env.runtime.openBackgroundTasks.map(\.name) == ["job"], "the deciding grant ended")
            for _ in 0..<1000 {
                guard table.count == 0 else { break }
                usleep(1000)
            }
            #expect(table.all.first?.message?.contains("job") == true, "\(table.all)")
        }
    }

    /// Each synchronous call that reaches the store, made on the loop thread while the
    /// store does not answer, is refused at once with the misuse error (the loop would
    /// otherwise wait for the store), and the loop goes on.
    @Test func everySynchronousCallOnTheLoopIsRefusedNotWaitedFor() async throws {
        try await onOwnThread {
            let (h, store) = try SchedulerHarness.instrumented()
            defer { h.finish() }
            try h.current.start()
            var later = ScheduledTaskRequest(identifier: "job")
            later.earliestBegin = h.now + .seconds(3600)
            try h.current.submit(later)
            h.settle()
            store.close(gate: true)
            // Metrics collected meanwhile (another test's scrape: samplers are per process)
            // ask every scheduler for its counts on its queue: not a call on the loop.
            MetricSamplers.sampleAll()
            let scheduler = h.current
            let calls: [(String, @Sendable () throws(SchedulerError) -> Void)] = [
                (
                    "submit",
                    { () throws(SchedulerError) in try scheduler.submit(ScheduledTaskRequest(identifier: "job")) }
                ),
                ("submit(contentsOf:)", { () throws(SchedulerError) in _ = try scheduler.submit(contentsOf: []) }),
                ("cancel", { () throws(SchedulerError) in try scheduler.cancel("job") }),
                ("cancelAll", { () throws(SchedulerError) in try scheduler.cancelAll() }),
                ("cancel(tag:)", { () throws(SchedulerError) in try scheduler.cancel(tag: "t") }),
                ("pendingRequestCount", { () throws(SchedulerError) in _ = try scheduler.pendingRequestCount() }),
                ("runNow", { () throws(SchedulerError) in try scheduler.runNow("job") }),
                ("retry", { () throws(SchedulerError) in try scheduler.retry("job") }),
                ("workInfo", { () throws(SchedulerError) in _ = try scheduler.workInfo("job") }),
                ("history", { () throws(SchedulerError) in _ = try scheduler.history("job") }),
                (
                    // A store that talks to a server to open (a fleet's database): not waited
                    // for on the loop either.
                    "init",
                    { () throws(SchedulerError) in
                        var configuration = SchedulerConfiguration(storePath: "/nonexistent/schedule.db")
                        configuration.conditions = ManualConditionSource()
                        configuration.database = ScheduleDatabase(
                            description: "a server",
                            connecting: { _ async throws(ScheduleStoreError) in
                                throw ScheduleStoreError("never reached")
                            })
                        _ = try Scheduler(runtime: h.env.runtime, configuration: configuration)
                    }
                ),
            ]
            let outcomes = Locked<[String]>([])
            h.env.runtime.execute {
                for (name, call) in calls {
                    do throws(SchedulerError) {
                        try call()
                        outcomes.withLock { $0.append("\(name): answered") }
                    } catch {
                        outcomes.withLock { $0.append("\(name): \(error.code)") }
                    }
                }
                let pending = scheduler.pendingRequests().count + scheduler.pendingRequests(tag: "t").count
                outcomes.withLock { $0.append("pendingRequests: \(pending)") }
            }
            h.env.runtime.waitForQueuedRequests()
            let expected = calls.map { "\($0.0): blockingCallOnTheLoop" } + ["pendingRequests: 0"]
            #expect(outcomes.withLock { $0 } == expected)
            // On failure, which store calls waited at the gate (the scheduler's own, or a
            // call's).
            #expect(
                store.waiting.withLock { $0 } == 0,
                "no call reached the store: \(store.stopped.withLock { $0 })")
            store.close(gate: false)
        }
    }

    /// A caller on the loop uses the async form: the loop answers while the store does
    /// not, and the submission completes, durable, once the store answers again.
    @Test func theAsyncFormsLeaveTheLoopFreeWhileTheStoreDoesNotAnswer() async throws {
        try await onOwnThread {
            let (h, store) = try SchedulerHarness.instrumented()
            defer { h.finish() }
            try h.current.start()
            h.settle()
            store.close(gate: true)
            let scheduler = h.current
            let results = Recorder<String>()
            h.env.runtime.execute {
                Task {
                    do throws(SchedulerError) {
                        var later = ScheduledTaskRequest(identifier: "job")
                        later.earliestBegin = scheduler.runtime.clock.wallClockNow + .seconds(3600)
                        let outcome = try await scheduler.submit(later)
                        let count = try await scheduler.pendingRequestCount()
                        let info = try await scheduler.workInfo("job")
                        results.append("\(outcome) \(count) \(info.map { "\($0.state)" } ?? "none")")
                    } catch {
                        results.append("\(error.code)")
                    }
                }
            }
            h.env.runtime.waitForQueuedRequests()
            // The caller's task runs on Swift's shared threads, which other tests' bodies may
            // hold for seconds on a busy machine: its steps are waited for as long as the
            // suite's time limit allows, not for a fixed time.
            while store.waiting.withLock({ $0 }) == 0 { usleep(1000) }
            let (status, _) = control(h.env.runtime, "status")
            #expect(status?.status != nil, "the loop answers at once")
            #expect(results.count == 0)
            store.close(gate: false)
            while results.count == 0 { usleep(1000) }
            #expect(results.all == ["added 1 enqueued"])
        }
    }
}
