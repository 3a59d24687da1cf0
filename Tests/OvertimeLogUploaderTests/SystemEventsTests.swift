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
    @Test func beforeTheSystemSleepsTheSpoolIsUploadedInsideLogindsDelayThenTheLockGoes() async throws {
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

    @Test func withoutSystemEventsNoLockIsTaken() async throws {
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
