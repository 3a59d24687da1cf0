import Foundation
import Overtime
import OvertimeTestSupport
import Testing

@_spi(ScheduleStore) @testable import OvertimeScheduler

#if canImport(Glibc)
    import Glibc
#endif

/// The conditions as Linux shows them: laid-out sysfs and procfs trees, a real small file
/// system that fills up, and a real network namespace whose default route comes and goes.
@Suite(
    "Linux conditions: routes, power supplies, free space, netlink", .onOwnThread(runningAtMost: .minutes(2)),
    .serialized)
struct LinuxConditionSourceTests {
    private func write(_ text: String, _ path: String) throws {
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try text.write(toFile: path, atomically: false, encoding: .utf8)
    }

    private let routeHeader =
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"

    /// The kernel asked over netlink says what `/proc/net` says, here and in a network
    /// namespace with no route; where neither can be read, the network is unevaluable.
    @Test func theKernelsRouteTableOverNetlinkAgreesWithProcNet() throws {
        let files = LinuxConditionSource(configuration: .init(storagePath: "/tmp"))
        var viaFiles = LinuxConditionSource.Configuration(storagePath: "/tmp")
        viaFiles.procNet = "/proc/self/net"  // the same tables, read as files
        #expect(try RouteTable.hasDefaultRoute() == LinuxConditionSource(configuration: viaFiles).hasDefaultRoute())
        #expect(files.unevaluable().isEmpty)
        var hidden = LinuxConditionSource.Configuration(storagePath: "/tmp")
        hidden.procNet = "/nonexistent/net"
        let unknowable = LinuxConditionSource(configuration: hidden).unevaluable()
        #expect(unknowable[.network]?.contains("cannot be read") == true, "\(unknowable)")
    }

    @Test func aDefaultRouteIsReadFromIPv4AndIPv6Tables() throws {
        let folder = TemporaryDirectory("conditions-routes")
        defer { folder.remove() }
        var configuration = LinuxConditionSource.Configuration(storagePath: folder.path)
        configuration.procNet = folder.path + "/net"
        let source = LinuxConditionSource(configuration: configuration)
        #expect(!source.hasDefaultRoute(), "no tables: no network")
        try write(
            routeHeader + "eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n", folder.path + "/net/route")
        try write(
            "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
                + "00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n",
            folder.path + "/net/ipv6_route")
        #expect(!source.hasDefaultRoute(), "a link route and IPv6's unreachable default on lo are not a way out")
        try write(
            routeHeader + "wlan0\t00000000\t010200C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n", folder.path + "/net/route")
        #expect(source.hasDefaultRoute())
        try write(routeHeader, folder.path + "/net/route")
        try write(
            "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
                + "fd000000000000000000000000000001 00000400 00000003 00000000 00000003     eth0\n",
            folder.path + "/net/ipv6_route")
        #expect(source.hasDefaultRoute(), "IPv6 only")
    }

    @Test func powerSuppliesAreReadAsTheKernelLaysThemOut() throws {
        let folder = TemporaryDirectory("conditions-power")
        defer { folder.remove() }
        var configuration = LinuxConditionSource.Configuration(storagePath: folder.path)
        configuration.powerSupplies = folder.path + "/power_supply"
        let source = LinuxConditionSource(configuration: configuration)
        #expect(source.readPower() == (true, false), "no supply at all: a server, powered")
        let root = folder.path + "/power_supply"
        try write("Battery\n", root + "/BAT0/type")
        try write("Discharging\n", root + "/BAT0/status")
        try write("40\n", root + "/BAT0/capacity")
        try write("Mains\n", root + "/AC/type")
        try write("0\n", root + "/AC/online")
        #expect(source.readPower() == (false, false), "on battery, not low")
        try write("15\n", root + "/BAT0/capacity")
        #expect(source.readPower() == (false, true), "low at the threshold")
        try write("1\n", root + "/AC/online")
        try write("Charging\n", root + "/BAT0/status")
        #expect(source.readPower() == (true, false), "plugged in: charging is not low")
        try write("Unknown\n", root + "/BAT0/status")
        #expect(source.readPower() == (true, true), "mains online, a low battery not charging")
        let conditions = source.read()
        #expect(conditions.externalPower && conditions.batteryLow)
    }

    @Test func storageIsLowWhenARealFileSystemFillsUp() throws {
        let folder = TemporaryDirectory("conditions-storage")
        defer { folder.remove() }
        let mountPoint = folder.path + "/small"
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        let mount = try ChildCommand.run("/bin/mount", ["-t", "tmpfs", "-o", "size=8m", "tmpfs", mountPoint])
        try #require(mount.status == 0, "mounting a tmpfs needs root: \(mount.output)")
        defer { _ = try? ChildCommand.run("/bin/umount", ["-l", mountPoint]) }
        var configuration = LinuxConditionSource.Configuration(storagePath: mountPoint)
        configuration.storageLowBelow = 2 << 20
        let source = LinuxConditionSource(configuration: configuration)
        #expect(!source.storageLow(), "8 MiB free")
        let fill = mountPoint + "/fill"
        // Written by a child process, never through a descriptor of this one: a child that
        // another test forks meanwhile shares this process's descriptors until its exec
        // (close-on-exec closes them only there), and while it holds one the removed file's
        // space stays taken. Under load such a child was slow enough to fail "room again".
        let written = try ChildCommand.run(
            "/bin/dd", ["if=/dev/zero", "of=\(fill)", "bs=1M", "count=7", "status=none"])
        try #require(written.status == 0, "\(written.output)")
        #expect(source.storageLow(), "under 2 MiB left")
        #expect(source.read().storageLow)
        try FileManager.default.removeItem(atPath: fill)
        #expect(!source.storageLow(), "room again")
    }

    /// A daemon in a network namespace of its own, at first with no route: its run needing
    /// the network starts when a default route is added (announced by netlink, no
    /// polling), is stopped when the route goes, and retried when it comes back.
    @Test(.startsProcesses) func aRealDefaultRouteComingAndGoingStartsStopsAndRetriesARun() async throws {
        try await onOwnThread {
            let folder = TemporaryDirectory("conditions-netns")
            defer { folder.remove() }
            let child = try RunningChild(["scheduler-network", folder.path], wrapper: ["/usr/bin/unshare", "--net"])
            try #require(child.waitForLine { $0 == "READY" } != nil, "\(child.standardError)")
            usleep(300_000)
            #expect(!child.output.contains { $0.hasPrefix("RAN") }, "no route in a new namespace: no run")
            func inNamespace(_ command: String) throws {
                let result = try ChildCommand.run(
                    "/usr/bin/nsenter", ["-t", "\(child.pid)", "-n", "/bin/sh", "-c", command])
                try #require(result.status == 0, "\(command): \(result.output)")
            }
            try inNamespace(
                "ip link add v0 type veth peer name v1 && ip addr add 10.9.0.2/24 dev v0 && ip link set v1 up"
                    + " && ip link set v0 up && ip route add default via 10.9.0.1")
            let ran = try #require(child.waitForLine(timeout: .seconds(10)) { $0.hasPrefix("RAN") })
            #expect(ran == "RAN 1 1")
            try inNamespace("ip route del default")
            #expect(child.waitForLine(timeout: .seconds(10)) { $0 == "STOPPED 1 1" } != nil, "stopped")
            usleep(300_000)
            #expect(!child.output.contains("RAN 1 2"), "not retried while the route is gone")
            try inNamespace("ip route add default via 10.9.0.1")
            #expect(child.waitForLine(timeout: .seconds(10)) { $0 == "RAN 1 2" } != nil, "retried, same run")
            child.send(SIGKILL)
            _ = child.waitForExit()
        }
    }

    /// A source let go while its runtime runs on, and one stopped before its loop made its
    /// watchers, leave no netlink socket listening, and a route change announced afterwards
    /// calls back nothing that is gone. (A fleet test process crashed reading a freed
    /// watcher's buffer when another suite's device events reached a source let go so.)
    @Test(.startsProcesses) func aSourceLetGoOrStoppedEarlyLeavesNoNetlinkWatcherBehind() async throws {
        try await onOwnThread {
            let child = try RunningChild(["conditions-let-go"], wrapper: ["/usr/bin/unshare", "--net"])
            let sockets = try #require(child.waitForLine { $0.hasPrefix("SOCKETS ") }, "\(child.standardError)")
            let counts = sockets.split(separator: " ").dropFirst().compactMap { Int($0) }
            try #require(counts.count == 4, "\(sockets)")
            #expect(counts[1] == counts[0] + 2, "watching: a socket for routes, one for device events: \(sockets)")
            #expect(counts[2] == counts[0], "let go: both closed: \(sockets)")
            #expect(counts[3] == counts[0], "stopped before its loop made them: made, then closed: \(sockets)")
            #expect(child.waitForLine { $0 == "DONE" } != nil, "\(child.standardError)")
            #expect(child.waitForExit() == 0, "\(child.standardError)")
        }
    }

    /// A daemon whose power supplies are laid out by the test and announced only by the
    /// kernel's device events (nothing looks again for an hour): plugging in changes the
    /// files, and nothing runs until a power-supply uevent arrives on the real
    /// `NETLINK_KOBJECT_UEVENT` socket — then the run needing external power starts. (This
    /// machine has no power supply to plug in, so the test sends the event, in the
    /// kernel's format, to the group the kernel announces on; it needs root.)
    @Test(.startsProcesses) func aPowerSupplyDeviceEventStartsARunNeedingExternalPower() async throws {
        try await onOwnThread {
            let folder = TemporaryDirectory("conditions-uevent")
            defer { folder.remove() }
            let root = folder.path + "/power_supply"
            try write("Mains\n", root + "/AC/type")
            try write("0\n", root + "/AC/online")
            try write("Battery\n", root + "/BAT0/type")
            try write("Discharging\n", root + "/BAT0/status")
            let child = try RunningChild(["scheduler-power", folder.path])
            defer {
                child.send(SIGKILL)
                _ = child.waitForExit()
            }
            try #require(child.waitForLine { $0 == "READY" } != nil, "\(child.standardError)")
            try sendDeviceEvent("change", "/devices/virtual/power_supply/BAT0", subsystem: "power_supply")
            usleep(300_000)
            #expect(!child.output.contains { $0.hasPrefix("RAN") }, "announced, still on battery: no run")
            try write("1\n", root + "/AC/online")
            try write("Charging\n", root + "/BAT0/status")
            try sendDeviceEvent("change", "/devices/virtual/block/loop0", subsystem: "block")
            usleep(500_000)
            #expect(
                !child.output.contains { $0.hasPrefix("RAN") },
                "plugged in, but nothing announced it (another subsystem's event does not count)")
            try sendDeviceEvent("change", "/devices/virtual/power_supply/AC", subsystem: "power_supply")
            #expect(child.waitForLine(timeout: .seconds(10)) { $0 == "RAN 1" } != nil, "announced: the run starts")
        }
    }

    /// Sends a device event as the kernel formats it (`ACTION@DEVPATH`, then `KEY=value`
    /// fields, each NUL-terminated) to the uevent multicast group the kernel uses.
    private func sendDeviceEvent(_ action: String, _ path: String, subsystem: String) throws {
        let descriptor = socket(AF_NETLINK, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 15)
        try #require(descriptor >= 0, "socket(NETLINK_KOBJECT_UEVENT): \(String(cString: strerror(errno)))")
        defer { close(descriptor) }
        let fields = ["\(action)@\(path)", "ACTION=\(action)", "DEVPATH=\(path)", "SUBSYSTEM=\(subsystem)", "SEQNUM=1"]
        let message = Array(fields.joined(separator: "\0").utf8) + [0]
        // struct sockaddr_nl (Glibc's module leaves it out): family, padding, port ID 0, groups.
        var address = [UInt8](repeating: 0, count: 12)
        withUnsafeBytes(of: UInt16(AF_NETLINK)) { address.replaceSubrange(0..<2, with: $0) }
        withUnsafeBytes(of: UInt32(1)) { address.replaceSubrange(8..<12, with: $0) }
        let sent = address.withUnsafeBytes { target in
            message.withUnsafeBytes {
                sendto(
                    descriptor, $0.baseAddress, $0.count, 0, target.baseAddress!.assumingMemoryBound(to: sockaddr.self),
                    12)
            }
        }
        try #require(sent == message.count, "sending a device event needs root: \(String(cString: strerror(errno)))")
    }
}
