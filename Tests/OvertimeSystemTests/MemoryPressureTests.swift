import Foundation
import Overtime
import OvertimeSupport
import OvertimeTestSupport
import Testing

@testable import OvertimeSystem

#if canImport(Glibc)
    import Glibc
#endif

@Suite(
    "Memory pressure: systemd's protocol through FIFOs, sockets and PSI files", .onOwnThread(runningAtMost: .minutes(3))
)
struct MemoryPressureTests {
    typealias Surroundings = MemoryPressureSource.Surroundings

    private func resolve(_ surroundings: Surroundings) throws(MemoryPressureError) -> MemoryPressureSource? {
        try MemoryPressureSource.resolve(surroundings, threshold: .milliseconds(200), window: .seconds(2))
    }

    @Test func theSourceIsChosenAsSystemdsProtocolSays() throws {
        // The service manager's path and data win; /dev/null turns watching off.
        let trigger = Array("some 150000 1000000\0".utf8)
        let told = try resolve(
            Surroundings(
                watch: "/run/x/memory.pressure", write: Base64.encode(trigger),
                cgroupPressureFile: "/cg/memory.pressure",
                systemPressureFileExists: true))
        #expect(told == MemoryPressureSource(path: "/run/x/memory.pressure", written: trigger, origin: .serviceManager))
        #expect(
            try resolve(
                Surroundings(watch: "/run/x/fifo", write: nil, cgroupPressureFile: nil, systemPressureFileExists: true))
                == MemoryPressureSource(path: "/run/x/fifo", written: [], origin: .serviceManager))
        #expect(
            try resolve(
                Surroundings(
                    watch: "/dev/null", write: nil, cgroupPressureFile: "/cg/memory.pressure",
                    systemPressureFileExists: true))
                == nil)
        // Without it: the process's cgroup, then the system, each with the configured trigger.
        let own = Array("some 200000 2000000".utf8) + [0]
        #expect(
            try resolve(
                Surroundings(
                    watch: nil, write: nil, cgroupPressureFile: "/cg/memory.pressure", systemPressureFileExists: true))
                == MemoryPressureSource(path: "/cg/memory.pressure", written: own, origin: .cgroup))
        #expect(
            try resolve(Surroundings(watch: nil, write: nil, cgroupPressureFile: nil, systemPressureFileExists: true))
                == MemoryPressureSource(path: "/proc/pressure/memory", written: own, origin: .system))
        #expect(throws: MemoryPressureError.self) {
            try resolve(Surroundings(watch: nil, write: nil, cgroupPressureFile: nil, systemPressureFileExists: false))
        }
        #expect(
            "\(MemoryPressureSource(path: "/proc/pressure/memory", written: own, origin: .system))"
                == "/proc/pressure/memory (system)")
    }

    @Test func malformedEnvironmentAndConfigurationAreClearErrors() {
        #expect(
            throws: MemoryPressureError.invalidEnvironment(
                variable: "MEMORY_PRESSURE_WATCH",
                reason: "must be an absolute path or /dev/null, got 'memory.pressure'")
        ) {
            try resolve(
                Surroundings(
                    watch: "memory.pressure", write: nil, cgroupPressureFile: nil, systemPressureFileExists: true))
        }
        #expect(
            throws: MemoryPressureError.invalidEnvironment(variable: "MEMORY_PRESSURE_WRITE", reason: "is not base64")
        ) {
            try resolve(
                Surroundings(watch: "/x", write: "c29tZQ=x", cgroupPressureFile: nil, systemPressureFileExists: true))
        }
        var configuration = MemoryPressureMonitor.Configuration()
        configuration.window = .seconds(20)
        #expect(throws: MemoryPressureError.self) { try configuration.validate() }
        configuration = .init()
        configuration.threshold = .seconds(3)
        #expect(throws: MemoryPressureError.self) { try configuration.validate() }
        #expect(throws: Never.self) { try MemoryPressureMonitor.Configuration().validate() }
    }

    /// A FIFO: what the monitor finds queued at start is not pressure; each write is one
    /// report and one warning; a teller that closes its end makes no hang-up that spins.
    @Test func aFIFOReportIsAMemoryWarningAndAWriterThatLeavesNeverSpins() async throws {
        let folder = TemporaryDirectory("pressure")
        defer { folder.remove() }
        let fifo = folder.path + "/pressure.fifo"
        try #require(mkfifo(fifo, 0o600) == 0)
        let writer = open(fifo, O_RDWR | O_NONBLOCK | O_CLOEXEC)
        try #require(writer >= 0)
        _ = write(writer, "old", 3)  // queued before the monitor starts
        let env = try VirtualRuntime { $0.memoryWarningInterval = .zero }
        let warnings = Recorder<LifecycleEvent>()
        let token = env.runtime.observe { if $0 == .didReceiveMemoryWarning { warnings.append($0) } }
        let monitor = MemoryPressureMonitor(runtime: env.runtime, logger: env.logs.logger)
        let source = try monitor.start(
            in: Surroundings(watch: fifo, write: nil, cgroupPressureFile: nil, systemPressureFileExists: true))
        #expect(source?.origin == .serviceManager)
        env.waitForQueuedRequests()
        #expect(monitor.reports == 0)
        _ = write(writer, "p", 1)
        #expect(try await eventually { warnings.count == 1 })
        close(writer)  // the teller leaves
        let other = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
        _ = write(other, "q", 1)
        close(other)
        #expect(try await eventually { warnings.count == 2 })
        try await Task.sleep(for: .milliseconds(300))
        #expect(monitor.reports == 2, "a closed writer woke the monitor again")
        monitor.stop()
        monitor.stop()
        #expect(monitor.source == nil)
        // Started again after a stop: a new watch of the same FIFO.
        let surroundings = Surroundings(
            watch: fifo, write: nil, cgroupPressureFile: nil, systemPressureFileExists: true)
        #expect(try monitor.start(in: surroundings)?.path == fifo)
        #expect(try monitor.start(in: surroundings)?.path == fifo)  // while watching: nothing more
        env.waitForQueuedRequests()
        let again = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
        _ = write(again, "r", 1)
        close(again)
        #expect(try await eventually { warnings.count == 3 })
        try await Task.sleep(for: .milliseconds(200))
        #expect(monitor.reports == 3, "one watch per start")
        withExtendedLifetime(token) {}
        env.shutDown()
        #expect(env.runtime.loopClosedCleanly == true)
    }

    /// A Unix stream socket: the monitor connects, writes `$MEMORY_PRESSURE_WRITE`, and
    /// each message is a report; the socket closed by the other end stops the watch,
    /// said in the log, with no busy loop.
    @Test func aUnixSocketGetsTheWriteDataAndItsMessagesAreWarnings() async throws {
        let folder = TemporaryDirectory("pressure")
        defer { folder.remove() }
        let path = folder.path + "/pressure.sock"
        let listener = makeUnixSocket(datagram: false)
        let address = try #require(UnixSocketAddress(path))
        try #require(address.withSockAddr { bind(listener, $0, $1) } == 0)
        try #require(listen(listener, 4) == 0)
        defer { close(listener) }
        let env = try VirtualRuntime { $0.memoryWarningInterval = .zero }
        let warnings = Recorder<LifecycleEvent>()
        let token = env.runtime.observe { if $0 == .didReceiveMemoryWarning { warnings.append($0) } }
        let monitor = MemoryPressureMonitor(runtime: env.runtime, logger: env.logs.logger)
        let data: [UInt8] = Array("some 100000 1000000".utf8) + [0, 255]  // binary, as the protocol allows
        try monitor.start(
            in: Surroundings(
                watch: path, write: Base64.encode(data), cgroupPressureFile: nil, systemPressureFileExists: true))
        let peer = accept(listener, nil, nil)
        try #require(peer >= 0)
        var received = [UInt8](repeating: 0, count: 64)
        let count = received.withUnsafeMutableBytes { recv(peer, $0.baseAddress, $0.count, 0) }
        #expect(Array(received.prefix(max(count, 0))) == data)
        _ = send(peer, "xx", 2, Int32(MSG_NOSIGNAL))
        #expect(try await eventually { warnings.count == 1 })
        close(peer)
        #expect(try await eventually { env.logs.entries.all.contains { $0.message.contains("no longer watched") } })
        try await Task.sleep(for: .milliseconds(200))
        #expect(monitor.reports == 1)
        withExtendedLifetime(token) {}
        env.shutDown()
        #expect(env.runtime.loopClosedCleanly == true)
    }

    /// A path to some other file is refused before anything is written into it; a path
    /// that does not exist, and a trigger the kernel refuses, are clear errors.
    @Test func aPlainFileIsRefusedAndNeverWrittenInto() throws {
        let folder = TemporaryDirectory("pressure")
        defer { folder.remove() }
        let file = folder.path + "/notes.txt"
        try Data("keep me\n".utf8).write(to: URL(fileURLWithPath: file))
        let env = try VirtualRuntime()
        defer { env.shutDown() }
        let monitor = MemoryPressureMonitor(runtime: env.runtime, logger: env.logs.logger)
        let trigger = Base64.encode(Array("some 200000 2000000".utf8))
        #expect(throws: MemoryPressureError.self) {
            try monitor.start(
                in: Surroundings(watch: file, write: trigger, cgroupPressureFile: nil, systemPressureFileExists: true))
        }
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "keep me\n")
        #expect(throws: MemoryPressureError.cannotWatch(path: folder.path + "/none", operation: "stat", errno: ENOENT))
        {
            try monitor.start(
                in: Surroundings(
                    watch: folder.path + "/none", write: nil, cgroupPressureFile: nil, systemPressureFileExists: true))
        }
        #expect(monitor.source == nil)
    }

    /// The kernel's own file: the default trigger is taken; one it refuses (a 20 s window)
    /// is a clear error.
    @Test(
        .enabled(
            if: access("/proc/pressure/memory", W_OK) == 0,
            "no writable /proc/pressure/memory (a kernel without PSI, or not privileged)"))
    func theSystemsPressureFileTakesTheTriggerAndRefusesABadOne() throws {
        let env = try VirtualRuntime()
        let monitor = MemoryPressureMonitor(runtime: env.runtime, logger: env.logs.logger)
        let source = try monitor.start(
            in: Surroundings(watch: nil, write: nil, cgroupPressureFile: nil, systemPressureFileExists: true))
        #expect(source?.path == "/proc/pressure/memory")
        #expect(source?.written == Array("some 200000 2000000".utf8) + [0])
        let refused = MemoryPressureMonitor(runtime: env.runtime, logger: env.logs.logger)
        #expect(
            throws: MemoryPressureError.cannotWatch(
                path: "/proc/pressure/memory", operation: "write the trigger", errno: EINVAL)
        ) {
            try refused.start(
                in: Surroundings(
                    watch: "/proc/pressure/memory", write: Base64.encode(Array("some 1000 20000000".utf8) + [0]),
                    cgroupPressureFile: nil, systemPressureFileExists: true))
        }
        env.shutDown()
        #expect(env.runtime.loopClosedCleanly == true)
    }

    /// A PSI trigger's last close waits for an RCU grace period (5-20 ms): an io_uring ring
    /// holds the trigger's file while it is watched, so that the descriptor's close is not the
    /// last and the ring's leaves it to a kernel worker; both close with the source.
    @Test(
        .enabled(
            if: access("/proc/pressure/memory", W_OK) == 0
                && (try? String(contentsOfFile: "/proc/sys/kernel/io_uring_disabled", encoding: .utf8))?
                    .hasPrefix("0") == true,
            "no writable /proc/pressure/memory, or io_uring turned off"))
    func aTriggersFileIsHeldByARingAndBothCloseWithTheSource() throws {
        func target(_ descriptor: Int32) -> String? {
            try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(descriptor)")
        }
        let opened = try OpenedPressureSource.opening(
            MemoryPressureSource(
                path: "/proc/pressure/memory", written: Array("some 200000 2000000".utf8) + [0], origin: .system))
        #expect(target(opened.descriptor) == "/proc/pressure/memory")
        #expect(opened.holder >= 0)
        #expect(target(opened.holder) == "anon_inode:[io_uring]")
        opened.closeDescriptors()
        // Closed: gone, or (another test's descriptor, made since) no longer these files.
        #expect(target(opened.descriptor) != "/proc/pressure/memory")
        #expect(target(opened.holder) != "anon_inode:[io_uring]")
        // A FIFO's or a socket's close does not wait: nothing holds them.
        let fifo = TemporaryDirectory("pressure-fifo")
        defer { fifo.remove() }
        #expect(mkfifo(fifo.path + "/pressure", 0o600) == 0)
        let plain = try OpenedPressureSource.opening(
            MemoryPressureSource(path: fifo.path + "/pressure", written: [], origin: .serviceManager))
        #expect(plain.holder == -1)
        plain.closeDescriptors()
    }

    /// The root of the unified hierarchy (where every process of a hybrid machine is, this
    /// project's CI machine among them): its `memory.pressure` tells the system's figures,
    /// but its triggers share one wait queue, and the kernel wakes every process polling it
    /// whenever any trigger on it is closed — other daemons restarting woke an idle one many
    /// times a minute. There the monitor takes `/proc/pressure/memory`, whose triggers each
    /// have their own: twenty triggers opened and closed by another process do not wake
    /// tiny-daemon's loop thread.
    @Test(
        .enabled(
            if: UnifiedRoot.pressureFile != nil && access("/proc/pressure/memory", W_OK) == 0,
            "the process is not at the root of a cgroup v2 hierarchy, or PSI cannot be written"))
    func triggersOtherProcessesCloseDoNotWakeAnIdleDaemon() throws {
        #expect(MemoryPressureMonitor.ownCgroupPressureFile() == nil, "the root's file is not taken")
        let folder = TemporaryDirectory("psi-wakeups")
        defer { folder.remove() }
        let socket = folder.path + "/control.sock"
        let daemon = try RunningChild(["--control-socket", socket], executable: "tiny-daemon", standardInput: true)
        defer {
            daemon.send(SIGKILL)
            _ = daemon.waitForExit()
        }
        // Watching once its descriptor is open (the monitor starts after the control socket).
        var files: [String] = []
        for _ in 0..<4000 {
            guard !files.contains(where: { $0.hasSuffix("=/proc/pressure/memory") }) else { break }
            files = (try? descriptorTargets(of: daemon.pid)) ?? []
            usleep(5000)
        }
        #expect(files.contains { $0.hasSuffix("=/proc/pressure/memory") }, "\(files)")
        // tiny-daemon runs the loop on its main thread (`runtime.run()`).
        let loop = "/proc/\(daemon.pid)/task/\(daemon.pid)"
        let before = try #require(UnifiedRoot.voluntarySwitches(loop))
        let file = try #require(UnifiedRoot.pressureFile)
        for _ in 0..<20 {
            let descriptor = open(file, O_RDWR | O_CLOEXEC)
            #expect(descriptor >= 0)
            let trigger = Array("some 150000 2000000".utf8) + [0]
            #expect(write(descriptor, trigger, trigger.count) == trigger.count)
            close(descriptor)
        }
        let after = try #require(UnifiedRoot.voluntarySwitches(loop))
        // Before: one wake-up per trigger closed (20); the daemon at rest has none of its own.
        #expect(after - before < 5, "the loop thread woke \(after - before) times")
    }

    /// Real memory stalls: a child process in a cgroup v2 of its own with `memory.high`
    /// far below what it touches, watched through that cgroup's `memory.pressure`. Needs
    /// the cgroup v2 memory controller; where memory is on cgroup v1 (this project's CI
    /// machine: the unified hierarchy has no controllers) it is skipped, saying so.
    @Test(
        .startsProcesses,
        .enabled(if: CgroupWithMemory.parent != nil, "no cgroup v2 memory controller to put memory.high on"))
    func realMemoryStallsInACgroupWithMemoryHighAreAWarning() async throws {
        let cgroup = try #require(CgroupWithMemory(name: "overtime-psi-\(getpid())"))
        defer { cgroup.remove() }
        try cgroup.write("memory.high", "\(16 << 20)")
        let folder = TemporaryDirectory("pressure")
        defer { folder.remove() }
        let env = try VirtualRuntime { $0.memoryWarningInterval = .zero }
        let warnings = Recorder<LifecycleEvent>()
        let token = env.runtime.observe { if $0 == .didReceiveMemoryWarning { warnings.append($0) } }
        var configuration = MemoryPressureMonitor.Configuration()
        configuration.threshold = .milliseconds(50)
        let monitor = MemoryPressureMonitor(runtime: env.runtime, configuration: configuration, logger: env.logs.logger)
        let source = try monitor.start(
            in: Surroundings(
                watch: nil, write: nil, cgroupPressureFile: cgroup.path + "/memory.pressure",
                systemPressureFileExists: true))
        #expect(source?.origin == .cgroup)
        // Touches 256 MiB of anonymous memory again and again inside the cgroup: the
        // kernel throttles it at memory.high and reclaims, and those are memory stalls.
        let script =
            "echo $$ > \(cgroup.path)/cgroup.procs; exec python3 -c 'b=bytearray(256<<20)\nfor r in range(50):\n  for i in range(0,len(b),4096): b[i]=r&255'"
        let child = try SpawnedProcess("/bin/sh", ["-c", script], standardOutput: .discard, standardError: .discard)
        defer {
            child.send(SIGKILL)
            _ = child.waitForExit()
        }
        #expect(try await eventually(.seconds(60)) { warnings.count >= 1 }, "no warning from real memory stalls")
        withExtendedLifetime(token) {}
        env.shutDown()
    }
}

/// Where a process's cgroup v2 keeps its `memory.pressure`, read from `/proc/self/cgroup`
/// and `/proc/self/mountinfo` as machines write them.
@Suite struct CgroupPressureFileTests {
    private static let unified = """
        22 1 0:21 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate
        23 22 0:22 / /proc rw,nosuid - proc proc rw

        """
    private static let hybrid = """
        25 1 0:23 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
        26 25 0:24 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw
        27 25 0:25 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory

        """

    private func file(_ cgroup: String, _ mountinfo: String?) -> (file: String?, mountsRead: Bool) {
        var read = false
        let file = MemoryPressureMonitor.cgroupPressureFile(cgroup: Array(cgroup.utf8)) {
            read = true
            return mountinfo.map { Array($0.utf8) }
        }
        return (file, read)
    }

    @Test func aServiceBelowTheRootHasItsOwnFile() {
        #expect(
            file("0::/system.slice/log-uploader.service\n", Self.unified).file
                == "/sys/fs/cgroup/system.slice/log-uploader.service/memory.pressure")
        #expect(
            file("1:memory:/x\n0::/user.slice/a b\n", Self.hybrid).file
                == "/sys/fs/cgroup/unified/user.slice/a b/memory.pressure", "hybrid: the unified mount")
        #expect(file("0::/x\n", "/ / rw - cgroup2 cgroup2 rw\n").file == nil, "no six fields before the separator")
        #expect(file("0::/x", "1 0 0:1 / / rw - cgroup2 cgroup2 rw").file == "/x/memory.pressure", "mounted at /")
    }

    @Test func theRootNoCgroupV2OrNoMountHasNone() {
        let root = file("4:memory:/x\n0::/\n", Self.hybrid)
        #expect(root.file == nil && !root.mountsRead, "the root: mountinfo not read")
        #expect(file("4:memory:/x\n1:cpu:/\n", Self.hybrid).file == nil, "cgroup v1 only")
        #expect(file("0::\n", Self.unified).file == nil)
        #expect(
            file("0::/x\n", "27 25 0:25 / /sys/fs/cgroup/memory rw - cgroup cgroup rw\n").file == nil, "no v2 mount")
        #expect(file("0::/x\n", nil).file == nil, "mountinfo unreadable")
        #expect(file("", Self.unified).file == nil)
    }
}

/// A child cgroup of the process's cgroup v2 with the memory controller enabled.
private struct CgroupWithMemory {
    let path: String

    /// The process's cgroup v2 folder, when its parent offers the memory controller.
    static var parent: String? {
        guard let pressure = MemoryPressureMonitor.ownCgroupPressureFile() else { return nil }
        let folder = String(pressure.dropLast("/memory.pressure".count))
        guard case .success(let controllers) = readWholeFile(folder + "/cgroup.controllers"),
            String(decoding: controllers, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" })
                .contains("memory"), access(folder, W_OK) == 0
        else { return nil }
        return folder
    }

    init?(name: String) {
        guard let parent = Self.parent else { return nil }
        path = parent + "/" + name
        guard mkdir(path, 0o755) == 0 || errno == EEXIST else { return nil }
    }

    func write(_ file: String, _ value: String) throws {
        try Data(value.utf8).write(to: URL(fileURLWithPath: path + "/" + file))
    }

    func remove() { rmdir(path) }
}

/// The unified cgroup hierarchy's root, when this process is in it.
private enum UnifiedRoot {
    /// The root's `memory.pressure`, when `/proc/self/cgroup` says the process is at the root.
    static let pressureFile: String? = {
        guard let cgroups = try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8),
            cgroups.split(separator: "\n").contains("0::/")
        else { return nil }
        return ["/sys/fs/cgroup/unified/memory.pressure", "/sys/fs/cgroup/memory.pressure"].first {
            access($0, F_OK) == 0
        }
    }()

    /// How often the thread at `task` gave up the CPU to wait.
    static func voluntarySwitches(_ task: String) -> Int? {
        guard let status = try? String(contentsOfFile: task + "/status", encoding: .utf8) else { return nil }
        return status.split(separator: "\n").first { $0.hasPrefix("voluntary_ctxt_switches:") }
            .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) }
    }
}
