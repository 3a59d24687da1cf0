import Foundation
import OvertimeLogUploader
import OvertimeTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// log-uploader's periodic upload is a request in its schedule (`OvertimeScheduler`),
/// pending only while the spool holds lines: it runs while the daemon stays in the
/// foreground, shows in `overtimectl schedule` and `history`, and waits for a default
/// route when the sink is on the network.
@Suite("log-uploader's periodic upload as a scheduled request", .serialized, .timeLimit(.minutes(2)))
struct ScheduledUploadTests {
    private typealias Support = UploaderSafetyTests

    /// log-uploader on `folder` uploading to `sink` every 200 ms, its ingestion and
    /// control sockets in `folder`, and a client connected to the first.
    private func startUploader(
        _ folder: TemporaryDirectory, sink: String, wrapper: [String] = [], environment: [String: String] = [:]
    ) throws -> (RunningChild, SpoolIngestClient, control: String) {
        let socket = folder.path + "/ingest.sock"
        let control = folder.path + "/control.sock"
        let child = try RunningChild(
            [
                "--spool", folder.path + "/spool", "--sink", sink, "--ingest-socket", socket, "--control-socket",
                control, "--upload-interval", "0.2", "--progress-interval", "0",
            ], environment: environment, executable: "log-uploader", wrapper: wrapper)
        Support.waitForSocket(socket)
        return (child, try SpoolIngestClient(path: socket), control)
    }

    @Test(.startsProcesses) func aFolderSinkIsUploadedToPeriodicallyAndEachRunIsInTheHistory() async throws {
        try await onOwnThread {
            let folder = TemporaryDirectory("scheduled-upload")
            defer { folder.remove() }
            let collectedRoot = folder.path + "/collected"
            let (child, client, control) = try startUploader(folder, sink: collectedRoot)
            try client.send(Support.lines("first", 1...20))
            func collected(_ prefix: String) -> Int {
                Support.collected(collectedRoot).filter { $0.text.hasPrefix(prefix + " ") }.count
            }
            #expect(
                Support.waitFor { collected("first") == 20 }, "uploaded without a signal: the scheduled run drained")
            try client.send(Support.lines("second", 1...20))
            #expect(Support.waitFor { collected("second") == 20 }, "and again, a period later")
            // Everything sent: nothing is scheduled at rest (an idle daemon wakes for nothing).
            #expect(
                Support.waitFor {
                    (try? overtimectl(["schedule", "--socket", control]).output)?.contains("no pending requests")
                        == true
                }, "no upload pending with the spool empty")
            let history = try overtimectl(["history", "log-upload", "--socket", control])
            let succeeded = history.output.split(separator: "\n").filter { $0.contains("succeeded") }
            #expect(succeeded.count >= 2, "\(history.output)")
            child.send(SIGTERM)
            #expect(child.waitForExit() == 0)
            #expect(collected("first") == 20 && collected("second") == 20, "each line once")
            #expect(FileManager.default.fileExists(atPath: folder.path + "/spool/schedule.db"), "beside the spool")
        }
    }

    /// Once everything spooled is uploaded, the daemon at rest wakes no thread and writes
    /// nothing, over six upload intervals (each would have been a run, its history and a
    /// checkpoint written, with a repeating request).
    @Test func anIdleDaemonWakesForNothingAndWritesNothing() async throws {
        try await onOwnThread {
            let folder = TemporaryDirectory("idle-upload")
            defer { folder.remove() }
            let collectedRoot = folder.path + "/collected"
            // The kernel's memory pressure is a real event, and the other tests on this
            // machine cause some: its watch is turned off as systemd's protocol says, the
            // rest of the system events stay on.
            let (child, client, _) = try startUploader(
                folder, sink: collectedRoot, environment: ["MEMORY_PRESSURE_WATCH": "/dev/null"])
            try client.send(Support.lines("once", 1...20))
            #expect(
                Support.waitFor {
                    Support.collected(collectedRoot).filter { $0.text.hasPrefix("once ") }.count == 20
                })
            // The last run's end recorded and put on disk, and the watchdog's last look (a
            // quarter of its 10 s timeout after the last work) over.
            usleep(3_000_000)
            func switches() -> Int {
                let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(child.pid)/task")) ?? []
                return tasks.reduce(0) { total, task in
                    let status =
                        (try? String(contentsOfFile: "/proc/\(child.pid)/task/\(task)/status", encoding: .utf8)) ?? ""
                    return total
                        + status.split(separator: "\n").filter { $0.contains("ctxt_switches") }
                        .compactMap { Int($0.split(separator: "\t").last ?? "") }.reduce(0, +)
                }
            }
            func written() -> Int {
                let io = (try? String(contentsOfFile: "/proc/\(child.pid)/io", encoding: .utf8)) ?? ""
                return io.split(separator: "\n").first { $0.hasPrefix("write_bytes:") }
                    .flatMap { Int($0.split(separator: " ").last ?? "") } ?? -1
            }
            // Under ThreadSanitizer its runtime's own background thread wakes the process.
            let countsSwitches = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__tsan_init") == nil
            // At rest: a window of six upload intervals (200 ms) with no wake-up and nothing
            // written. On a busy machine the last run's tail work can come late, so the
            // daemon gets a few windows to find one; one that polls never has one.
            var (woke, wrote) = (0, 0)
            for _ in 0..<10 {
                let (switchesBefore, writtenBefore) = (switches(), written())
                usleep(1_200_000)
                (woke, wrote) = (switches() - switchesBefore, writtenBefore < 0 ? -1 : written() - writtenBefore)
                if (!countsSwitches || woke == 0) && wrote == 0 { break }
            }
            if countsSwitches { #expect(woke == 0, "woke at rest") }
            #expect(wrote == 0, "wrote at rest")
            // Its own log is spooled: the conditions as first read (the system bus found
            // missing after start among them) are no change to ship, or every start would
            // upload a line of its own an interval later.
            let own = Support.collected(collectedRoot).filter { $0.text.contains("conditions changed") }
            #expect(own.isEmpty, "shipped \(own.map(\.text))")
            child.send(SIGTERM)
            #expect(child.waitForExit() == 0)
        }
    }

    /// After one SIGUSR1 the daemon uploads and suspends; the periodic run due then resumes
    /// it into the background for that run (a background launch) instead of being refused
    /// for the suspension, run after run, with no SIGUSR2 or SIGTERM needed.
    @Test(.startsProcesses) func aPeriodicRunWhileSuspendedResumesTheDaemonIntoTheBackground() async throws {
        try await onOwnThread {
            let folder = TemporaryDirectory("launch")
            defer { folder.remove() }
            let collectedRoot = folder.path + "/collected"
            let (child, client, control) = try startUploader(folder, sink: collectedRoot)
            func collected(_ prefix: String) -> Int {
                Support.collected(collectedRoot).filter { $0.text.hasPrefix(prefix + " ") }.count
            }
            child.send(SIGUSR1)
            #expect(
                Support.waitFor {
                    (try? overtimectl(["status", "--socket", control]).output)?.contains("suspended") == true
                },
                "suspended after the background drain")
            for round in 1...2 {
                try client.send(Support.lines("suspended-\(round)", 1...20))
                #expect(Support.waitFor { collected("suspended-\(round)") == 20 }, "uploaded by a launched run")
            }
            let history = try overtimectl(["history", "log-upload", "--socket", control])
            #expect(!history.output.contains("suspended"), "\(history.output)")
            #expect(!child.standardError.contains { $0.contains("the program is suspended") })
            child.send(SIGTERM)
            #expect(child.waitForExit() == 0)
        }
    }

    /// The address families the shipped unit allows (`RestrictAddressFamilies=`).
    private static func unitAddressFamilies() throws -> [String] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let unit = try String(
            contentsOf: root.appendingPathComponent("Examples/systemd/log-uploader.service"), encoding: .utf8)
        let line = try #require(unit.split(separator: "\n").first { $0.hasPrefix("RestrictAddressFamilies=") })
        return line.dropFirst("RestrictAddressFamilies=".count).split(separator: " ").map(String.init)
    }

    /// A wrapper that runs the daemon in the shipped unit's sandbox as far as it matters
    /// here, with PID 1 not systemd: `/proc` as `ProcSubset=pid` leaves it (a private `/proc`
    /// mounted `subset=pid`: no `/proc/net`) and `socket(2)` refused for every address
    /// family but `families` (a seccomp filter, as `RestrictAddressFamilies=` installs).
    private static func unitSandbox(families: [String]) -> [String] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        return [
            "--mount", "--propagation", "private", "/bin/sh", "-c",
            "mount -t proc -o subset=pid proc /proc && test ! -e /proc/net && exec \"$@\"", "sh",
            root.appendingPathComponent("Sandbox/restrict-address-families").path,
        ] + families + ["--"]
    }

    /// The daemon in a network namespace of its own, at first with no route: lines wait in
    /// the spool and the upload request waits for the network (no run in its history);
    /// once a default route exists the next run delivers them to a collector in the
    /// namespace. In the shipped unit's sandbox (``unitSandbox(families:)``) the route is
    /// asked of the kernel over netlink.
    @Test(.startsProcesses, arguments: [false, true])
    func aNetworkSinkWaitsForADefaultRouteThenUploads(inUnitSandbox: Bool) async throws {
        try await onOwnThread {
            let folder = TemporaryDirectory("scheduled-upload-netns")
            defer { folder.remove() }
            let received = folder.path + "/received"
            let sandbox = inUnitSandbox ? Self.unitSandbox(families: try Self.unitAddressFamilies()) : []
            let (child, client, control) = try startUploader(
                folder, sink: "syslog://127.0.0.1:5514", wrapper: ["/usr/bin/unshare", "--net"] + sandbox)
            try client.send(Support.lines("routed", 1...30))
            usleep(600_000)  // three periods
            let waiting = try overtimectl(["schedule", "--socket", control]).output
            #expect(waiting.contains("requirement 'network'"), "waiting for the network: \(waiting)")
            let before = try overtimectl(["history", "log-upload", "--socket", control]).output
            #expect(!before.contains("succeeded") && !before.contains("failed"), "no run without a route: \(before)")

            func inNamespace(_ command: String) throws -> SpawnedProcess {
                try SpawnedProcess("/usr/bin/nsenter", ["-t", "\(child.pid)", "-n", "/bin/sh", "-c", command])
            }
            // A collector inside the namespace: every byte it receives, appended to a file.
            let collector = try inNamespace(
                "ip link set lo up && exec python3 -c '"
                    + "import socket,sys\n"
                    + "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
                    + "s.bind((\"127.0.0.1\",5514)); s.listen(); print(\"LISTENING\",flush=True)\n"
                    + "out=open(sys.argv[1],\"ab\",0)\n"
                    + "while True:\n c,_=s.accept()\n while (d:=c.recv(65536)): out.write(d)\n' "
                    + received)
            defer {
                collector.send(SIGKILL)
                _ = collector.waitForExit()
            }
            let greeting = String(decoding: collector.outputPipe!.availableData, as: UTF8.self)
            try #require(greeting.hasPrefix("LISTENING"), "the collector did not start: '\(greeting)'")
            let route = try inNamespace(
                "ip link add v0 type veth peer name v1 && ip addr add 10.9.0.2/24 dev v0 && ip link set v1 up"
                    + " && ip link set v0 up && ip route add default via 10.9.0.1")
            #expect(route.waitForExit() == 0)
            #expect(
                Support.waitFor {
                    let bytes = (try? Data(contentsOf: URL(fileURLWithPath: received))) ?? Data()
                    let text = String(decoding: bytes, as: UTF8.self)
                    return (1...30).allSatisfy { text.contains("routed \($0) ") }
                }, "every line delivered once the route exists")
            // Delivered is not yet ended: the run ends after its last write, once the
            // checkpoint is written.
            var after = ""
            #expect(
                Support.waitFor {
                    after = (try? overtimectl(["history", "log-upload", "--socket", control]).output) ?? ""
                    return after.contains("succeeded")
                }, "the run that delivered them ended: \(after)")
            child.send(SIGTERM)
            #expect(child.waitForExit() == 0)
        }
    }

    /// Without `AF_NETLINK` among the unit's families and without `/proc/net`, the network
    /// requirement cannot be told at all: the daemon refuses to start, saying so, rather
    /// than spool until the quota drops lines.
    @Test(.startsProcesses) func aNetworkRequirementThatCannotBeToldStopsTheStartWithStatus78() async throws {
        try await onOwnThread {
            let folder = TemporaryDirectory("scheduled-upload-no-netlink")
            defer { folder.remove() }
            let families = try Self.unitAddressFamilies().filter { $0 != "AF_NETLINK" }
            let child = try RunningChild(
                [
                    "--spool", folder.path + "/spool", "--sink", "syslog://127.0.0.1:5514", "--progress-interval", "0",
                ], executable: "log-uploader",
                wrapper: ["/usr/bin/unshare", "--net"] + Self.unitSandbox(families: families))
            #expect(child.waitForExit(timeout: .seconds(20)) == 78)
            #expect(
                child.standardError.contains { $0.contains("the network requirement cannot be told here") },
                "\(child.standardError)")
        }
    }
}
