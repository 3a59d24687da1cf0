import Dispatch
import Overtime
import OvertimeTestSupport
import OvertimeTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Grants: refusals and misuse", .blocksBriefly, .timeLimit(.minutes(3)))
struct RefusalAndMisuseTests {
    /// Begins on the loop thread (the inline path) and returns the ID.
    private func beginOnLoop(_ runtime: Runtime, _ name: String, maximumDuration: Duration? = nil) -> BackgroundTaskID {
        let result = Recorder<BackgroundTaskID>()
        runtime.execute { result.append(runtime.beginBackgroundTask(name: name, maximumDuration: maximumDuration)) }
        runtime.waitForQueuedRequests()
        return result.all[0]
    }

    @Test(arguments: [false, true])
    func eachRefusalReasonIsLoggedCountedAndReturnsInvalid(onLoop: Bool) throws {
        let env = try VirtualRuntime(budget: .seconds(10), lead: .seconds(2), maximumOpen: 2)
        let runtime = env.runtime
        func begin(_ name: String, maximumDuration: Duration? = nil) -> BackgroundTaskID {
            onLoop
                ? beginOnLoop(runtime, name, maximumDuration: maximumDuration)
                : runtime.beginBackgroundTask(name: name, maximumDuration: maximumDuration)
        }
        func lastWarning() -> String { env.logs.messages(at: .warning).last?.message ?? "" }

        #expect(begin("too-short", maximumDuration: .seconds(2)) == .invalid)
        #expect(lastWarning().contains("maximum duration 2.0 seconds is not longer than the expiration lead time"))

        let a = begin("a")
        let b = begin("b")
        #expect(!a.isInvalid && !b.isInvalid)
        #expect(begin("c") == .invalid)
        #expect(lastWarning().contains("cap of 2 open background tasks"))

        runtime.requestBackground()
        env.clock.advance(by: .seconds(8))  // at the expiration point: only the lead time is left
        #expect(begin("late") == .invalid)
        #expect(lastWarning().contains("less than the expiration lead time"))

        runtime.endBackgroundTask(a)
        runtime.endBackgroundTask(b)
        env.waitForQueuedRequests()
        #expect(runtime.state == .suspended)
        #expect(begin("suspended") == .invalid)
        #expect(lastWarning().contains("suspended"))

        runtime.requestTermination()
        env.clock.advance(by: .seconds(10))
        runtime.waitUntilTerminated()
        #expect(runtime.beginBackgroundTask(name: "after") == .invalid)
        #expect(lastWarning().contains("terminated"))

        for reason in ["maximum_duration_too_short", "too_many_open", "insufficient_time", "suspended", "terminated"] {
            #expect(env.counter("overtime_background_tasks_refused_total", [("reason", reason)]) == 1, "\(reason)")
        }
        #expect(env.logs.messages(at: .warning).allSatisfy { $0.message.contains("refused") })
    }

    @Test func theGrantCapIsExactAcrossThreads() throws {
        let env = try VirtualRuntime(maximumOpen: 100)
        let granted = Recorder<BackgroundTaskID>()
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            for _ in 0..<50 { granted.append(env.runtime.beginBackgroundTask(name: "x")) }
        }
        #expect(granted.all.filter { !$0.isInvalid }.count == 100)
        env.waitForQueuedRequests()
        #expect(env.runtime.openBackgroundTasks.count == 100)
        for id in granted.all where !id.isInvalid { env.runtime.endBackgroundTask(id) }
        env.waitForQueuedRequests()
        #expect(env.runtime.openBackgroundTasks.isEmpty)
        env.shutDown()
    }

    @Test(arguments: [false, true])
    func misuseNeverCrashesWarnsWithTheCallSiteAndCounts(onLoop: Bool) throws {
        let env = try VirtualRuntime()
        let runtime = env.runtime
        let ended = Recorder<BackgroundTaskEndReason>()
        let id = runtime.beginBackgroundTask(name: "once") {
        } endHandler: {
            ended.append($0)
        }
        let forged = BackgroundTaskID(rawValue: 0x0000_0042_0000_0001)
        let misuse: @Sendable () -> Void = {
            runtime.endBackgroundTask(id)
            runtime.endBackgroundTask(id)  // double end
            runtime.endBackgroundTask(forged)  // unknown
            runtime.endBackgroundTask(.invalid)
            runtime.endBackgroundTask(BackgroundTaskID(rawValue: 1 << 63 | 999_999))  // never handed out
        }
        if onLoop { runtime.execute(misuse) } else { misuse() }
        env.waitForQueuedRequests()
        #expect(ended.all == [.completed])
        let warnings = env.logs.messages(at: .warning)
        #expect(warnings.count == 4)
        #expect(
            warnings.allSatisfy {
                $0.metadata["call_site"]?.hasPrefix("OvertimeTests/RefusalAndMisuseTests.swift:") == true
            })
        #expect(warnings.contains { $0.metadata["id"] == "\(forged)" })
        #expect(env.counter("overtime_misuse_total", [("kind", "unknown_id")]) == 3)
        #expect(env.counter("overtime_misuse_total", [("kind", "invalid_id")]) == 1)
        env.shutDown()
    }

    @Test func aGrantBegunOffTheLoopCanBeEndedOnTheLoopBeforeItsBeginIsApplied() throws {
        let env = try VirtualRuntime()
        let runtime = env.runtime
        let ended = Recorder<BackgroundTaskEndReason>()
        // The loop is held by the first closure while the begin is queued behind it.
        let gate = DispatchSemaphore(value: 0)
        let handoff = Recorder<BackgroundTaskID>()
        runtime.execute {
            gate.wait()
            runtime.endBackgroundTask(handoff.all[0])
        }
        handoff.append(
            runtime.beginBackgroundTask(name: "handed-over") {
            } endHandler: {
                ended.append($0)
            })
        gate.signal()
        env.waitForQueuedRequests()
        #expect(ended.all == [.completed])
        #expect(env.logs.messages(at: .warning).isEmpty)
        env.shutDown()
    }

    @Test func invalidConfigurationNamesTheField() {
        func error(_ change: (inout RuntimeConfiguration) -> Void) -> String {
            var configuration = RuntimeConfiguration()
            change(&configuration)
            do {
                _ = try Runtime(configuration: configuration)
                return "no error"
            } catch {
                return "\(error)"
            }
        }
        #expect(error { $0.backgroundBudget = .seconds(-1) }.contains("backgroundBudget must be positive"))
        #expect(error { $0.expirationLeadTime = .seconds(-1) }.contains("expirationLeadTime must not be negative"))
        #expect(
            error { $0.expirationLeadTime = .seconds(30) }.contains(
                "expirationLeadTime must be shorter than backgroundBudget"))
        #expect(error { $0.maximumOpenBackgroundTasks = 0 }.contains("maximumOpenBackgroundTasks"))
        #expect(error { $0.watchdogTimeout = .zero }.contains("watchdogTimeout"))
        #expect(
            error { $0.signalHandling = SignalHandling(actions: [SIGKILL: .terminate]) }
                .contains("signalHandling cannot handle SIGKILL"))
        #expect(error { $0.signalHandling = SignalHandling(actions: [99: .reload]) }.contains("signalHandling"))
        #expect(
            error { $0.controlSocket = .path(String(repeating: "x", count: 200)) }.contains("controlSocket must be"))
        #expect(error { $0.controlSocket = .path("@abstract") }.contains("controlSocket"))
        #expect(error { $0.signalHandling = nil } == "no error")
        #expect(error { _ in } == "no error")
    }
}
