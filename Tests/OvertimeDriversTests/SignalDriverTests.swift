import Foundation
import OvertimeTestSupport
import Testing

@Suite("Signals sent to a real child daemon", .onOwnThread(runningAtMost: .minutes(2)))
struct SignalDriverTests {
    private func events(_ child: RunningChild) -> [String] {
        child.output.filter { $0.hasPrefix("EVENT ") }.map { String($0.split(separator: " ")[1]) }
    }

    @Test(.startsProcesses) func theDefaultMappingMovesTheLifecycle() throws {
        let child = try RunningChild(["daemon"])
        #expect(child.waitForLine { $0 == "READY" } != nil)
        child.send(SIGUSR1)
        #expect(child.waitForLine { $0 == "EVENT didSuspend suspended" } != nil)
        child.send(SIGUSR2)
        #expect(child.waitForLine { $0 == "EVENT didBecomeActive active" } != nil)
        child.send(SIGHUP)
        #expect(child.waitForLine { $0 == "EVENT reload active" } != nil)
        child.send(SIGTERM)
        #expect(child.waitForExit() == 0)
        #expect(
            events(child) == [
                "willResignActive", "didEnterBackground", "didSuspend", "willEnterForeground", "didBecomeActive",
                "reload", "willResignActive", "didEnterBackground", "willTerminate",
            ])
        #expect(child.output.last == "RUN RETURNED")
    }

    /// A SIGTERM while the daemon still sets up (its runtime made, not yet running) waits
    /// for the loop and terminates it as any other, instead of killing the process.
    @Test(.startsProcesses) func aSIGTERMBeforeTheLoopRunsTerminatesGracefullyOnceItDoes() throws {
        let child = try RunningChild(["daemon"], environment: ["HARNESS_SETUP_MS": "700"])
        #expect(child.waitForLine { $0 == "CREATED" } != nil)
        child.send(SIGTERM)
        child.send(SIGTERM)  // twice, as an impatient operator does: one termination
        #expect(child.waitForExit() == 0)
        #expect(events(child).last == "willTerminate")
        #expect(child.output.last == "RUN RETURNED")
    }

    /// A timer that is always due (every 1 ms, each run busy for 2 ms) never keeps the
    /// loop from answering a control request or handling SIGTERM.
    @Test(.startsProcesses) func aTimerThatIsAlwaysDueNeverKeepsASignalOrAControlRequestWaiting() throws {
        let folder = TemporaryDirectory("busy-timer")
        defer { folder.remove() }
        let socket = folder.path + "/control.sock"
        let child = try RunningChild(
            ["daemon"], environment: ["HARNESS_BUSY_TIMER_US": "1000", "OVERTIME_CONTROL_SOCKET": socket])
        #expect(child.waitForLine { $0 == "READY" } != nil)
        let status = try overtimectl(["status", "--socket", socket])
        #expect(status.status == 0, "\(status.output)")
        child.send(SIGTERM)
        let exited = child.waitForExit(timeout: .seconds(60))
        #expect(exited == 0)
        if exited == nil { child.send(SIGKILL) }
    }

    @Test(.startsProcesses) func sigintTerminatesGracefullyWaitingForTheFinalFlush() throws {
        let child = try RunningChild(["daemon"], environment: ["HARNESS_ON_TERMINATE": "flush:300"])
        #expect(child.waitForLine { $0 == "READY" } != nil)
        child.send(SIGINT)
        #expect(child.waitForExit() == 0)
        let output = child.output
        #expect(output.firstIndex(of: "FLUSHED")! < output.firstIndex(of: "RUN RETURNED")!)
        #expect(!output.contains { $0.hasPrefix("REPORT") })
    }

    @Test(.startsProcesses) func theSameSignalAgainExpiresEverythingNow() throws {
        let child = try RunningChild(
            ["daemon"],
            environment: ["HARNESS_ON_TERMINATE": "hold", "HARNESS_BUDGET_MS": "60000", "HARNESS_LEAD_MS": "500"])
        #expect(child.waitForLine { $0 == "READY" } != nil)
        child.send(SIGTERM)
        #expect(child.waitForLine { $0.hasPrefix("EVENT willTerminate") } != nil)
        usleep(200_000)
        child.send(SIGTERM)  // within the grace (1 s): the same request, not "stop now"
        usleep(1_100_000)
        #expect(!child.output.contains("EXPIRED final-flush"))  // 58.5 s before its expiration point
        let second = ContinuousClock.now
        child.send(SIGTERM)
        #expect(child.waitForLine { $0 == "EXPIRED final-flush" } != nil)
        #expect(child.waitForExit() == 0)
        // Terminated one lead time (0.5 s) after the second signal, not after the 60 s budget.
        #expect(ContinuousClock.now - second < .seconds(10))
        #expect(child.output.contains { $0.hasPrefix("REPORT background task 'final-flush'") })
    }

    /// The grace counts from the first request, whoever made it: a program that asked for
    /// its own termination and then gets a SIGTERM within the grace (a supervisor stopping
    /// it at the same moment) goes on terminating gracefully; a SIGTERM after the grace
    /// expires everything.
    @Test(.startsProcesses) func aSIGTERMSoonAfterTheProgramsOwnRequestIsTheSameRequest() throws {
        let child = try RunningChild(
            ["daemon"],
            environment: [
                "HARNESS_ON_TERMINATE": "hold", "HARNESS_BUDGET_MS": "60000", "HARNESS_LEAD_MS": "500",
                "HARNESS_SELF_TERMINATE": "1",
            ])
        #expect(child.waitForLine { $0.hasPrefix("EVENT willTerminate") } != nil)
        child.send(SIGTERM)  // well within the grace of the program's own request
        usleep(1_100_000)
        #expect(!child.output.contains("EXPIRED final-flush"), "a SIGTERM within the grace expired every grant")
        let second = ContinuousClock.now
        child.send(SIGTERM)
        #expect(child.waitForLine { $0 == "EXPIRED final-flush" } != nil)
        #expect(child.waitForExit() == 0)
        #expect(ContinuousClock.now - second < .seconds(10))
    }

    @Test(.startsProcesses) func aStormOfAlternatingSignalsLeavesAValidEventOrder() throws {
        let child = try RunningChild(["daemon"])
        #expect(child.waitForLine { $0 == "READY" } != nil)
        for index in 0..<1000 {
            child.send(index % 2 == 0 ? SIGUSR1 : SIGUSR2)
            if index % 50 == 0 { usleep(1000) }  // let some land between others
        }
        usleep(100_000)
        child.send(SIGTERM)
        #expect(child.waitForExit() == 0)
        let seen = events(child)
        #expect(lifecycleOrderProblems(seen) == [])
        #expect(seen.count > 10)  // signals coalesce, but many transitions happened
        #expect(seen.last == "willTerminate")
    }
}
