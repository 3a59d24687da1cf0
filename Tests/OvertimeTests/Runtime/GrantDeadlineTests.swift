import Overtime
import OvertimeTestSupport
import OvertimeTesting
import Testing

@Suite("Grants: budget, lead time and deadlines on virtual time", .blocksBriefly, .timeLimit(.minutes(3)))
struct GrantDeadlineTests {
    @Test func expirationAtDeadlineMinusLeadAndTerminationAtTheDeadlineToTheInstant() throws {
        let reports = Recorder<TerminationReport>()
        let env = try VirtualRuntime(budget: .seconds(30), lead: .seconds(5)) { configuration in
            configuration.onTermination = { reports.append($0) }
        }
        let runtime = env.runtime
        let expiredAt = Recorder<MonotonicInstant>()
        let ended = Recorder<(BackgroundTaskEndReason, MonotonicInstant)>()
        let events = Recorder<(LifecycleEvent, MonotonicInstant)>()
        let token = runtime.observe { events.append(($0, env.clock.now)) }
        let id = runtime.beginBackgroundTask(name: "upload") {
            expiredAt.append(env.clock.now)
        } endHandler: { reason in
            ended.append((reason, env.clock.now))
        }
        env.clock.advance(by: .seconds(2))
        runtime.requestBackground()
        env.waitForQueuedRequests()
        #expect(runtime.backgroundTimeRemaining == .seconds(30))
        env.clock.advance(by: .seconds(25) - .nanoseconds(1))
        #expect(expiredAt.all.isEmpty)
        #expect(runtime.backgroundTimeRemaining == .seconds(5) + .nanoseconds(1))
        env.clock.advance(by: .nanoseconds(1))
        #expect(expiredAt.all == [env.at(.seconds(27))])
        env.clock.advance(by: .seconds(5) - .nanoseconds(1))
        #expect(ended.all.isEmpty)
        env.clock.advance(by: .nanoseconds(1))
        #expect(ended.all.map(\.0) == [.terminated])
        #expect(ended.all.map(\.1) == [env.at(.seconds(32))])
        let report = try #require(reports.all.first)
        #expect(report.name == "upload")
        #expect(report.id == id)
        #expect(report.callSite.description.hasPrefix("OvertimeTests/GrantDeadlineTests.swift:"))
        #expect(report.begunAt == env.at(.zero))
        #expect(report.age == .seconds(32))
        #expect(report.state == .background)
        #expect(report.expirationHandlerRan)
        #expect(report.expirationHandlerDuration == .zero)  // virtual time stood still in the handler
        // Reported at critical level, then the default policy ended it and the program suspended.
        #expect(
            env.logs.messages(at: .critical).contains {
                $0.message.contains("'upload'") && $0.metadata["call_site"] != nil
            })
        #expect(events.all.map(\.0) == [.willResignActive, .didEnterBackground, .didSuspend])
        #expect(events.all.last?.1 == env.at(.seconds(32)))
        #expect(runtime.state == .suspended)
        #expect(runtime.backgroundTimeRemaining == .zero)
        #expect(env.counter("overtime_background_tasks_ended_total", [("reason", "terminated")]) == 1)
        withExtendedLifetime(token) {}
        env.shutDown()
    }

    @Test func expirationHandlersRunOnceInBeginOrderAndEndingInOneGivesExpired() throws {
        let env = try VirtualRuntime(budget: .seconds(10), lead: .seconds(2))
        let runtime = env.runtime
        let order = Recorder<String>()
        let reasons = Recorder<(String, BackgroundTaskEndReason)>()
        let ids = Recorder<BackgroundTaskID>()
        for name in ["a", "b", "c"] {
            ids.append(
                runtime.beginBackgroundTask(name: name) {
                    order.append(name)
                    if name != "c" { runtime.endBackgroundTask(ids.all[["a", "b"].firstIndex(of: name)!]) }
                } endHandler: {
                    reasons.append((name, $0))
                })
        }
        runtime.requestBackground()
        env.clock.advance(by: .seconds(8))
        #expect(order.all == ["a", "b", "c"])
        #expect(reasons.all.map(\.0) == ["a", "b"])
        #expect(reasons.all.map(\.1) == [.expired, .expired])
        env.clock.advance(by: .seconds(1))
        #expect(order.all == ["a", "b", "c"])  // once
        runtime.endBackgroundTask(ids.all[2])  // ended after expiring, before the deadline
        env.waitForQueuedRequests()
        #expect(reasons.all.last! == ("c", .expired))
        #expect(runtime.state == .suspended)
        #expect(env.counter("overtime_background_tasks_expired_total") == 3)
        env.shutDown()
    }

    @Test func returningToTheForegroundClearsTheDeadlineAndOpenGrantsGoOn() throws {
        let env = try VirtualRuntime(budget: .seconds(10), lead: .seconds(2))
        let runtime = env.runtime
        let expirations = Recorder<MonotonicInstant>()
        let ended = Recorder<BackgroundTaskEndReason>()
        let id = runtime.beginBackgroundTask(name: "sync") {
            expirations.append(env.clock.now)
        } endHandler: {
            ended.append($0)
        }
        runtime.requestBackground()
        env.clock.advance(by: .seconds(5))
        runtime.requestForeground()
        env.waitForQueuedRequests()
        #expect(runtime.backgroundTimeRemaining == Runtime.unlimitedTime)
        env.clock.advance(by: .seconds(3600))
        #expect(expirations.all.isEmpty && ended.all.isEmpty)
        #expect(runtime.openBackgroundTasks.map(\.id) == [id])
        // The next background entry starts a fresh budget.
        runtime.requestBackground()
        env.clock.advance(by: .seconds(8))
        #expect(expirations.all == [env.at(.seconds(3613))])
        runtime.endBackgroundTask(id)
        env.waitForQueuedRequests()
        #expect(ended.all == [.expired])
        env.shutDown()
    }

    @Test func grantsBegunInTheForegroundDoNotExpireThere() throws {
        let env = try VirtualRuntime(budget: .seconds(10), lead: .seconds(2))
        let expirations = Recorder<Int>()
        let id = env.runtime.beginBackgroundTask(name: "long") { expirations.append(1) }
        env.clock.advance(by: .seconds(86_400))
        #expect(expirations.all.isEmpty)
        let info = try #require(env.runtime.openBackgroundTasks.first)
        #expect(info.id == id && info.age == .seconds(86_400) && info.remaining == Runtime.unlimitedTime)
        env.runtime.endBackgroundTask(id)
        env.shutDown()
    }

    @Test func perGrantMaximumDurationAppliesEvenInTheForegroundAndTheEarlierDeadlineWins() throws {
        let env = try VirtualRuntime(budget: .seconds(30), lead: .seconds(2))
        let runtime = env.runtime
        let log = Recorder<(String, MonotonicInstant)>()
        _ = runtime.beginBackgroundTask(name: "short", maximumDuration: .seconds(10)) {
            log.append(("short expired", env.clock.now))
        } endHandler: {
            log.append(("short \($0)", env.clock.now))
        }
        env.clock.advance(by: .seconds(20))
        #expect(log.all.map(\.0) == ["short expired", "short terminated"])
        #expect(log.all.map(\.1) == [env.at(.seconds(8)), env.at(.seconds(10))])
        log.removeAll()
        // In the background: the budget deadline (30 s from now) is earlier than 100 s.
        _ = runtime.beginBackgroundTask(name: "long", maximumDuration: .seconds(100)) {
            log.append(("long expired", env.clock.now))
        } endHandler: {
            log.append(("long \($0)", env.clock.now))
        }
        runtime.requestBackground()
        env.clock.advance(by: .seconds(200))
        #expect(log.all.map(\.0) == ["long expired", "long terminated"])
        #expect(log.all.map(\.1) == [env.at(.seconds(48)), env.at(.seconds(50))])
        env.shutDown()
    }

    @Test func forceExpiringRunsHandlersNowAndTerminatesAfterTheLeadTime() throws {
        let env = try VirtualRuntime(budget: .seconds(30), lead: .seconds(3))
        let runtime = env.runtime
        let log = Recorder<(String, MonotonicInstant)>()
        let first = runtime.beginBackgroundTask(name: "one") { log.append(("one expired", env.clock.now)) }
        _ = runtime.beginBackgroundTask(name: "two") {
            log.append(("two expired", env.clock.now))
        } endHandler: {
            log.append(("two \($0)", env.clock.now))
        }
        runtime.expireBackgroundTask(first)
        env.waitForQueuedRequests()
        #expect(log.all.map(\.0) == ["one expired"])
        runtime.endBackgroundTask(first)
        runtime.expireBackgroundTasks()
        env.clock.advance(by: .seconds(10))
        #expect(log.all.map(\.0) == ["one expired", "two expired", "two terminated"])
        #expect(log.all.last!.1 == env.at(.seconds(3)))
        env.shutDown()
    }

    @Test func openBackgroundTasksListsNameIDAgeCallSiteAndTimeLeft() throws {
        let env = try VirtualRuntime(budget: .seconds(30), lead: .seconds(5))
        let runtime = env.runtime
        let first = runtime.beginBackgroundTask(name: "first")
        env.clock.advance(by: .seconds(4))
        let second = runtime.beginBackgroundTask(name: "second", maximumDuration: .seconds(10))
        runtime.requestBackground()
        env.clock.advance(by: .seconds(1))
        let tasks = runtime.openBackgroundTasks
        #expect(tasks.map(\.name) == ["first", "second"])
        #expect(tasks.map(\.id) == [first, second])
        #expect(tasks.map(\.age) == [.seconds(5), .seconds(1)])
        #expect(tasks.map(\.remaining) == [.seconds(29), .seconds(9)])
        #expect(tasks.allSatisfy { $0.callSite.description.hasPrefix("OvertimeTests/GrantDeadlineTests.swift:") })
        #expect(tasks.allSatisfy { !$0.isExpired })
        env.shutDown()
    }
}
