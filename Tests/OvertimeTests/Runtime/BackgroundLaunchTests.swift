import Dispatch
import OvertimeSupport
import OvertimeTestSupport
import OvertimeTesting
import Testing

@testable import Overtime

/// Work the program did not start itself (a scheduled run) begun while suspended resumes
/// the program into the background for it, with a fresh budget, and the program suspends
/// again once no grant is open.
@Suite("Grants: background launches from suspension", .blocksBriefly, .timeLimit(.minutes(3)))
struct BackgroundLaunchTests {
    private func launch(_ runtime: Runtime, name: String) -> Result<BackgroundTaskID, BackgroundTaskRefusal> {
        runtime.begin(
            name: name, maximumDuration: nil, callSite: CallSite(fileID: #fileID, line: #line), expirationHandler: nil,
            endHandler: nil, launching: true)
    }

    @Test(arguments: [false, true])
    func aLaunchWhileSuspendedResumesIntoTheBackgroundWithAFreshBudget(onTheLoop: Bool) throws {
        let env = try VirtualRuntime(budget: .seconds(30), lead: .seconds(5))
        let runtime = env.runtime
        let events = Recorder<LifecycleEvent>()
        let token = runtime.observe { events.append($0) }
        runtime.requestBackground()
        env.waitForQueuedRequests()
        #expect(runtime.state == .suspended)
        #expect(runtime.beginBackgroundTask(name: "plain").isInvalid, "a plain begin is still refused")
        env.clock.advance(by: .seconds(100))  // long past the first budget
        let result = Locked<Result<BackgroundTaskID, BackgroundTaskRefusal>?>(nil)
        if onTheLoop {
            runtime.execute { result.withLock { $0 = launch(runtime, name: "scheduled") } }
        } else {
            result.withLock { $0 = launch(runtime, name: "scheduled") }
        }
        env.waitForQueuedRequests()
        let id = try #require(try result.withLock { $0 }?.get())
        #expect(runtime.state == .background)
        #expect(runtime.backgroundTimeRemaining == .seconds(30), "a fresh budget")
        #expect(runtime.openBackgroundTasks.map(\.name) == ["scheduled"])
        runtime.endBackgroundTask(id)
        env.waitForQueuedRequests()
        #expect(runtime.state == .suspended)
        #expect(
            events.all == [
                .willResignActive, .didEnterBackground, .didSuspend, .didEnterBackground, .didSuspend,
            ])
        #expect(env.counter("overtime_background_tasks_refused_total", [("reason", "suspended")]) == 1)
        token.cancel()
        env.shutDown()
    }

    /// Launches racing the loop's suspension, round after round: each returns an ID that
    /// holds (its end handler says completed), never one the loop refuses later.
    @Test func launchesRacingSuspensionAlwaysHold() throws {
        let env = try VirtualRuntime(budget: .seconds(3600), lead: .seconds(1))
        let runtime = env.runtime
        runtime.requestBackground()
        env.waitForQueuedRequests()
        // The second launch of each round comes from one thread, woken for it: a thread
        // made for each round cost more than the round itself (under ThreadSanitizer, with
        // both cores busy, the test took up to 118 s of its 180).
        let go = DispatchSemaphore(value: 0)
        let second = DispatchSemaphore(value: 0)
        let secondID = Locked<BackgroundTaskID?>(.invalid)  // nil: no more rounds
        spawnThread(name: "second-launch") {
            while true {
                go.wait()
                guard secondID.withLock({ $0 }) != nil else { return }
                secondID.withLock { $0 = (try? launch(runtime, name: "b").get()) ?? .invalid }
                second.signal()
            }
        }
        defer {
            secondID.withLock { $0 = nil }
            go.signal()
        }
        for _ in 0..<2_000 {
            let first = try launch(runtime, name: "a").get()
            go.signal()
            runtime.endBackgroundTask(first)
            second.wait()
            let id = secondID.withLock { $0 } ?? .invalid
            #expect(!id.isInvalid)
            runtime.endBackgroundTask(id)
        }
        env.waitForQueuedRequests()
        #expect(runtime.state == .suspended)
        #expect(env.counter("overtime_misuse_total", [("kind", "unknown_id")]) == 0)
        #expect(!env.logs.entries.all.contains { $0.message.contains("refused") })
        env.shutDown()
    }
}
