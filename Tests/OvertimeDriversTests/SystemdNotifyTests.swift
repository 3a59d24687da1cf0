import Foundation
import Overtime
import OvertimeSupport
import OvertimeTestSupport
import Testing

@Suite("systemd notify protocol, against a fake systemd socket", .onOwnThread(runningAtMost: .minutes(2)))
struct SystemdNotifyTests {
    @Test(.startsProcesses) func readyStatusStoppingAndExtendTimeout() throws {
        let systemd = try FakeSystemd()
        let child = try RunningChild(
            ["daemon"],
            environment: [
                "NOTIFY_SOCKET": systemd.path, "HARNESS_ON_TERMINATE": "flush:2500",
                "HARNESS_BUDGET_MS": "20000", "HARNESS_LEAD_MS": "2000",
            ])
        #expect(systemd.waitFor { $0 == "READY=1" })
        #expect(systemd.lines.first == "READY=1")
        #expect(systemd.lines.contains("STATUS=active, 0 background tasks open"))
        child.send(SIGUSR1)
        #expect(systemd.waitFor { $0.hasPrefix("STATUS=suspended") })
        child.send(SIGTERM)
        #expect(child.waitForExit() == 0)
        let lines = systemd.lines
        let stopping = try #require(lines.firstIndex(of: "STOPPING=1"))
        let extends = lines.filter { $0.hasPrefix("EXTEND_TIMEOUT_USEC=") }
        // Sent at once and then about every second while the 2.5 s flush is open.
        #expect(extends.count >= 2 && extends.count <= 10)
        let first = try #require(extends.first.flatMap { Int($0.dropFirst("EXTEND_TIMEOUT_USEC=".count)) })
        // The time left in the budget plus half a second to exit, never more.
        #expect(first > 18_000_000 && first <= 20_500_000)
        #expect(lines.firstIndex { $0.hasPrefix("EXTEND_TIMEOUT_USEC=") }! > stopping)
        #expect(lines.contains { $0.hasPrefix("STATUS=terminating (background), 1 background task open, ") })
        #expect(!lines.contains("WATCHDOG=1"))  // no WATCHDOG_USEC, no pings
    }

    @Test(.startsProcesses) func watchdogPingsComeFromTheLoopAndStopWhileItIsHeld() throws {
        let systemd = try FakeSystemd()
        let child = try RunningChild(
            ["daemon"],
            environment: [
                "NOTIFY_SOCKET": "\(systemd.path)", "WATCHDOG_USEC": "200000", "HARNESS_RELOAD_BLOCK_MS": "1200",
            ])
        #expect(systemd.waitFor { $0 == "READY=1" })
        usleep(1_000_000)
        let pings = { systemd.messages.all.filter { $0.0 == "WATCHDOG=1" }.map(\.1) }
        let before = pings().count
        #expect(before >= 3 && before <= 14)  // every 100 ms for about a second (fewer if the machine is loaded)
        child.send(SIGHUP)  // a reload observer holds the loop for 1.2 s
        #expect(child.waitForLine { $0.hasPrefix("EVENT reload") } != nil)
        usleep(2_000_000)
        let times = pings()
        let gaps = zip(times.dropFirst(), times).map { $0 - $1 }
        #expect(gaps.contains { $0 >= .milliseconds(1000) })  // silence while held
        #expect(times.count > before + 3)  // and pings again afterwards
        child.send(SIGTERM)
        #expect(child.waitForExit() == 0)
    }

    @Test(.startsProcesses) func extensionsComeAtMostOnceASecondAndNeverPastTheBudget() throws {
        let systemd = try FakeSystemd()
        let child = try RunningChild(
            ["daemon"],
            environment: [
                "NOTIFY_SOCKET": systemd.path, "WATCHDOG_USEC": "200000", "HARNESS_ON_TERMINATE": "flush:1500",
                "HARNESS_BUDGET_MS": "3000", "HARNESS_LEAD_MS": "1000",
            ])
        #expect(systemd.waitFor { $0 == "READY=1" })
        child.send(SIGTERM)
        #expect(child.waitForExit() == 0)
        let extends = systemd.lines.filter { $0.hasPrefix("EXTEND_TIMEOUT_USEC=") }
        // 1.5 s of flushing with a watchdog ping every 100 ms: one extension a second, not one a ping.
        #expect(extends.count >= 1 && extends.count <= 3, "\(extends)")
        let first = try #require(extends.first.flatMap { Int($0.dropFirst("EXTEND_TIMEOUT_USEC=".count)) })
        #expect(first > 2_000_000 && first <= 3_500_000, "the 3 s budget plus half a second to exit at most")
    }

    @Test(.startsProcesses) func abstractNotifySocketNamesWork() throws {
        let name = "@overtime-test-\(UUID().uuidString)"
        let address = try #require(UnixSocketAddress(name))
        let socket = makeUnixSocket(datagram: true)
        defer { close(socket) }
        #expect(address.withSockAddr { bind(socket, $0, $1) } == 0)
        let child = try RunningChild(["daemon"], environment: ["NOTIFY_SOCKET": name])
        var buffer = [UInt8](repeating: 0, count: 512)
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let count = recv(socket, &buffer, buffer.count, 0)
        #expect(count > 0)
        #expect(String(decoding: buffer[0..<max(count, 0)], as: UTF8.self).hasPrefix("READY=1\n"))
        child.send(SIGTERM)
        #expect(child.waitForExit() == 0)
    }
}
