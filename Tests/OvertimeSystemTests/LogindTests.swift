import Foundation
import Overtime
import OvertimeSupport
import OvertimeTestSupport
import Testing

@testable import OvertimeSystem

#if canImport(Glibc)
    import Glibc
#endif

@Suite("SleepDecisions: logind's sleep and shutdown as actions")
struct SleepDecisionsTests {
    typealias Action = SleepDecisions.Action

    @Test func aSleepWithWorkRunningWaitsForItWithinLogindsDelayAndResumesWhereItWas() {
        var decisions = SleepDecisions(margin: .milliseconds(500))
        decisions.delayRead(.seconds(5))
        var transcript: [[Action]] = []
        transcript.append(decisions.logindAvailable())
        transcript.append(decisions.logindAvailable())  // again: one lock
        transcript.append(decisions.lockGranted())
        transcript.append(decisions.sleepComing(state: .active))
        transcript.append(decisions.sleepComing(state: .background))  // a repeated signal
        transcript.append(decisions.nothingRuns())
        transcript.append(decisions.nothingRuns())  // the timer after the suspension
        transcript.append(decisions.resumed())
        transcript.append(decisions.resumed())
        #expect(
            transcript == [
                [.takeLock], [], [],
                [.enterBackground(budgetAtMost: .milliseconds(4500)), .releaseLockAfter(.milliseconds(4500))],
                [], [.releaseLock], [], [.takeLock, .returnToForeground], [],
            ])
    }

    @Test func aSleepWhileSuspendedLetsGoAtOnceAndStaysThereOnResume() {
        var decisions = SleepDecisions(margin: .seconds(1))
        #expect(decisions.logindAvailable() == [.takeLock])
        #expect(decisions.lockGranted() == [])
        #expect(decisions.sleepComing(state: .suspended) == [.releaseLock])
        #expect(decisions.resumed() == [.takeLock])
    }

    /// A shutdown announced starts the work in the runtime's own budget (the SIGTERM that
    /// follows ends it with the stop's); the lock goes when nothing runs or logind's delay
    /// is up. Called off, it is a resume.
    @Test func aShutdownStartsTheWorkAndTheLockGoesWithinTheDelay() {
        var decisions = SleepDecisions(margin: .milliseconds(500))
        decisions.delayRead(.seconds(5))
        #expect(decisions.logindAvailable() == [.takeLock])
        #expect(
            decisions.shutdownComing(state: .active) == [
                .enterBackground(budgetAtMost: nil), .releaseLockAfter(.milliseconds(4500)),
            ])
        #expect(decisions.shutdownComing(state: .background) == [], "a repeated signal")
        #expect(decisions.sleepComing(state: .background) == [], "one announcement at a time")
        #expect(decisions.resumed() == [], "a resume does not end a shutdown")
        #expect(decisions.nothingRuns() == [.releaseLock])
        #expect(decisions.nothingRuns() == [])
        #expect(decisions.shutdownCalledOff() == [.takeLock, .returnToForeground])
        #expect(decisions.shutdownCalledOff() == [])
        // Suspended already: nothing to start, the lock goes at once.
        #expect(decisions.shutdownComing(state: .suspended) == [.releaseLock])
    }

    /// A lock that arrives after the sleep began holds nothing back: it goes at once; one
    /// asked for while the bus was gone is asked for again when logind appears.
    @Test func aLateLockGoesAtOnceAndALostOneIsTakenAgain() {
        var decisions = SleepDecisions(margin: .seconds(10))
        #expect(decisions.budget == .zero)  // logind waits 5 s by default: no time, never negative
        #expect(decisions.logindAvailable() == [.takeLock])
        #expect(
            decisions.sleepComing(state: .background) == [
                .enterBackground(budgetAtMost: .zero), .releaseLockAfter(.zero),
            ])
        #expect(decisions.nothingRuns() == [.releaseLock])
        #expect(decisions.lockGranted() == [.releaseLock])
        #expect(decisions.logindAvailable() == [])  // not during the sleep
        #expect(decisions.resumed() == [.takeLock])
        decisions.lockLost()
        #expect(decisions.logindAvailable() == [.takeLock])
    }
}

@Suite("SessionDecisions: a logind session's activity and lock as actions")
struct SessionDecisionsTests {
    @Test func theProgramIsInTheForegroundOnlyWhileItsSessionIsActiveAndUnlocked() {
        var decisions = SessionDecisions()
        #expect(decisions.lockRequested() == [], "nothing is known of the session yet")
        #expect(decisions.activeRead(true) == [.enterBackground], "locked before the first reading: acted on then")
        #expect(decisions.unlockRequested() == [.returnToForeground])
    }

    @Test func aTranscript() {
        var decisions = SessionDecisions()
        #expect(decisions.activeRead(true) == [], "an active session at start leaves the program where it is")
        #expect(decisions.activeRead(true) == [], "a repeated reading does nothing")
        #expect(decisions.lockRequested() == [.enterBackground])
        #expect(decisions.lockedHintRead(true) == [], "the locker confirming the lock does nothing more")
        #expect(decisions.activeRead(false) == [], "already in the background")
        #expect(decisions.unlockRequested() == [], "unlocked but switched away: still in the background")
        #expect(decisions.activeRead(true) == [.returnToForeground])
        #expect(decisions.lockedHintRead(false) == [], "the locker's hint catching up changes nothing")
        #expect(decisions.lockedHintRead(true) == [.enterBackground], "a locker that only sets the hint locks too")
        #expect(decisions.lockedHintRead(true) == [], "the same hint again is no change")
        #expect(decisions.unlockRequested() == [.returnToForeground])
        decisions.forgotten()
        #expect(decisions.activeRead(false) == [.enterBackground], "after the bus came back, the first reading acts")
    }
}

@Suite(
    "LogindMonitor against a private system bus and python-dbusmock's logind", .onOwnThread(runningAtMost: .minutes(3)),
    .serialized,
    .enabled(
        if: SystemBusStandIn.available, "needs dbus-daemon, busctl and python3-dbusmock (scripts/setup installs them)"))
struct LogindMonitorTests {
    let who = "overtime-test-\(getpid())"

    private func monitor(_ env: VirtualRuntime, _ standIn: SystemBusStandIn, session: String? = nil) throws
        -> LogindMonitor
    {
        var configuration = LogindMonitor.Configuration()
        configuration.who = who
        configuration.busAddress = standIn.address
        configuration.session = session
        let monitor = LogindMonitor(runtime: env.runtime, configuration: configuration, logger: env.logs.logger)
        try monitor.start()
        return monitor
    }

    /// The lock is held from the start; a sleep sends the program to the background with
    /// a budget inside logind's delay, the lock goes exactly when the last grant ends, and
    /// the resume takes it again and returns to the foreground.
    @Test(.startsProcesses) func theLockGoesWhenTheLastGrantEndsAndComesBackOnResume() async throws {
        let standIn = try SystemBusStandIn(delay: .seconds(5))
        let env = try VirtualRuntime(budget: .seconds(30), lead: .seconds(1))
        let events = Recorder<LifecycleEvent>()
        let token = env.runtime.observe { events.append($0) }
        let monitor = try monitor(env, standIn)
        #expect(try await eventually { (try? standIn.inhibitors()) == [who] && monitor.status.holdsLock })
        #expect(try await eventually { monitor.status.delay == .seconds(5) })
        let grant = env.runtime.beginBackgroundTask(name: "upload")
        try standIn.emit("PrepareForSleep", true)
        #expect(try await eventually { events.all.contains(.didEnterBackground) })
        env.waitForQueuedRequests()
        #expect(env.runtime.state == .background)
        #expect(env.runtime.backgroundTimeRemaining <= .milliseconds(4500))
        #expect(try standIn.inhibitors() == [who], "let go while a grant was open")
        env.runtime.endBackgroundTask(grant)
        #expect(try await eventually { (try? standIn.inhibitors()) == [] })
        #expect(env.runtime.state == .suspended)
        #expect(monitor.status.lastEvent == "PrepareForSleep(true)")
        #expect(monitor.status.lastSleepWait != nil)
        try standIn.emit("PrepareForSleep", false)
        #expect(try await eventually { (try? standIn.inhibitors()) == [who] && monitor.status.holdsLock })
        #expect(try await eventually { env.runtime.state == .active })
        // Taken again from inside the signal's callback, on the same connection.
        #expect(monitor.status.connected)
        #expect(!env.logs.messages(at: .warning).contains { $0.message.contains("went away") })
        #expect(
            env.logs.messages(at: .notice).contains { $0.message.contains("the system resumed from sleep") },
            "wall-clock plans are made again after a sleep")
        monitor.stop()
        #expect(try await eventually { (try? standIn.inhibitors()) == [] })
        withExtendedLifetime(token) {}
        env.shutDown()
        #expect(env.runtime.loopClosedCleanly == true)
    }

    /// A grant that never ends holds the lock no longer than logind's delay less the
    /// margin: it expires, is terminated at the capped deadline, and the lock goes.
    @Test(.startsProcesses) func aGrantThatNeverEndsHoldsTheLockNoLongerThanLogindWaits() async throws {
        let standIn = try SystemBusStandIn(delay: .seconds(3))
        let env = try VirtualRuntime(budget: .seconds(30), lead: .seconds(1))
        let monitor = try monitor(env, standIn)
        #expect(try await eventually { monitor.status.holdsLock && monitor.status.delay == .seconds(3) })
        let expired = Recorder<Bool>()
        _ = env.runtime.beginBackgroundTask(name: "stuck") { expired.append(true) }
        try standIn.emit("PrepareForSleep", true)
        #expect(try await eventually { env.runtime.state == .background })
        env.waitForQueuedRequests()
        #expect(env.runtime.backgroundTimeRemaining <= .milliseconds(2500))
        env.clock.advance(by: .milliseconds(2500))
        #expect(try await eventually { (try? standIn.inhibitors()) == [] })
        #expect(expired.count == 1)
        #expect(env.logs.messages(at: .critical).contains { $0.message.contains("'stuck'") })
        monitor.stop()
        env.shutDown()
    }

    /// Already suspended: nothing to finish, the lock goes at once; the resume takes it
    /// again and leaves the program where it was.
    @Test(.startsProcesses) func nothingRunningLetsGoAtOnce() async throws {
        let standIn = try SystemBusStandIn()
        let env = try VirtualRuntime()
        let monitor = try monitor(env, standIn)
        env.runtime.requestBackground()
        env.waitForQueuedRequests()
        #expect(env.runtime.state == .suspended)
        #expect(try await eventually { (try? standIn.inhibitors()) == [who] })
        try standIn.emit("PrepareForSleep", true)
        #expect(try await eventually { (try? standIn.inhibitors()) == [] })
        try standIn.emit("PrepareForSleep", false)
        #expect(try await eventually { (try? standIn.inhibitors()) == [who] })
        env.waitForQueuedRequests()
        #expect(env.runtime.state == .suspended)
        monitor.stop()
        env.shutDown()
    }

    /// A shutdown announced is not a termination: the program goes to the background with
    /// its own budget (not cut to logind's delay), the lock goes within the delay, and the
    /// SIGTERM that follows ends the work.
    @Test(.startsProcesses) func aShutdownStartsTheWorkAndLeavesItsEndToTheStop() async throws {
        let standIn = try SystemBusStandIn(delay: .seconds(5))
        let env = try VirtualRuntime(budget: .seconds(30), lead: .seconds(5))
        let monitor = try monitor(env, standIn)
        #expect(try await eventually { monitor.status.holdsLock && monitor.status.delay == .seconds(5) })
        let grant = env.runtime.beginBackgroundTask(name: "drain")
        try standIn.emit("PrepareForShutdown", true)
        #expect(try await eventually { env.runtime.state == .background })
        env.waitForQueuedRequests()
        #expect(env.runtime.backgroundTimeRemaining == .seconds(30), "the runtime's own budget")
        #expect(try standIn.inhibitors() == [who], "held while the work runs, within the delay")
        env.clock.advance(by: .milliseconds(4500))
        #expect(try await eventually { (try? standIn.inhibitors()) == [] }, "let go when logind's delay is up")
        #expect(env.runtime.state == .background, "the work goes on until the stop")
        env.runtime.requestTermination()
        env.runtime.endBackgroundTask(grant)
        #expect(try await eventually { env.runtime.loopClosedCleanly == true })
    }

    /// The bus killed (a crash, a restart of dbus) and started again: logged, no crash,
    /// and the lock taken again once logind is back; started twice, one lock.
    @Test(.startsProcesses) func theBusComingBackMeansTheLockIsTakenAgain() async throws {
        let standIn = try SystemBusStandIn()
        let env = try VirtualRuntime()
        let monitor = try monitor(env, standIn)
        try monitor.start()  // again: nothing more
        #expect(try await eventually { (try? standIn.inhibitors()) == [who] })
        standIn.stop()
        #expect(try await eventually { !monitor.status.connected && !monitor.status.holdsLock })
        #expect(env.logs.messages(at: .warning).contains { $0.message.contains("system bus went away") })
        try standIn.start()
        #expect(try await eventually { (try? standIn.inhibitors()) == [who] })
        #expect(monitor.status.connected)
        monitor.stop()
        env.shutDown()
        #expect(env.runtime.loopClosedCleanly == true)
    }

    /// A bus restarted behind a socket that stays (systemd's `dbus.socket`, dbus-broker): no
    /// change in the socket's folder says it is back, and still the lock is taken again.
    @Test(.startsProcesses) func aBusRestartedBehindASocketThatStaysIsConnectedAgain() async throws {
        let standIn = try SystemBusStandIn(startNow: false)
        try standIn.startSocketActivated()
        let env = try VirtualRuntime()
        let monitor = try monitor(env, standIn)
        #expect(try await eventually { (try? standIn.inhibitors()) == [who] && monitor.status.holdsLock })
        try await standIn.restartBusBehindItsSocket { () async throws in
            let gone = try await eventually { !monitor.status.holdsLock }
            #expect(gone, "the connection's end was seen")
        }
        #expect(try await eventually { (try? standIn.inhibitors()) == [who] && monitor.status.holdsLock })
        monitor.stop()
        env.shutDown()
    }

    /// A bus that appears after start is used, though the folders of its socket did not
    /// exist then (`/run/dbus` made later): the nearest folder is watched, then the next.
    @Test(.startsProcesses) func aBusThatAppearsAfterStartIsUsedThoughItsFoldersWereMissing() async throws {
        let standIn = try SystemBusStandIn(startNow: false)
        let env = try VirtualRuntime()
        let monitor = try monitor(env, standIn)
        #expect(!monitor.status.connected)
        try standIn.start()
        #expect(try await eventually { (try? standIn.inhibitors()) == [who] && monitor.status.holdsLock })
        monitor.stop()
        env.shutDown()
    }

    /// A kiosk's session: switched away or locked sends the program to the background,
    /// active and unlocked again brings it back; the status says what it saw.
    @Test(.startsProcesses) func theSessionSwitchedAwayOrLockedMovesTheProgramToTheBackgroundAndBack() async throws {
        let standIn = try SystemBusStandIn()
        try standIn.addSession("c7", active: true)
        let env = try VirtualRuntime()
        let monitor = try monitor(env, standIn, session: "c7")
        #expect(try await eventually { monitor.status.sessionActive == true && monitor.status.sessionLocked == false })
        #expect(env.runtime.state == .active)
        try standIn.session("c7", "Lock")
        #expect(try await eventually { env.runtime.state == .suspended })
        #expect(monitor.status.sessionLocked == true && monitor.status.lastEvent == "session locked")
        try standIn.session("c7", "Unlock")
        #expect(try await eventually { env.runtime.state == .active })
        try standIn.setSessionActive("c7", false)
        #expect(try await eventually { env.runtime.state == .suspended })
        #expect(monitor.status.lastEvent == "session switched away")
        #expect(monitor.status.summary.contains("session inactive"))
        try standIn.setSessionActive("c7", true)
        #expect(try await eventually { env.runtime.state == .active })
        monitor.stop()
        env.shutDown()
        #expect(env.runtime.loopClosedCleanly == true)
    }

    /// A session logind does not have is a warning, not a failure: sleep still works.
    @Test(.startsProcesses) func aSessionLogindDoesNotHaveIsAWarning() async throws {
        let standIn = try SystemBusStandIn()
        let env = try VirtualRuntime()
        let monitor = try monitor(env, standIn, session: "nope")
        #expect(try await eventually { monitor.status.holdsLock })
        #expect(
            try await eventually {
                env.logs.messages(at: .warning).contains { $0.message.contains("no session 'nope'") }
            })
        #expect(monitor.status.sessionActive == nil)
        monitor.stop()
        env.shutDown()
    }

    @Test func aBadConfigurationIsAClearError() throws {
        let env = try VirtualRuntime()
        defer { env.shutDown() }
        var configuration = LogindMonitor.Configuration()
        configuration.why = ""
        #expect(throws: LogindError.self) {
            try LogindMonitor(runtime: env.runtime, configuration: configuration).start()
        }
        configuration = .init()
        configuration.margin = .seconds(-1)
        #expect(throws: LogindError.self) {
            try LogindMonitor(runtime: env.runtime, configuration: configuration).start()
        }
        configuration = .init()
        configuration.session = ""
        #expect(throws: LogindError.self) {
            try LogindMonitor(runtime: env.runtime, configuration: configuration).start()
        }
    }
}
