// A program started as systemd starts a service (NOTIFY_SOCKET set, stdin a pipe) and
// measured from outside: readiness, resident memory, threads, libraries, wake-ups of
// every thread, and the time from SIGTERM to its exit.

import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A child process with a notify socket of its own.
public final class MeasuredProcess {
    /// The child's process ID.
    public let pid: pid_t
    /// Write end of the child's stdin (closed by ``closeInput()``).
    private var input: Int32
    private let notify: Int32
    private let folder: String
    /// Whether `folder` was made for this process alone (removed with it).
    private let ownsFolder: Bool
    private var exited = false
    /// Nanoseconds (monotonic) just before the spawn.
    public let spawnedAt: Int64

    /// Starts `executable` with `arguments` (`@D` in them becomes a fresh folder of the
    /// run) and `NOTIFY_SOCKET` pointing at a socket read here.
    public init(_ executable: String, _ arguments: [String], folder: String? = nil) throws {
        ownsFolder = folder == nil
        let folder = try folder ?? Self.temporaryFolder()
        self.folder = folder
        let socketPath = folder + "/notify.sock"
        unlink(socketPath)
        let notify = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        self.notify = notify
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(socketPath.utf8.prefix(raw.count - 1))
            raw.copyBytes(from: bytes + [0])
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(notify, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard notify >= 0, bound == 0 else { throw ScenarioError("notify socket: \(String(cString: strerror(errno)))") }
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { throw ScenarioError("pipe: \(String(cString: strerror(errno)))") }
        for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        input = pipeEnds[1]
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipeEnds[0], 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, folder + "/stderr", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let argv = ([executable] + arguments.map { $0.replacingOccurrences(of: "@D", with: folder) }).map { strdup($0) }
        defer { for pointer in argv { free(pointer) } }
        var environment = ProcessInfo.processInfo.environment
        environment["NOTIFY_SOCKET"] = socketPath
        let envp = environment.map { strdup("\($0.key)=\($0.value)") }
        defer { for pointer in envp { free(pointer) } }
        var child: pid_t = 0
        spawnedAt = monotonicNanoseconds()
        let spawned = posix_spawn(&child, executable, &actions, nil, argv + [nil], envp + [nil])
        close(pipeEnds[0])
        guard spawned == 0 else { throw ScenarioError("spawn \(executable): \(String(cString: strerror(spawned)))") }
        pid = child
    }

    deinit {
        if !exited {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
        if input >= 0 { close(input) }
        close(notify)
        if ownsFolder { try? FileManager.default.removeItem(atPath: folder) }
    }

    /// Nanoseconds (monotonic) when the child said `READY=1`.
    public func waitForReady(timeout: Double = 30) throws -> Int64 {
        let deadline = monotonicNanoseconds() + Int64(timeout * 1e9)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while monotonicNanoseconds() < deadline {
            var descriptor = pollfd(fd: notify, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 100) > 0 else { continue }
            let count = recv(notify, &buffer, buffer.count, 0)
            let now = monotonicNanoseconds()
            if count > 0, String(decoding: buffer[0..<count], as: UTF8.self).contains("READY=1") { return now }
        }
        throw ScenarioError("no READY=1 within \(timeout) s; stderr: \(standardError.suffix(400))")
    }

    /// Writes `bytes` to the child's stdin.
    public func write(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(input, $0.baseAddress, $0.count) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { throw ScenarioError("write to the child: \(String(cString: strerror(errno)))") }
            offset += written
        }
    }

    /// Closes the child's stdin.
    public func closeInput() {
        if input >= 0 { close(input) }
        input = -1
    }

    /// Sends SIGTERM and waits: nanoseconds from the signal to the exit, and the status.
    public func terminate(timeout: Double = 30) throws -> (nanoseconds: Int64, status: Int32) {
        let sent = monotonicNanoseconds()
        kill(pid, SIGTERM)
        let deadline = sent + Int64(timeout * 1e9)
        var status: Int32 = 0
        while true {
            let reaped = waitpid(pid, &status, WNOHANG)
            if reaped == pid { break }
            if monotonicNanoseconds() > deadline {
                throw ScenarioError("still running \(timeout) s after SIGTERM")
            }
            usleep(50)
        }
        let ended = monotonicNanoseconds()
        exited = true
        return (ended - sent, status)
    }

    /// What the child wrote on stderr so far.
    public var standardError: String {
        (try? String(contentsOfFile: folder + "/stderr", encoding: .utf8)) ?? ""
    }

    /// Resident memory now, in MB (`VmRSS`).
    public var residentMegabytes: Double {
        Double(Self.statusField("/proc/\(pid)/status", "VmRSS:") ?? 0) / 1024
    }

    /// Proportional set size now, in MB (`Pss` of `/proc/PID/smaps_rollup`): each page
    /// shared with other processes (a shared library's) counted by its share.
    public var proportionalMegabytes: Double {
        Double(Self.statusField("/proc/\(pid)/smaps_rollup", "Pss:") ?? 0) / 1024
    }

    /// Anonymous memory now, in MB (`Anonymous` of `/proc/PID/smaps_rollup`): the
    /// process's own heap, stacks and written pages, nothing a file backs.
    public var anonymousMegabytes: Double {
        Double(Self.statusField("/proc/\(pid)/smaps_rollup", "Anonymous:") ?? 0) / 1024
    }

    /// Bytes the process (every thread, those ended too) has caused to be written to
    /// storage so far: `write_bytes` of `/proc/PID/io`.
    public var bytesWritten: Int {
        Self.statusField("/proc/\(pid)/io", "write_bytes:") ?? 0
    }

    /// Threads now.
    public var threads: Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task").count) ?? 0
    }

    /// Shared libraries mapped now.
    public var sharedLibraries: Int {
        // Read to its end: /proc files report size 0, and a read by size stops at a page.
        let maps =
            (try? FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/\(pid)/maps")).readToEnd())
            .flatMap { $0 }.map { String(decoding: $0, as: UTF8.self) } ?? ""
        let paths = maps.split(separator: "\n").compactMap { line -> Substring? in
            guard let path = line.split(separator: " ", omittingEmptySubsequences: true).last, path.hasPrefix("/"),
                path.contains(".so")
            else { return nil }
            return path
        }
        return Set(paths).count
    }

    /// Wake-ups per second over `seconds`, of every thread of the child: voluntary and
    /// involuntary context switches from `/proc/PID/task/*/status`, looked at every 100 ms
    /// so a thread that ends meanwhile still counts what it did. Returns the rate and the
    /// wake-ups by thread name.
    public func wakeupsPerSecond(seconds: Double) -> (rate: Double, byThread: [String: Int]) {
        let pid = self.pid
        func sample() -> [String: (name: String, switches: Int)] { Self.threadSwitches(pid: pid) }
        let first = sample()
        var last = first
        let end = monotonicNanoseconds() + Int64(seconds * 1e9)
        while monotonicNanoseconds() < end {
            usleep(100_000)
            last.merge(sample()) { $1 }
        }
        var byThread: [String: Int] = [:]
        var total = 0
        for (task, now) in last {
            let delta = now.switches - (first[task]?.switches ?? 0)
            total += delta
            if delta > 0 { byThread[now.name, default: 0] += delta }
        }
        return (Double(total) / seconds, byThread)
    }

    /// Every thread of process `pid` by thread ID: its name and its context switches so
    /// far (voluntary and involuntary, from `/proc/PID/task/*/status`).
    public static func threadSwitches(pid: pid_t) -> [String: (name: String, switches: Int)] {
        var result: [String: (String, Int)] = [:]
        for task in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? [] {
            let base = "/proc/\(pid)/task/\(task)"
            guard let name = try? String(contentsOfFile: base + "/comm", encoding: .utf8) else { continue }
            let voluntary = Self.statusField(base + "/status", "voluntary_ctxt_switches:") ?? 0
            let involuntary = Self.statusField(base + "/status", "nonvoluntary_ctxt_switches:") ?? 0
            result[task] = (name.trimmingCharacters(in: .whitespacesAndNewlines), voluntary + involuntary)
        }
        return result
    }

    /// Runs `body` and returns the context switches it took of every thread of this
    /// process but the calling one (which only starts and waits), by thread name.
    public static func switchesOfOtherThreads(during body: () throws -> Void) rethrows -> [String: Int] {
        // This thread's ID: /proc/thread-self links to PID/task/TID.
        let caller =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self"))?
            .split(separator: "/").last.map(String.init) ?? ""
        let before = threadSwitches(pid: getpid())
        try body()
        var byThread: [String: Int] = [:]
        for (task, now) in threadSwitches(pid: getpid()) where task != caller {
            let delta = now.switches - (before[task]?.switches ?? 0)
            if delta > 0 { byThread[now.name, default: 0] += delta }
        }
        return byThread
    }

    private static func statusField(_ path: String, _ field: String) -> Int? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix(field) {
            return line.dropFirst(field.count).split(whereSeparator: { $0 == " " || $0 == "\t" }).first
                .flatMap { Int($0) }
        }
        return nil
    }

    /// A fresh folder under /var/tmp (on disk, as a daemon's state folder is).
    public static func temporaryFolder() throws -> String {
        var template = Array("/var/tmp/overtime-footprint.XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw ScenarioError("mkdtemp: \(String(cString: strerror(errno)))")
        }
        return String(cString: made)
    }
}
