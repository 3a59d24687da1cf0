import Foundation
import Overtime
import OvertimeLogUploader
import OvertimeSupport
import OvertimeTestSupport
import Testing

/// log-uploader with the system moving its lifecycle: logind (python-dbusmock's, on a
/// private system bus) announcing a sleep, and overtimectl showing what it saw.
@Suite(
    "log-uploader and logind's sleep", .serialized,
    .enabled(
        if: SystemBusStandIn.available, "needs dbus-daemon, busctl and python3-dbusmock (scripts/setup installs them)"),
    .timeLimit(.minutes(3)))
struct SystemEventsTests {
    @Test(.startsProcesses) func beforeTheSystemSleepsTheSpoolIsUploadedInsideLogindsDelayThenTheLockGoes() async throws
    {
        let standIn = try SystemBusStandIn(delay: .seconds(10))
        let folder = TemporaryDirectory("sleep-upload")
        defer { folder.remove() }
        let control = folder.path + "/control.sock"
        let ingest = folder.path + "/ingest.sock"
        let child = try RunningChild(
            [
                "--spool", folder.path + "/spool", "--sink", folder.path + "/collected", "--progress-interval", "0",
                "--control-socket", control, "--ingest-socket", ingest,
            ], environment: ["DBUS_SYSTEM_BUS_ADDRESS": standIn.address], executable: "log-uploader")
        UploaderSafetyTests.waitForSocket(ingest)
        UploaderSafetyTests.waitForSocket(control)
        #expect(try await eventually { (try? standIn.inhibitors()) == ["log-uploader"] }, "the delay lock at start")
        try SpoolIngestClient(path: ingest).send(UploaderSafetyTests.lines("before sleep", 1...300))
        let collected = {
            UploaderSafetyTests.collected(folder.path + "/collected").filter { $0.text.hasPrefix("before sleep") }
        }
        #expect(collected().isEmpty, "nothing uploads in the foreground without a schedule")

        try standIn.emit("PrepareForSleep", true)
        #expect(try await eventually { (try? standIn.inhibitors()) == [] }, "the lock goes once the upload is done")
        #expect(collected().count == 300, "uploaded before the lock went")
        let status = try overtimectl(["status", "--socket", control])
        #expect(status.status == 0)
        #expect(status.output.contains("suspended"), "\(status.output)")
        #expect(status.output.contains("PrepareForSleep(true)"), "\(status.output)")
        #expect(status.output.contains("no delay lock"), "\(status.output)")
        #expect(child.standardError.contains { $0.contains("logind: PrepareForSleep(true)") })

        try standIn.emit("PrepareForSleep", false)
        #expect(try await eventually { (try? standIn.inhibitors()) == ["log-uploader"] }, "taken again on resume")
        let resumed = try overtimectl(["status", "--socket", control])
        #expect(resumed.output.contains("active") && resumed.output.contains("delay lock held"), "\(resumed.output)")
        child.send(SIGTERM)
        #expect(child.waitForExit(timeout: .seconds(20)) == 0)
        let own = UploaderSafetyTests.collected(folder.path + "/collected").filter { $0.text.contains("logind") }
        #expect(
            !own.contains { $0.text.contains("PrepareForSleep") || $0.text.contains("delay lock") },
            "the monitor's own lines go to stderr, not into the spool it is emptying: \(own.map(\.text))")
    }

    /// log-uploader with its shipped settings (`--lead 5`, the 30 s budget) on a bus with
    /// the distribution's policy and logind's default 5 s delay: a sleep's budget (4.5 s) is
    /// shorter than the lead, and still the lines pending are uploaded before the lock goes.
    @Test(.startsProcesses) func withTheShippedSettingsASleepInLogindsDefaultDelayUploadsBeforeTheLockGoes()
        async throws
    {
        let standIn = try SystemBusStandIn(delay: .seconds(5), policy: .distribution)
        let folder = TemporaryDirectory("sleep-shipped")
        defer { folder.remove() }
        let (control, ingest) = (folder.path + "/control.sock", folder.path + "/ingest.sock")
        let child = try RunningChild(
            [
                "--spool", folder.path + "/spool", "--sink", folder.path + "/collected", "--progress-interval", "0",
                "--control-socket", control, "--ingest-socket", ingest, "--lead", "5", "--budget", "30",
            ], environment: ["DBUS_SYSTEM_BUS_ADDRESS": standIn.address], executable: "log-uploader")
        UploaderSafetyTests.waitForSocket(ingest)
        UploaderSafetyTests.waitForSocket(control)
        #expect(try await eventually { (try? standIn.inhibitors()) == ["log-uploader"] })
        let client = try SpoolIngestClient(path: ingest)
        for first in stride(from: 1, through: 20_000, by: 1000) {
            try client.send(UploaderSafetyTests.lines("pending", first...(first + 999)))
        }
        try standIn.emit("PrepareForSleep", true)
        #expect(try await eventually { (try? standIn.inhibitors()) == [] })
        let collected = UploaderSafetyTests.collected(folder.path + "/collected").filter {
            $0.text.hasPrefix("pending")
        }
        child.send(SIGTERM)
        #expect(child.waitForExit(timeout: .seconds(20)) == 0)
        // Its log says why it stopped short, if it did (out of time, expired, a failure).
        #expect(
            collected.count == 20_000,
            "uploaded before the lock went; the daemon said: \(child.standardError.joined(separator: "\n"))")
    }

    /// A shutdown announced starts the upload at once and does not end the daemon: the
    /// SIGTERM that follows does, with its own budget, and everything is uploaded.
    @Test(.startsProcesses) func aShutdownAnnouncedStartsTheUploadAndTheStopEndsIt() async throws {
        let standIn = try SystemBusStandIn(delay: .seconds(5), policy: .distribution)
        let folder = TemporaryDirectory("shutdown-announced")
        defer { folder.remove() }
        let (control, ingest) = (folder.path + "/control.sock", folder.path + "/ingest.sock")
        let child = try RunningChild(
            [
                "--spool", folder.path + "/spool", "--sink", folder.path + "/collected", "--progress-interval", "0",
                "--control-socket", control, "--ingest-socket", ingest, "--lead", "5",
            ], environment: ["DBUS_SYSTEM_BUS_ADDRESS": standIn.address], executable: "log-uploader")
        UploaderSafetyTests.waitForSocket(ingest)
        UploaderSafetyTests.waitForSocket(control)
        #expect(try await eventually { (try? standIn.inhibitors()) == ["log-uploader"] })
        try SpoolIngestClient(path: ingest).send(UploaderSafetyTests.lines("before shutdown", 1...2000))
        try standIn.emit("PrepareForShutdown", true)
        #expect(try await eventually { (try? standIn.inhibitors()) == [] }, "the lock goes within logind's delay")
        let collected = {
            UploaderSafetyTests.collected(folder.path + "/collected").filter { $0.text.hasPrefix("before shutdown") }
        }
        #expect(collected().count == 2000, "uploaded on the announcement, before the stop")
        let status = try overtimectl(["status", "--socket", control])
        #expect(status.status == 0, "still running: \(status.output)")
        #expect(status.output.contains("PrepareForShutdown(true)"), "\(status.output)")
        child.send(SIGTERM)
        #expect(child.waitForExit(timeout: .seconds(20)) == 0)
    }

    /// Any local user can address a signal to the daemon's connection: a forged
    /// `PrepareForShutdown(true)` or `PrepareForSleep(true)` from uid 65534 neither stops
    /// nor suspends log-uploader, and its lock stays; the forgeries are counted.
    @Test(.startsProcesses) func forgedSignalsFromAnUnprivilegedUserLeaveTheDaemonAsItWas() async throws {
        let standIn = try SystemBusStandIn(delay: .seconds(5), policy: .distribution)
        let folder = TemporaryDirectory("forged-shutdown")
        defer { folder.remove() }
        let control = folder.path + "/control.sock"
        let child = try RunningChild(
            [
                "--spool", folder.path + "/spool", "--sink", folder.path + "/collected", "--progress-interval", "0",
                "--control-socket", control,
            ], environment: ["DBUS_SYSTEM_BUS_ADDRESS": standIn.address], executable: "log-uploader")
        UploaderSafetyTests.waitForSocket(control)
        #expect(try await eventually { (try? standIn.inhibitors()) == ["log-uploader"] })
        let names = try standIn.uniqueNames()
        for member in ["PrepareForShutdown", "PrepareForSleep"] {
            for name in names {
                _ = try standIn.asUnprivileged([
                    "emit", "--destination=\(name)", "/org/freedesktop/login1", "org.freedesktop.login1.Manager",
                    member, "b", "true",
                ])
            }
        }
        #expect(
            try await eventually {
                (try? overtimectl(["status", "--socket", control]))?.output.contains("2 forged signals ignored") == true
            })
        let status = try overtimectl(["status", "--socket", control])
        #expect(status.output.contains("active") && status.output.contains("delay lock held"), "\(status.output)")
        #expect(try standIn.inhibitors() == ["log-uploader"])
        child.send(SIGTERM)
        #expect(child.waitForExit(timeout: .seconds(20)) == 0)
    }

    @Test(.startsProcesses) func withoutSystemEventsNoLockIsTaken() async throws {
        let standIn = try SystemBusStandIn()
        let folder = TemporaryDirectory("no-system-events")
        defer { folder.remove() }
        let control = folder.path + "/control.sock"
        let child = try RunningChild(
            [
                "--spool", folder.path + "/spool", "--sink", folder.path + "/collected", "--progress-interval", "0",
                "--control-socket", control, "--no-system-events",
            ], environment: ["DBUS_SYSTEM_BUS_ADDRESS": standIn.address], executable: "log-uploader")
        UploaderSafetyTests.waitForSocket(control)
        let status = try overtimectl(["status", "--socket", control])
        #expect(!status.output.contains("logind"), "\(status.output)")
        #expect(try standIn.inhibitors() == [])
        child.send(SIGTERM)
        #expect(child.waitForExit(timeout: .seconds(20)) == 0)
    }
}
