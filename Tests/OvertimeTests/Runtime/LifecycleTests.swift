import Overtime
import OvertimeTestSupport
import OvertimeTesting
import Testing

@Suite("Lifecycle through a running runtime", .blocksBriefly, .timeLimit(.minutes(3)))
struct LifecycleTests {
    @Test func eventOrderForEveryTransition() throws {
        let env = try VirtualRuntime()
        let events = Recorder<(LifecycleEvent, LifecycleState)>()
        let runtime = env.runtime
        let token = runtime.observe { events.append(($0, runtime.state)) }
        runtime.requestBackground()
        env.waitForQueuedRequests()
        #expect(events.all.map(\.0) == [.willResignActive, .didEnterBackground, .didSuspend])
        #expect(events.all.map(\.1) == [.inactive, .background, .suspended])
        events.removeAll()
        runtime.requestForeground()
        env.waitForQueuedRequests()
        #expect(events.all.map(\.0) == [.willEnterForeground, .didBecomeActive])
        #expect(events.all.map(\.1) == [.inactive, .active])
        #expect(runtime.state == .active)
        withExtendedLifetime(token) {}
        env.shutDown()
    }

    @Test func aRequestForTheCurrentStateEmitsNothing() throws {
        let env = try VirtualRuntime()
        let events = Recorder<LifecycleEvent>()
        let token = env.runtime.observe { events.append($0) }
        env.runtime.requestForeground()
        env.waitForQueuedRequests()
        #expect(events.all.isEmpty)
        let id = env.runtime.beginBackgroundTask(name: "keep-awake")
        env.runtime.requestBackground()
        env.runtime.requestBackground()
        env.waitForQueuedRequests()
        #expect(events.all == [.willResignActive, .didEnterBackground])
        env.runtime.endBackgroundTask(id)
        env.runtime.requestBackground()  // suspended is in the background too
        env.waitForQueuedRequests()
        #expect(events.all == [.willResignActive, .didEnterBackground, .didSuspend])
        withExtendedLifetime(token) {}
        env.shutDown()
    }

    @Test(arguments: ["active", "background", "suspended"])
    func terminationFromEachState(from start: String) throws {
        let env = try VirtualRuntime()
        let runtime = env.runtime
        let events = Recorder<LifecycleEvent>()
        let token = runtime.observe { events.append($0) }
        var hold = BackgroundTaskID.invalid
        if start != "active" {
            hold = runtime.beginBackgroundTask(name: "hold")
            runtime.requestBackground()
            env.clock.advance(by: .seconds(10))
            if start == "suspended" { runtime.endBackgroundTask(hold) }
            env.waitForQueuedRequests()
            #expect(runtime.state.description == start)
        }
        events.removeAll()
        // A grant begun in willTerminate keeps the program alive until it ends.
        let flush = Recorder<BackgroundTaskID>()
        let flushToken = runtime.observe { event in
            if event == .willTerminate { flush.append(runtime.beginBackgroundTask(name: "final-flush")) }
        }
        runtime.requestTermination()
        env.waitForQueuedRequests()
        let expected: [LifecycleEvent] =
            start == "active" ? [.willResignActive, .didEnterBackground, .willTerminate] : [.willTerminate]
        #expect(events.all == expected)
        #expect(runtime.state == .background)
        #expect(runtime.loopClosedCleanly == nil)
        for id in flush.all { runtime.endBackgroundTask(id) }
        if start == "background" {
            env.waitForQueuedRequests()
            #expect(runtime.state == .background)  // "hold" is still open
            runtime.endBackgroundTask(hold)
        }
        runtime.waitUntilTerminated()
        #expect(runtime.state == .terminated)
        #expect(runtime.loopClosedCleanly == true)
        #expect(events.all == expected)  // no didSuspend on the way out
        withExtendedLifetime((token, flushToken)) {}
    }

    @Test func terminationWaitsForTheBudgetDeadlineAtMost() throws {
        let env = try VirtualRuntime(budget: .seconds(30), lead: .seconds(5))
        let reports = Recorder<TerminationReport>()
        _ = env.runtime.beginBackgroundTask(name: "never-ends")
        env.runtime.requestTermination()
        env.clock.advance(by: .seconds(29))
        #expect(env.runtime.state == .background)
        env.clock.advance(by: .seconds(1))
        env.runtime.waitUntilTerminated()
        #expect(env.runtime.state == .terminated)
        #expect(env.logs.messages(at: .critical).contains { $0.message.contains("'never-ends'") })
        _ = reports
    }

    @Test func requestsAfterTerminationAreIgnoredAndNothingCrashes() throws {
        let env = try VirtualRuntime()
        env.runtime.requestTermination()
        env.runtime.waitUntilTerminated()
        env.runtime.requestForeground()
        env.runtime.requestBackground()
        env.runtime.requestTermination()
        env.runtime.waitForQueuedRequests()
        #expect(env.runtime.state == .terminated)
        #expect(env.runtime.beginBackgroundTask(name: "late") == .invalid)
        #expect(env.runtime.openBackgroundTasks.isEmpty)
        #expect(env.runtime.backgroundTimeRemaining == .zero)
    }

    @Test func cancelledOrReleasedObserversStopReceiving() throws {
        let env = try VirtualRuntime()
        let kept = Recorder<LifecycleEvent>()
        let cancelled = Recorder<LifecycleEvent>()
        let released = Recorder<LifecycleEvent>()
        let keptToken = env.runtime.observe { kept.append($0) }
        let cancelledToken = env.runtime.observe { cancelled.append($0) }
        var releasedToken: ObservationToken? = env.runtime.observe { released.append($0) }
        _ = releasedToken
        cancelledToken.cancel()
        releasedToken = nil
        env.runtime.requestBackground()
        env.waitForQueuedRequests()
        #expect(kept.count == 3)
        #expect(cancelled.all.isEmpty)
        #expect(released.all.isEmpty)
        #expect(cancelledToken.isCancelled)
        withExtendedLifetime(keptToken) {}
        env.shutDown()
    }

    @Test func everyObserverSeesAnEventBeforeTheNextTransitionStarts() throws {
        let env = try VirtualRuntime()
        let runtime = env.runtime
        let log = Recorder<String>()
        // The first observer requests the foreground while the background transition runs.
        let first = runtime.observe { event in
            log.append("first:\(event)")
            if event == .didEnterBackground { runtime.requestForeground() }
        }
        let second = runtime.observe { log.append("second:\($0)") }
        runtime.requestBackground()
        env.waitForQueuedRequests()
        #expect(
            log.all == [
                "first:willResignActive", "second:willResignActive",
                "first:didEnterBackground", "second:didEnterBackground",
                "first:didSuspend", "second:didSuspend",
                "first:willEnterForeground", "second:willEnterForeground",
                "first:didBecomeActive", "second:didBecomeActive",
            ])
        withExtendedLifetime((first, second)) {}
        env.shutDown()
    }

    @Test func lifecycleEventsSequenceDeliversEveryEventAndFinishesAtTermination() async throws {
        let env = try VirtualRuntime()
        let stream = env.runtime.lifecycleEvents
        env.waitForQueuedRequests()
        for _ in 0..<50 {
            env.runtime.requestBackground()
            env.runtime.requestForeground()
        }
        env.runtime.requestTermination()
        var received: [LifecycleEvent] = []
        for await event in stream { received.append(event) }  // ends at termination
        let cycle: [LifecycleEvent] = [
            .willResignActive, .didEnterBackground, .didSuspend, .willEnterForeground, .didBecomeActive,
        ]
        let expected =
            Array(repeating: cycle, count: 50).flatMap { $0 } + [
                .willResignActive, .didEnterBackground, .willTerminate,
            ]
        #expect(received == expected)
        await env.runtime.waitUntilTerminated()
        // A sequence made after termination finishes at once.
        var late = 0
        for await _ in env.runtime.lifecycleEvents { late += 1 }
        #expect(late == 0)
    }

    /// Memory warnings reach observers on the loop without changing the state, at most one
    /// per interval on the runtime's clock (the one inside it at the interval's end), and
    /// are counted; none reaches a terminated runtime.
    @Test func memoryWarningsReachObserversAtMostOncePerIntervalOnTheRuntimesClock() throws {
        let env = try VirtualRuntime { $0.memoryWarningInterval = .seconds(10) }
        let runtime = env.runtime
        let events = Recorder<(LifecycleEvent, Bool)>()
        let token = runtime.observe { events.append(($0, runtime.isOnLoopThread)) }
        // Begun before the request: a program in the background with no grant suspends,
        // and a grant begun off the loop after that is refused.
        let id = runtime.beginBackgroundTask(name: "held")  // stays in the background
        #expect(!id.isInvalid)
        runtime.requestBackground()
        env.waitForQueuedRequests()
        events.removeAll()
        runtime.requestMemoryWarning()
        env.waitForQueuedRequests()
        #expect(events.all.map(\.0) == [.didReceiveMemoryWarning])
        #expect(events.all.allSatisfy { $0.1 })
        for _ in 0..<5 { runtime.requestMemoryWarning() }
        env.clock.advance(by: .seconds(9))
        env.waitForQueuedRequests()
        #expect(events.count == 1)
        env.clock.advance(by: .seconds(1))
        env.waitForQueuedRequests()
        #expect(events.all.map(\.0) == [.didReceiveMemoryWarning, .didReceiveMemoryWarning])
        #expect(runtime.state == .background)
        #expect(env.counter("overtime_memory_warnings_total") == 2)
        runtime.endBackgroundTask(id)
        withExtendedLifetime(token) {}
        env.shutDown()
        runtime.requestMemoryWarning()  // after termination: ignored, not a trap
        #expect(events.all.filter { $0.0 == .didReceiveMemoryWarning }.count == 2)
    }

    @Test func aNegativeMemoryWarningIntervalIsRefused() {
        var configuration = RuntimeConfiguration()
        configuration.memoryWarningInterval = .seconds(-1)
        do {
            try configuration.validate()
            Issue.record("a negative interval was accepted")
        } catch {
            #expect("\(error)".contains("memoryWarningInterval"))
        }
    }
}
