import Overtime
import OvertimeTestSupport
import OvertimeTesting
import Testing

@Suite("Loop timers and sleeping on the runtime's clock", .blocksBriefly, .timeLimit(.minutes(3)))
struct LoopTimerTests {
    @Test func timersFireInDeadlineOrderAtTheirInstantWhenVirtualTimeReachesThem() async throws {
        let env = try VirtualRuntime()
        let fired = Recorder<(String, MonotonicInstant)>()
        let clock = env.clock
        let runtime = env.runtime
        runtime.schedule(after: .seconds(3)) { fired.append(("c", clock.now)) }
        runtime.schedule(after: .seconds(1)) { fired.append(("a", clock.now)) }
        runtime.schedule(at: env.at(.seconds(1))) { fired.append(("b", clock.now)) }  // same instant: in order added
        let cancelled = Recorder<Bool>()
        let dropped = runtime.schedule(after: .seconds(2)) {
            fired.append(("never", clock.now))
        } onCancel: {
            cancelled.append(true)
        }
        dropped.cancel()
        dropped.cancel()  // twice: still one onCancel
        env.waitForQueuedRequests()
        #expect(clock.nextWakeup == env.at(.seconds(1)))
        clock.advance(by: .milliseconds(999))
        #expect(fired.count == 0)
        clock.advance(by: .seconds(5))
        #expect(fired.all.map(\.0) == ["a", "b", "c"])
        #expect(fired.all.map(\.1) == [env.at(.seconds(1)), env.at(.seconds(1)), env.at(.seconds(3))])
        #expect(cancelled.count == 1 && dropped.isCancelled)
        env.shutDown()
    }

    @Test func sleepEndsAtTheVirtualInstantAndThrowsWhenCancelledOrAtShutdown() async throws {
        let env = try VirtualRuntime()
        let runtime = env.runtime
        let woke = Recorder<MonotonicInstant>()
        // Until an instant, not for a duration: when the sleeper begins does not move it.
        let sleeper = taskOnOwnThread {
            try await runtime.sleep(until: env.at(.seconds(10)))
            woke.append(env.clock.now)
        }
        // The sleeper runs on a thread of its own: wait, in real time, until it sleeps.
        // Required: had the clock moved on without it, it would sleep past every instant the
        // test reaches, and the test would hang at `sleeper.value` instead of failing.
        try #require(try await eventually { env.clock.nextWakeup != nil }, "the sleeper never slept")
        env.clock.advance(by: .seconds(10))
        try await sleeper.value
        #expect(woke.all == [env.at(.seconds(10))])

        let cancelledSleep = taskOnOwnThread { try await runtime.sleep(for: .seconds(10)) }
        cancelledSleep.cancel()
        await #expect(throws: CancellationError.self) { try await cancelledSleep.value }

        let pendingAtShutdown = taskOnOwnThread { try await runtime.sleep(for: .seconds(3600)) }
        try #require(try await eventually { env.clock.nextWakeup != nil }, "the second sleeper never slept")
        env.runtime.requestTermination()
        await runtime.waitUntilTerminated()
        await #expect(throws: CancellationError.self) { try await pendingAtShutdown.value }
    }

    /// A loop away longer than a stall hook's threshold runs the hook first in the turn
    /// that finds it, before that turn's timers; a shorter absence does not call it.
    @Test func aStallHookRunsBeforeTheTimersOfTheTurnThatFindsTheLoopWasAway() throws {
        let env = try VirtualRuntime()
        defer { env.shutDown() }
        let order = Recorder<String>()
        let context = env.runtime.driverContext
        env.runtime.execute {
            context.onStall(longerThan: .seconds(5)) { away in order.append("stall \(away)") }
        }
        env.waitForQueuedRequests()
        env.runtime.schedule(after: .seconds(3)) { order.append("short") }
        env.waitForQueuedRequests()
        env.clock.advance(by: .seconds(3))
        #expect(order.all == ["short"], "3 s away: below the threshold")
        env.runtime.schedule(after: .seconds(20)) { order.append("effect") }
        env.waitForQueuedRequests()
        env.clock.advance(by: .seconds(20))
        #expect(order.all == ["short", "stall 20.0 seconds", "effect"])
    }

    @Test func theWallClockMovesWithVirtualTimeAndStepsAlone() {
        let clock = ManualClock(wallClock: WallClockInstant(secondsSinceEpoch: 1_800_000_000))
        #expect(clock.wallClockNow.description == "2027-01-15T08:00:00.000000Z")
        clock.advance(by: .milliseconds(1500))
        #expect(clock.wallClockNow == WallClockInstant(secondsSinceEpoch: 1_800_000_000) + .milliseconds(1500))
        let monotonic = clock.now
        clock.stepWallClock(by: .seconds(-3600))  // NTP steps the clock back an hour
        #expect(clock.now == monotonic)
        #expect(clock.wallClockNow.description == "2027-01-15T07:00:01.500000Z")
        #expect(WallClockInstant(nanosecondsSinceEpoch: -1).description == "1969-12-31T23:59:59.999999Z")
    }

    @Test func aTerminatedRuntimeAsksAVirtualClockForNothing() async throws {
        let env = try VirtualRuntime()
        let runtime = env.runtime
        // A grant with a deadline of its own leaves a check in the schedule when it ends.
        let id = runtime.beginBackgroundTask(name: "short", maximumDuration: .seconds(100))
        runtime.endBackgroundTask(id)
        runtime.schedule(after: .seconds(50)) {}
        env.waitForQueuedRequests()
        #expect(env.clock.nextWakeup != nil)
        runtime.requestTermination()
        await runtime.waitUntilTerminated()
        #expect(env.clock.nextWakeup == nil, "a clock would step to it forever")
        let started = ContinuousClock.now
        env.clock.advance(by: .seconds(3600))
        #expect(ContinuousClock.now - started < .seconds(1))
    }
}
