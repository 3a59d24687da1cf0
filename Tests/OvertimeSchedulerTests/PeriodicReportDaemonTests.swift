import Foundation
import OvertimeTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The `periodic-report` example as an operator meets it: `overtimectl schedule`,
/// `history`, `run`, `cancel` on its control socket, the next run in systemd's STATUS=,
/// a kill -9 and a restart.
@Suite("periodic-report daemon with overtimectl and systemd", .serialized, .timeLimit(.minutes(2)))
struct PeriodicReportDaemonTests {
    private func overtimectl(_ socket: String, _ arguments: [String]) throws -> (
        status: Int32, output: String, errors: String
    ) {
        try OvertimeTestSupport.overtimectl(arguments + ["--socket", socket])
    }

    private func waitFor(_ condition: () throws -> Bool) rethrows -> Bool {
        for _ in 0..<400 {
            if try condition() { return true }
            usleep(5000)
        }
        return false
    }

    @Test(.startsProcesses) func anOperatorInspectsRunsRetriesAndCancelsThroughOvertimectl() async throws {
        try await onOwnThread {
            let folder = TemporaryDirectory("periodic-report")
            defer { folder.remove() }
            let systemd = try FakeSystemd()
            let socket = folder.path + "/control.sock"
            let arguments = [
                "--state-directory", folder.path, "--every", "3600", "--fail-attempts", "1", "--retry-delay", "600",
            ]
            let daemon = try RunningChild(
                arguments, environment: ["NOTIFY_SOCKET": systemd.path], executable: "periodic-report")
            #expect(daemon.waitForLine { $0.contains("attempt 1: failing on purpose") } != nil)
            #expect(systemd.waitFor { $0.hasPrefix("STATUS=") && $0.contains("next run: report at ") })

            var schedule = try overtimectl(socket, ["schedule"])
            #expect(schedule.status == 0, "\(schedule.output)")
            #expect(schedule.output.contains("report") && schedule.output.contains("every 3600 s"))
            #expect(try waitFor { try overtimectl(socket, ["schedule"]).output.contains("retry at") })
            var history = try overtimectl(socket, ["history", "report"])
            #expect(history.output.contains("failed"), "\(history.output)")

            // The retry is ten minutes away: the operator runs it now.
            let run = try overtimectl(socket, ["run", "report"])
            #expect(run.status == 0 && run.output.contains("started run 1"), "\(run.output)")
            #expect(daemon.waitForLine { $0 == "report run 1 attempt 2: written" } != nil)
            #expect(try waitFor { try overtimectl(socket, ["history", "report"]).output.contains("succeeded") })
            history = try overtimectl(socket, ["history", "report", "--json"])
            #expect(history.output.contains("\"ok\":true"))
            let unknown = try overtimectl(socket, ["run", "nothing"])
            #expect(unknown.status == 1 && unknown.errors.contains("no request 'nothing'"), "\(unknown.errors)")

            // Killed and restarted: the request is still there, the completed run not repeated.
            daemon.send(SIGKILL)
            _ = daemon.waitForExit()
            let again = try RunningChild(arguments, executable: "periodic-report")
            #expect(again.waitForLine { $0.hasPrefix("report: next run ") } != nil)
            usleep(300_000)
            #expect(!again.output.contains { $0.contains("written") }, "nothing due: nothing ran")
            let reports = try String(contentsOfFile: folder.path + "/reports.log", encoding: .utf8)
            #expect(reports.split(separator: "\n").count == 1, "one report for one run")

            // Who did what, kept across the restart: the run as the user running overtimectl.
            var actions = try overtimectl(socket, ["actions"])
            #expect(
                actions.status == 0 && actions.output.contains(ActingUserName.current)
                    && actions.output.contains("started run 1"), "\(actions.output)")
            let cancel = try overtimectl(socket, ["cancel", "report", "--by", "ops on call"])
            #expect(cancel.status == 0 && cancel.output.contains("cancelled 'report'"))
            actions = try overtimectl(socket, ["actions", "--limit", "1"])
            #expect(
                actions.output.contains("ops on call") && actions.output.contains("cancel")
                    && !actions.output.contains("started run 1"), "\(actions.output)")
            let retried = try overtimectl(socket, ["retry", "--failed", "--prefix", "rep"])
            #expect(
                retried.status == 0 && retried.output.contains("submitted again 0 requests"), "\(retried.output)")
            let both = try overtimectl(socket, ["retry", "report", "--failed"])
            #expect(both.status == 64 && both.errors.contains("not both"), "\(both.errors)")
            let untagged = try overtimectl(socket, ["run", "--tag", "a,b"])
            #expect(untagged.status == 1 && untagged.errors.contains("tag"), "\(untagged.errors)")
            schedule = try overtimectl(socket, ["schedule"])
            #expect(schedule.output.contains("no pending requests"))
            #expect(try overtimectl(socket, ["history", "report"]).output.contains("succeeded"), "history stays")
            again.send(SIGTERM)
            #expect(again.waitForExit(timeout: .seconds(20)) == 0)
        }
    }

    @Test(.startsProcesses) func aCalendarScheduleRunsAtItsTimesAndABadOneIsAClearError() async throws {
        try await onOwnThread {
            let folder = TemporaryDirectory("periodic-report")
            defer { folder.remove() }
            let bad = try RunningChild(
                ["--state-directory", folder.path, "--on", "*-*-* 25:00 UTC"], executable: "periodic-report")
            #expect(bad.waitForExit() != 0)
            #expect(bad.standardError.joined().contains("--on: '*-*-* 25:00 UTC' is not a calendar expression"))
            let zone = try RunningChild(
                ["--state-directory", folder.path, "--on", "daily Mars/Olympus"], executable: "periodic-report")
            #expect(zone.waitForExit() != 0)
            #expect(zone.standardError.joined().contains("Mars/Olympus"), "\(zone.standardError)")

            let socket = folder.path + "/control.sock"
            let daemon = try RunningChild(
                ["--state-directory", folder.path, "--on", "*:*:0/2 UTC"], executable: "periodic-report")
            #expect(daemon.waitForLine { $0.contains("attempt 1: written") } != nil)
            #expect(daemon.waitForLine { $0.contains("run 2 attempt 1: written") } != nil)
            let schedule = try overtimectl(socket, ["schedule"])
            #expect(schedule.output.contains("on *:*:0/2 UTC"), "\(schedule.output)")
            // The next run is planned on one of the calendar's times: an even second, exactly.
            let next = schedule.output.split(separator: " ").first { $0.hasSuffix("Z") && $0.contains("T") }
            let second = next.flatMap { Int($0.dropLast(8).suffix(2)) }
            #expect(next?.hasSuffix(".000000Z") == true && second.map { $0 % 2 == 0 } == true, "\(schedule.output)")
            daemon.send(SIGTERM)
            #expect(daemon.waitForExit(timeout: .seconds(20)) == 0)
        }
    }
}

/// The name overtimectl records an action as done by when `--by` is not given.
enum ActingUserName {
    static var current: String {
        guard let entry = getpwuid(getuid()), let name = entry.pointee.pw_name else { return "uid \(getuid())" }
        return String(cString: name)
    }
}
