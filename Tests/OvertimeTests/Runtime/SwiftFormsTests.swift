import Dispatch
import Overtime
import OvertimeSupport
import OvertimeTestSupport
import OvertimeTesting
import Testing

@Suite("Grants: async, Foundation-shaped and ~Copyable forms", .blocksBriefly, .timeLimit(.minutes(3)))
struct SwiftFormsTests {
    /// Waits (in real time, briefly) until `condition` holds, settling the runtime between looks.
    private func eventually(_ env: VirtualRuntime, _ condition: () -> Bool) async {
        for _ in 0..<5000 {
            guard !condition() else { break }
            env.waitForQueuedRequests()
            try? await Task.sleep(for: .milliseconds(1))
        }
    }

    @Test func withBackgroundTaskReturnsTheBodysValueAndEndsTheGrant() async throws {
        let env = try VirtualRuntime()
        let value = try await env.runtime.withBackgroundTask(name: "compute") { 42 }
        #expect(value == 42)
        env.waitForQueuedRequests()
        #expect(env.runtime.openBackgroundTasks.isEmpty)
        #expect(env.counter("overtime_background_tasks_ended_total", [("reason", "completed")]) == 1)
        env.shutDown()
    }

    @Test func withBackgroundTaskCancelsTheBodyOnExpiration() async throws {
        let env = try VirtualRuntime(budget: .seconds(10), lead: .seconds(2))
        let runtime = env.runtime
        let task = taskOnOwnThread {
            try await runtime.withBackgroundTask(name: "sleepy") {
                try await Task.sleep(for: .seconds(3600))  // throws CancellationError when cancelled
                return "finished"
            }
        }
        await eventually(env) { runtime.openBackgroundTasks.count == 1 }
        runtime.requestBackground()
        env.clock.advance(by: .seconds(8))
        await #expect(throws: CancellationError.self) { try await task.value }
        env.waitForQueuedRequests()
        #expect(runtime.openBackgroundTasks.isEmpty)
        #expect(env.counter("overtime_background_tasks_ended_total", [("reason", "expired")]) == 1)
        #expect(runtime.state == .suspended)
        env.shutDown()
    }

    @Test func withBackgroundTaskThrowsTheTerminatedErrorAtTheDeadlineIfTheBodyIgnoresCancellation() async throws {
        let env = try VirtualRuntime(budget: .seconds(10), lead: .seconds(2))
        let runtime = env.runtime
        let release = DispatchSemaphore(value: 0)
        // Whether the body, once released, found itself cancelled. Waited for without a
        // deadline of its own: the body runs in the runtime's task, on Swift's shared pool,
        // which under ThreadSanitizer is behind every test's work for tens of seconds.
        let (wentOn, bodyWentOn) = AsyncStream.makeStream(of: Bool.self)
        let task = taskOnOwnThread {
            try await runtime.withBackgroundTask(name: "stubborn") {
                await withCheckedContinuation { continuation in
                    spawnThread(name: "stubborn-body") {
                        release.wait()
                        continuation.resume()
                    }
                }
                bodyWentOn.yield(Task.isCancelled)
                bodyWentOn.finish()
                return 1
            }
        }
        await eventually(env) { runtime.openBackgroundTasks.count == 1 }
        runtime.requestBackground()
        env.clock.advance(by: .seconds(10))
        do {
            _ = try await task.value
            Issue.record("expected the terminated error")
        } catch BackgroundTaskError.terminated(let report) {
            #expect(report.name == "stubborn")
            #expect(report.expirationHandlerRan)
            #expect(report.age == .seconds(10))
        }
        release.signal()  // the body goes on after the call threw, cancelled
        var wentOnCancelled = wentOn.makeAsyncIterator()
        #expect(await wentOnCancelled.next() == true)
        env.shutDown()
    }

    @Test func withBackgroundTaskThrowsRefusedWhenNoGrantCanBeHad() async throws {
        let env = try VirtualRuntime()
        env.runtime.requestTermination()
        await env.runtime.waitUntilTerminated()
        await #expect(throws: BackgroundTaskError.refused(.terminated)) {
            try await env.runtime.withBackgroundTask(name: "late") { 1 }
        }
    }

    @Test func performExpiringActivityRunsTheBlockInsideAGrant() async throws {
        let env = try VirtualRuntime(budget: .seconds(10), lead: .seconds(2))
        let runtime = env.runtime
        let calls = Recorder<Bool>()
        let inside = Recorder<Int>()
        let proceed = DispatchSemaphore(value: 0)
        runtime.performExpiringActivity(reason: "flush") { expired in
            calls.append(expired)
            if !expired {
                inside.append(runtime.openBackgroundTasks.count)
                proceed.wait()
            }
        }
        runtime.requestBackground()
        await eventually(env) { inside.count == 1 }
        #expect(inside.all == [1])
        env.clock.advance(by: .seconds(8))  // expiration: block(true) is called concurrently
        await eventually(env) { calls.count == 2 }
        #expect(calls.all == [false, true])
        proceed.signal()
        await eventually(env) { runtime.state == .suspended }
        #expect(runtime.state == .suspended)
        // Without a grant the block is told at once that it has expired.
        let refused = Recorder<Bool>()
        runtime.performExpiringActivity(reason: "too-late") { refused.append($0) }
        await eventually(env) { refused.count == 1 }
        #expect(refused.all == [true])
        env.shutDown()
    }

    @Test func aNoncopyableGrantEndsOnceAndADroppedOneIsReportedAndEnded() throws {
        let env = try VirtualRuntime()
        let runtime = env.runtime
        let reasons = Recorder<BackgroundTaskEndReason>()
        let grant = try runtime.beginGrant(name: "checkpoint") {
        } endHandler: {
            reasons.append($0)
        }
        grant.end()
        // grant.end()  // a second end does not compile: 'grant' used after consume
        env.waitForQueuedRequests()
        #expect(reasons.all == [.completed])
        #expect(env.logs.messages(at: .warning).isEmpty)

        func forget() throws {
            _ = try runtime.beginGrant(name: "forgotten") {
            } endHandler: {
                reasons.append($0)
            }
        }
        try forget()
        env.waitForQueuedRequests()
        #expect(reasons.all == [.completed, .completed])
        let warning = try #require(env.logs.messages(at: .warning).first)
        #expect(warning.message.contains("dropped without end()"))
        #expect(warning.metadata["call_site"]?.hasPrefix("OvertimeTests/SwiftFormsTests.swift:") == true)
        #expect(env.counter("overtime_misuse_total", [("kind", "dropped_grant")]) == 1)
        #expect(runtime.openBackgroundTasks.isEmpty)

        runtime.requestTermination()
        runtime.waitUntilTerminated()
        #expect(throws: BackgroundTaskRefusal.terminated) { _ = try runtime.beginGrant(name: "late") }
    }

    @Test func actorsIsolatedToTheLoopExecutorRunOnTheLoopThread() async throws {
        let env = try VirtualRuntime()
        actor Counter {
            let runtime: Runtime
            var value = 0
            init(runtime: Runtime) { self.runtime = runtime }
            nonisolated var unownedExecutor: UnownedSerialExecutor { runtime.executor.asUnownedSerialExecutor() }
            func increment() -> (Int, Bool) {
                value += 1
                return (value, runtime.isOnLoopThread)
            }
        }
        let counter = Counter(runtime: env.runtime)
        var results: [(Int, Bool)] = []
        for _ in 0..<10 { results.append(await counter.increment()) }
        #expect(results.map(\.0) == Array(1...10))
        #expect(results.allSatisfy { $0.1 })
        let onLoop = await Task(executorPreference: env.runtime.executor) { env.runtime.isOnLoopThread }.value
        #expect(onLoop)
        env.shutDown()
    }
}
