import Dispatch
import Foundation
import Overtime
import OvertimeSupport
import OvertimeTestSupport
import Synchronization
import Testing

@Suite("The libuv path in real time", .onOwnThread(runningAtMost: .minutes(2)))
struct LoopRealTimeTests {
    private func quietConfiguration() -> RuntimeConfiguration {
        var configuration = RuntimeConfiguration()
        configuration.logger = LogCapture().logger
        return configuration
    }

    @Test func deadlinesFireFromTheLibuvTimerAndRunReturnsWithEveryHandleClosed() throws {
        var configuration = quietConfiguration()
        configuration.backgroundBudget = .milliseconds(300)
        configuration.expirationLeadTime = .milliseconds(100)
        let runtime = try Runtime(configuration: configuration)
        let clock = SystemClock()
        let marks = Recorder<(String, MonotonicInstant)>()
        let budgetDeadline = Locked<MonotonicInstant?>(nil)
        let context = runtime.driverContext
        let token = runtime.observe { event in
            marks.append(("\(event)", clock.now))
            if event == .didEnterBackground {
                budgetDeadline.withLock { $0 = context.snapshot.budgetDeadline }
                _ = runtime.beginBackgroundTask(name: "late") {
                    marks.append(("expired", clock.now))
                } endHandler: { reason in
                    marks.append(("\(reason)", clock.now))
                }
            }
        }
        let beforeRun = clock.now
        runtime.requestTermination()
        let returned = DispatchSemaphore(value: 0)
        spawnThread(name: "test-run") {
            runtime.run()  // blocks this thread until terminated
            returned.signal()
        }
        #expect(returned.wait(timeout: .now() + 10) == .success)
        #expect(runtime.state == .terminated)
        #expect(runtime.loopClosedCleanly == true)
        let names = marks.all.map(\.0)
        #expect(names == ["willResignActive", "didEnterBackground", "willTerminate", "expired", "terminated"])
        let entered = try #require(marks.all.first { $0.0 == "didEnterBackground" }?.1)
        let expired = try #require(marks.all.first { $0.0 == "expired" }?.1)
        let terminated = try #require(marks.all.first { $0.0 == "terminated" }?.1)
        // Never early, against the deadline the runtime set: its budget runs from the instant
        // of the turn that entered the background, which precedes the observer's own read of
        // the clock by however long the turn took to reach it (a loaded machine's preemption).
        let deadline = try #require(budgetDeadline.withLock { $0 })
        #expect(deadline <= entered + .milliseconds(300), "the budget started no later than the observer heard of it")
        #expect(deadline >= beforeRun + .milliseconds(300), "and no earlier than the loop ran")
        #expect(expired >= deadline - .milliseconds(100))
        #expect(terminated >= deadline)
        // (How late is a benchmark's business; here only "not absurdly".)
        #expect(terminated - entered < .seconds(5))
        withExtendedLifetime(token) {}
    }

    /// A pause in the middle of a turn (a callback that takes 1.5 s stands in for SIGSTOP):
    /// the stall hook runs before the timers that fell due meanwhile, in that same turn.
    @Test func aStallInsideATurnRunsTheHookBeforeTheTimersItMadeDue() throws {
        let runtime = try Runtime(configuration: quietConfiguration())
        runtime.start()
        let order = Recorder<String>()
        let context = runtime.driverContext
        runtime.execute { context.onStall(longerThan: .seconds(1)) { _ in order.append("stall") } }
        runtime.waitForQueuedRequests()
        runtime.execute {
            runtime.schedule(after: .milliseconds(200)) { order.append("effect") }
            usleep(1_500_000)
        }
        runtime.waitForQueuedRequests()
        // (A busy machine may also start the second turn a second late: a stall of its own.)
        #expect(order.all.suffix(2) == ["stall", "effect"], "\(order.all)")
        runtime.requestTermination()
        runtime.waitUntilTerminated()
    }

    @Test func beginAndEndFromEightThreadsKeepsEachThreadsOrder() throws {
        let runtime = try Runtime(configuration: quietConfiguration())
        runtime.start()
        let perThread = 2_000
        let seen = Locked<[[Int]]>(Array(repeating: [], count: 8))
        let invalid = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for index in 0..<perThread {
                let id = runtime.beginBackgroundTask(name: "t\(thread)") {
                } endHandler: { reason in
                    if reason == .completed { seen.withLock { $0[thread].append(index) } }
                }
                if id.isInvalid { invalid.add(1, ordering: .relaxed) }
                if index % 3 == 0 {
                    // Hand some ends to the loop thread itself, racing the queued begin.
                    runtime.execute { runtime.endBackgroundTask(id) }
                } else {
                    runtime.endBackgroundTask(id)
                }
            }
        }
        runtime.waitForQueuedRequests()
        #expect(invalid.load(ordering: .relaxed) == 0)
        let orders = seen.withLock { $0 }
        for thread in 0..<8 {
            #expect(orders[thread] == Array(0..<perThread), "thread \(thread)")
        }
        #expect(runtime.openBackgroundTasks.isEmpty)
        runtime.requestTermination()
        runtime.waitUntilTerminated()
        #expect(runtime.loopClosedCleanly == true)
    }

    @Test func lifecycleRequestsFromManyThreadsLeaveAValidEventOrder() throws {
        let runtime = try Runtime(configuration: quietConfiguration())
        let events = Recorder<LifecycleEvent>()
        let token = runtime.observe { events.append($0) }
        runtime.start()
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for index in 0..<250 {
                if (thread + index) % 2 == 0 { runtime.requestBackground() } else { runtime.requestForeground() }
            }
        }
        runtime.requestTermination()
        runtime.waitUntilTerminated()
        // Every transition is whole: resign→enter→suspend, foreground→active, in cycles.
        #expect(lifecycleOrderProblems(events.all.map(\.description)) == [])
        #expect(events.all.last == .willTerminate)
        withExtendedLifetime(token) {}
    }
}
