import Foundation
import OvertimeTestSupport
import Testing

@Suite("Policies that end the process, in a child process", .timeLimit(.minutes(2)))
struct ProcessExitTests {
    @Test func exitProcessPolicyWritesTheReportThenExitsWithTheStatus() throws {
        let child = try ChildProcess.run(["exit-policy"])
        #expect(child.status == 42)
        let lines = child.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.first == "EXPIRING")
        #expect(lines.count == 2)
        let report = try #require(lines.last)
        #expect(report.hasPrefix("REPORT background task 'never-ended' #r1, begun at OvertimeTestHarness/main.swift:"))
        #expect(report.contains("terminated after 30.0 seconds in state background"))
        #expect(!child.standardOutput.contains("STILL RUNNING"))
        // The critical log line is written before the exit, too.
        #expect(child.standardError.contains("critical"))
        #expect(child.standardError.contains("'never-ended'"))
    }

    @Test func theWatchdogNamesTheBlockingHandlerAndExits() throws {
        let child = try ChildProcess.run(["watchdog"])
        #expect(child.status == 70)
        #expect(child.standardOutput.contains("HANDLER BLOCKS"))
        #expect(!child.standardOutput.contains("HANDLER RETURNED"))
        #expect(!child.standardOutput.contains("RUN RETURNED"))
        #expect(
            child.standardError.contains(
                "watchdog: loop blocked for"))
        #expect(
            child.standardError.contains(
                "by expiration handler of grant 'blocking' #r1, begun at OvertimeTestHarness/main.swift:"))
        // Tripped well before the 30 s the handler would block for.
        #expect(child.elapsed < .seconds(10))
    }
}
