import Foundation
import Overtime
import OvertimeLogUploader
import OvertimeSupport
import OvertimeTestSupport
import Testing

/// log-uploader and overtimectl as an operator misuses them: paths that are not ours,
/// clients that hold connections or never read, huge lines and datagrams, repeated
/// signals, a spool left with work.
@Suite("Daemon hardening: sockets, bounds, repeated signals", .onOwnThread(runningAtMost: .minutes(3)), .serialized)
struct DaemonHardeningTests {
    private func daemon(
        _ folder: TemporaryDirectory, _ extra: [String], standardInput: Bool = false, wrapper: [String] = []
    ) throws -> RunningChild {
        try RunningChild(
            ["--spool", folder.path + "/spool", "--sink", folder.path + "/collected", "--progress-interval", "0"]
                + extra, executable: "log-uploader", standardInput: standardInput, wrapper: wrapper)
    }

    /// A daemon with a control and an ingest socket and 4 KiB segments, which has
    /// acknowledged 200 lines starting with `prefix`.
    private func socketDaemon(_ folder: TemporaryDirectory, storing prefix: String, wrapper: [String] = []) throws
        -> (RunningChild, control: String, ingest: String)
    {
        let control = folder.path + "/control.sock"
        let ingest = folder.path + "/ingest.sock"
        let child = try daemon(
            folder, ["--control-socket", control, "--ingest-socket", ingest, "--segment-kb", "4"], wrapper: wrapper)
        UploaderSafetyTests.waitForSocket(ingest)
        UploaderSafetyTests.waitForSocket(control)
        try SpoolIngestClient(path: ingest).send(UploaderSafetyTests.lines(prefix, 1...200))
        return (child, control, ingest)
    }

    private func collected(_ folder: TemporaryDirectory) -> [SpoolRecord] {
        UploaderSafetyTests.collected(folder.path + "/collected")
    }

    /// Up to `count` connected clients of `address` (a connect can fail while the backlog is full).
    private func connections(_ count: Int, to address: UnixSocketAddress) -> [Int32] {
        (0..<count).compactMap { _ in
            let fd = makeUnixSocket(datagram: false)
            if address.withSockAddr({ connect(fd, $0, $1) }) == 0 { return fd }
            close(fd)
            return nil
        }
    }

    private func residentMegabytes(_ pid: Int32) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) / 1024
    }

    /// What stops a start exits with the sysexits status the README gives, says why in one
    /// line, and leaves nothing behind (no `.lock` beside a refused socket path, no control
    /// socket of a start that failed later): all of them exited 1 before.
    @Test(.startsProcesses) func startFailuresExitWithTheirSysexitsStatusAndLeaveNothingBehind() throws {
        let folder = TemporaryDirectory("start-failures")
        defer { folder.remove() }
        let file = folder.path + "/a-file"
        try "x".write(toFile: file, atomically: true, encoding: .utf8)
        let live = try daemon(folder, ["--ingest-socket", folder.path + "/live.sock"])
        defer {
            live.send(SIGKILL)
            _ = live.waitForExit()
        }
        UploaderSafetyTests.waitForSocket(folder.path + "/live.sock")
        let cases: [(arguments: [String], status: Int32)] = [
            (["--spool", file], 73),
            (["--ingest-socket", file], 73),
            (["--ingest-socket", folder.path + "/missing/in.sock"], 73),
            (["--control-socket", folder.path + "/c.sock", "--ingest-socket", folder.path + "/live.sock"], 75),
            (["--ingest-socket", "fd://producers"], 78),
            (["--control-socket", folder.path + "/c2.sock", "--metrics-listen", "8.8.8.8:9100"], 78),
        ]
        for (arguments, expected) in cases {
            let run = TemporaryDirectory("start-failure")
            defer { run.remove() }
            let child = try RunningChild(
                ["--spool", run.path + "/spool", "--sink", run.path + "/out"] + arguments, executable: "log-uploader")
            #expect(child.waitForExit(timeout: .seconds(20)) == expected, "\(arguments): \(child.standardError)")
            #expect(
                child.standardError.filter { $0.hasPrefix("log-uploader:") }.count == 1, "\(child.standardError)")
        }
        let left = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        #expect(left == ["a-file", "live.sock", "live.sock.lock", "spool"], "\(left)")
    }

    /// A process that listens on the ingest socket's path and never accepts (its queue of
    /// connections full): start-up hung in connect() with no message, and the socket was
    /// replaced once that process went. Refused at once, clearly, the socket left alone.
    @Test(.startsProcesses) func aListenerThatNeverAcceptsIsRefusedAtOnce() throws {
        let folder = TemporaryDirectory("deaf-listener")
        defer { folder.remove() }
        let path = folder.path + "/ingest.sock"
        let listener = makeUnixSocket(datagram: false)
        defer { close(listener) }
        let address = try #require(UnixSocketAddress(path))
        #expect(address.withSockAddr { bind(listener, $0, $1) } == 0)
        #expect(listen(listener, 0) == 0)
        // Fill its queue: connect until one would have to wait.
        var queued: [Int32] = []
        defer { for fd in queued { close(fd) } }
        while queued.count < 64 {
            let client = makeUnixSocket(datagram: false)
            _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
            let connected = address.withSockAddr { connect(client, $0, $1) } == 0
            queued.append(client)
            if !connected { break }
        }
        var before = stat()
        lstat(path, &before)
        let child = try daemon(folder, ["--ingest-socket", path])
        let status = child.waitForExit(timeout: .seconds(20))
        if status == nil { child.send(SIGKILL) }
        #expect(status != nil && status != 0, "refused at start, not hung")
        #expect(child.standardError.contains { $0.contains("does not answer") }, "\(child.standardError)")
        var after = stat()
        lstat(path, &after)
        #expect(after.st_ino == before.st_ino, "the listener's socket is left alone")
    }

    @Test(.startsProcesses) func aSocketPathThatIsNotAStaleSocketOfOursIsNeverRemoved() throws {
        let folder = TemporaryDirectory("paths")
        defer { folder.remove() }
        let file = folder.path + "/precious.txt"
        try "someone's data".write(toFile: file, atomically: true, encoding: .utf8)
        let link = folder.path + "/link.sock"
        symlink(file, link)
        for (option, path) in [
            ("--datagram-socket", file), ("--datagram-socket", link), ("--ingest-socket", file),
            ("--control-socket", file),
        ] {
            let child = try daemon(folder, [option, path])
            #expect(child.waitForExit(timeout: .seconds(10)) != 0, "\(option) \(path) refused at start")
            #expect(child.standardError.contains { $0.contains("not replacing it") }, "\(child.standardError)")
        }
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "someone's data")
        var info = stat()
        #expect(lstat(link, &info) == 0 && info.st_mode & S_IFMT == S_IFLNK, "the symlink is still there")

        // A live control socket is not taken over; a stale one is replaced and removed on exit.
        let control = folder.path + "/control.sock"
        let datagrams = folder.path + "/in.sock"
        let first = try daemon(folder, ["--control-socket", control, "--datagram-socket", datagrams])
        UploaderSafetyTests.waitForSocket(control)
        let other = TemporaryDirectory("paths-2")
        defer { other.remove() }
        let second = try daemon(other, ["--control-socket", control])
        #expect(second.waitForExit(timeout: .seconds(10)) != 0)
        #expect(second.standardError.contains { $0.contains("in use") })
        #expect(access(control, F_OK) == 0, "the first daemon's socket is still there")
        first.send(SIGKILL)  // leaves stale sockets behind
        _ = first.waitForExit()
        let third = try daemon(folder, ["--control-socket", control, "--datagram-socket", datagrams])
        let overtimectl = ChildProcess.harnessURL.deletingLastPathComponent().appendingPathComponent("overtimectl").path
        #expect(
            UploaderSafetyTests.waitFor {
                (try? ChildCommand.run(overtimectl, ["status", "--socket", control]).status) == 0
            }, "the stale socket was replaced and answers")
        third.send(SIGTERM)
        #expect(third.waitForExit() == 0)
        #expect(access(control, F_OK) != 0 && access(datagrams, F_OK) != 0, "our sockets are removed on exit")
    }

    @Test func heldConnectionsAndClientsThatNeverReadStayBounded() throws {
        let folder = TemporaryDirectory("bounds")
        defer { folder.remove() }
        let control = folder.path + "/control.sock"
        let child = try daemon(folder, ["--control-socket", control])
        UploaderSafetyTests.waitForSocket(control)
        let address = try #require(UnixSocketAddress(control))
        var held = connections(100, to: address)
        defer { for fd in held { close(fd) } }
        // The 65th and later are told so and closed. (Under load a connect can fail while
        // the backlog is full, and the readiness probe may still hold a place: what counts
        // is that no more than 64 are kept.)
        #expect(held.count > 64)
        usleep(500_000)
        var refused = 0
        for fd in held {
            var buffer = [UInt8](repeating: 0, count: 512)
            let count = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if count > 0, String(decoding: buffer[0..<count], as: UTF8.self).contains("too many connections") {
                refused += 1
            }
        }
        #expect(refused > 0 && held.count - refused <= 64, "\(held.count) held, \(refused) refused")
        // A client that pipelines requests and never reads is cut off; the daemon stays small.
        let greedy = makeUnixSocket(datagram: false)
        defer { close(greedy) }
        for fd in held { close(fd) }
        held = []
        usleep(200_000)
        #expect(address.withSockAddr { connect(greedy, $0, $1) } == 0)
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(greedy, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let requests = [UInt8](String(repeating: "{\"command\":\"status\"}\n", count: 10_000).utf8)
        var disconnected = false
        for _ in 0..<100 {
            guard !disconnected else { break }
            disconnected = requests.withUnsafeBytes { send(greedy, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } < 0
        }
        #expect(disconnected, "a client that never reads is disconnected")
        #expect(residentMegabytes(child.pid) < 100)
        let status = try ChildCommand.run(
            ChildProcess.harnessURL.deletingLastPathComponent().appendingPathComponent("overtimectl").path,
            ["status", "--socket", control])
        #expect(status.status == 0, "still serving: \(status.output)")
        child.send(SIGTERM)
        #expect(child.waitForExit() == 0)
    }

    /// A limit too small for what the daemon holds at rest plus its connections refuses the
    /// start, with the numbers; a soft limit below the hard one is raised to it.
    @Test(.startsProcesses) func theDescriptorLimitIsRaisedAndCheckedAtStart() throws {
        let folder = TemporaryDirectory("nofile")
        defer { folder.remove() }
        let sockets = [
            "--control-socket", folder.path + "/control.sock", "--ingest-socket", folder.path + "/ingest.sock",
        ]
        let starved = try daemon(folder, sockets, wrapper: ["/usr/bin/prlimit", "--nofile=32:32"])
        #expect(starved.waitForExit() == 71)
        let said = starved.standardError.joined(separator: "\n")
        #expect(said.contains("file descriptors") && said.contains("the limit is 32"), "\(said)")

        let raised = try daemon(folder, sockets, wrapper: ["/usr/bin/prlimit", "--nofile=48:4096"])
        UploaderSafetyTests.waitForSocket(folder.path + "/ingest.sock")
        let limits = try String(contentsOfFile: "/proc/\(raised.pid)/limits", encoding: .utf8)
        let line = limits.split(separator: "\n").first { $0.hasPrefix("Max open files") } ?? ""
        #expect(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst(3).first == "4096", "\(line)")
        raised.send(SIGTERM)
        #expect(raised.waitForExit() == 0)
    }

    @Test(.startsProcesses) func connectionsHeldUpToTheDescriptorLimitNeverStopTheDrain() throws {
        let folder = TemporaryDirectory("emfile")
        defer { folder.remove() }
        let (child, control, ingest) = try socketDaemon(
            folder, storing: "held", wrapper: ["/usr/bin/prlimit", "--nofile=96"])
        // Far more connections than the daemon has descriptors, on both sockets, held open.
        var held: [Int32] = []
        defer { for fd in held { close(fd) } }
        for path in [control, ingest] {
            held += connections(100, to: try #require(UnixSocketAddress(path)))
        }
        usleep(300_000)
        child.send(SIGTERM)
        #expect(
            child.waitForExit(timeout: .seconds(30)) == 0,
            "no crash, a clean stop: \(child.standardError.suffix(20).joined(separator: "\n"))")
        #expect(collected(folder).filter { $0.text.hasPrefix("held ") }.count == 200, "the drain ran")
    }

    /// The daemon's limit is cut below the descriptors it holds (`prlimit --pid`), so every
    /// open, socket and accept fails and the reserve cannot be taken back: waiting clients
    /// must not spin the loop or the ingest thread, and a segment sealed meanwhile (its
    /// folder cannot be opened to sync) must stay queued. Given descriptors again, it drains.
    @Test(.startsProcesses) func runningOutOfDescriptorsNeverSpinsAndTheDrainRunsOnceTheyReturn() throws {
        let folder = TemporaryDirectory("exhausted")
        defer { folder.remove() }
        let (child, control, ingest) = try socketDaemon(folder, storing: "kept")
        let limit = try ChildCommand.run("/usr/bin/prlimit", ["--pid", "\(child.pid)", "--nofile=8:"])
        #expect(limit.status == 0, "\(limit.output)")
        defer { _ = try? ChildCommand.run("/usr/bin/prlimit", ["--pid", "\(child.pid)", "--nofile=1024:"]) }
        var waiting: [Int32] = []
        defer { for fd in waiting { close(fd) } }
        for path in [control, ingest] {
            waiting += connections(10, to: try #require(UnixSocketAddress(path)))
        }
        #expect(!waiting.isEmpty)
        usleep(300_000)  // the clients are seen and the first refusals are made
        let before = cpuTicks(child.pid)
        sleep(1)
        let spent = cpuTicks(child.pid) - before
        // A spinning loop or thread spends ~100 ticks a second; an idle daemon a few.
        #expect(spent < 40, "\(spent) ticks of CPU in one second while out of descriptors")
        #expect(try ChildCommand.run("/usr/bin/prlimit", ["--pid", "\(child.pid)", "--nofile=1024:"]).status == 0)
        for fd in waiting { close(fd) }
        waiting = []
        child.send(SIGTERM)
        #expect(
            child.waitForExit(timeout: .seconds(30)) == 0,
            "a clean stop: \(child.standardError.suffix(20).joined(separator: "\n"))")
        #expect(collected(folder).filter { $0.text.hasPrefix("kept ") }.count == 200, "the drain ran")
    }

    /// User plus system CPU time of every thread of `pid`, in clock ticks.
    private func cpuTicks(_ pid: Int32) -> Int {
        let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
        // Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
        guard let end = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        return (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0)
    }

    @Test(.startsProcesses) func hugeLinesAndDatagramsAreCutCountedAndTheNextLineIsIntact() throws {
        let folder = TemporaryDirectory("huge")
        defer { folder.remove() }
        let datagrams = folder.path + "/in.sock"
        let child = try daemon(folder, ["--datagram-socket", datagrams, "--exit-on-eof"], standardInput: true)
        UploaderSafetyTests.waitForSocket(datagrams)
        try child.input!.write(contentsOf: Data(repeating: UInt8(ascii: "a"), count: 20 << 20))  // 20 MiB, no newline
        try child.input!.write(contentsOf: Data("\nthe next line\n".utf8))
        let socket = makeUnixSocket(datagram: true)
        defer { close(socket) }
        let address = try #require(UnixSocketAddress(datagrams))
        var sendBuffer: Int32 = 1 << 20
        setsockopt(socket, SOL_SOCKET, SO_SNDBUF, &sendBuffer, socklen_t(MemoryLayout<Int32>.size))
        let big = [UInt8](repeating: UInt8(ascii: "d"), count: 100_000)
        let sent = address.withSockAddr { pointer, length in
            big.withUnsafeBytes { sendto(socket, $0.baseAddress, $0.count, 0, pointer, length) }
        }
        #expect(sent == 100_000)
        try child.input!.close()
        // How fast is a benchmark's (Benchmarks/run --only huge_line_ingest_mb_per_sec).
        #expect(child.waitForExit(timeout: .seconds(60)) == 0)
        let records = collected(folder)
        #expect(records.contains { $0.text == "the next line" })
        #expect(
            records.contains {
                $0.line.count == SegmentFormat.maximumLineBytes && $0.line.allSatisfy { $0 == UInt8(ascii: "a") }
            })
        #expect(records.contains { $0.line.count == 65_536 && $0.line.first == UInt8(ascii: "d") })
        let progress = try #require(child.standardError.last { $0.hasPrefix("spooled=") })
        #expect(progress.contains("truncated=2"), "\(progress)")
        #expect(child.standardError.contains { $0.contains("a datagram of 100000 bytes was truncated to 65536") })
    }

    @Test func twoSIGTERMsAMillisecondApartAreOneRequestAndTheDrainRuns() throws {
        let folder = TemporaryDirectory("double")
        defer { folder.remove() }
        let socket = folder.path + "/ingest.sock"
        let child = try daemon(folder, ["--ingest-socket", socket, "--budget", "10", "--lead", "2"])
        UploaderSafetyTests.waitForSocket(socket)
        let client = try SpoolIngestClient(path: socket)
        for batch in 0..<10 { try client.send(UploaderSafetyTests.lines("double \(batch)", 1...20)) }
        child.send(SIGTERM)
        usleep(1000)
        child.send(SIGTERM)  // as `timeout` does, signalling the process and its group
        #expect(child.waitForExit(timeout: .seconds(20)) == 0)
        #expect(collected(folder).filter { $0.text.hasPrefix("double ") }.count == 200)
        #expect(!child.standardError.contains { $0.contains("expiring every background task now") })
    }

    /// Thousands of SIGUSR1 in a second do not flood the spool with the daemon's own lines,
    /// and SIGTERMs spread over a second stop it cleanly: its stop messages are not left
    /// behind to upload (status 0, nothing pending).
    @Test func signalFloodsDoNotFloodTheSpoolAndStopMessagesAreNotLeftBehind() throws {
        let folder = TemporaryDirectory("flood")
        defer { folder.remove() }
        let socket = folder.path + "/ingest.sock"
        let child = try daemon(folder, ["--ingest-socket", socket, "--budget", "10", "--lead", "2"])
        UploaderSafetyTests.waitForSocket(socket)
        for _ in 0..<3_000 { child.send(SIGUSR1) }
        usleep(500_000)
        for _ in 0..<10 {
            child.send(SIGTERM)
            usleep(100_000)
        }
        // Done before the last SIGTERMs (under ThreadSanitizer it stops within the second):
        // after its runtime has shut down, a SIGTERM takes its default course.
        let status = child.waitForExit(timeout: .seconds(30))
        #expect(status == 0 || status == SIGTERM, "not 3 (lines left): \(status.map(String.init) ?? "none")")
        let own = collected(folder).filter { $0.text.contains(" overtime") || $0.text.hasPrefix("overtime:") }
        #expect(own.count < 300, "\(own.count) of the daemon's own lines spooled for 3,000 signals")
        let spooled = try Spool(directory: folder.path + "/spool", clock: SystemClock())
        #expect(!spooled.holdsProducerLines(), "nothing of a producer's left behind (its own lines wait)")
    }

    /// A stop during a collector outage with nothing of the producers' pending is at once
    /// and exits 0: the daemon's own lines (its `received SIGTERM`) wait for the next run,
    /// however many restarts the outage sees. (It took the whole budget and exited 3,
    /// "stopped with 1 segments (1 lines)", one more line at each restart.)
    @Test(.startsProcesses) func theDaemonsOwnLinesNeverHoldAStop() throws {
        let folder = TemporaryDirectory("own-lines")
        defer { folder.remove() }
        let down = try ReservedLoopbackPort()  // bound, never listening: every connection refused
        for restart in 1...3 {
            let child = try RunningChild(
                [
                    "--spool", folder.path + "/spool", "--sink", "http://127.0.0.1:\(down.port)/logs",
                    "--budget", "120", "--lead", "5", "--progress-interval", "0", "--upload-interval", "0",
                    "--control-socket", folder.path + "/control.sock",
                ], executable: "log-uploader")
            UploaderSafetyTests.waitForSocket(folder.path + "/control.sock")
            child.send(SIGTERM)
            let status = child.waitForExit(timeout: .seconds(60))
            if status == nil { child.send(SIGKILL) }
            #expect(status == 0, "restart \(restart): \(child.standardError.suffix(3))")
        }
        let spooled = try Spool(directory: folder.path + "/spool", clock: SystemClock())
        #expect(!spooled.holdsProducerLines() && spooled.pendingLines > 0, "its own lines wait")
        withExtendedLifetime(down) {}
    }

    @Test(.startsProcesses) func stoppingWithSegmentsLeftExitsWithStatus3() throws {
        let folder = TemporaryDirectory("left")
        defer { folder.remove() }
        let socket = folder.path + "/ingest.sock"
        // A collector that never answers: the upload starts and is aborted at expiration.
        let silent = try SilentServer()
        let child = try RunningChild(
            [
                "--spool", folder.path + "/spool", "--sink", "http://127.0.0.1:\(silent.port)/logs",
                "--ingest-socket", socket, "--budget", "3", "--lead", "1", "--progress-interval", "0",
            ], executable: "log-uploader")
        UploaderSafetyTests.waitForSocket(socket)
        try SpoolIngestClient(path: socket).send(["kept for the next run"])
        child.send(SIGTERM)
        #expect(child.waitForExit(timeout: .seconds(20)) == 3)
        // Aborted at the expiration; or, on a loaded machine where the drain starts late, not
        // started for want of time: either way the segment stays.
        #expect(
            child.standardError.contains {
                $0.contains("upload aborted: the grant expired") || $0.contains("not starting another upload")
            })
        #expect(child.standardError.contains { $0.contains("not uploaded; the next run uploads them") })
    }

    @Test(.startsProcesses) func aStopForWantOfTimeSaysWhatTheTimeWasAndTheCountsAgree() throws {
        let folder = TemporaryDirectory("for-time")
        defer { folder.remove() }
        // A collector that refuses at once: retries fill the budget until one would not fit.
        let child = try RunningChild(
            [
                "--spool", folder.path + "/spool", "--sink", "http://127.0.0.1:9/logs", "--exit-on-eof", "--budget",
                "3", "--lead", "1", "--segment-kb", "16", "--progress-interval", "0", "--upload-interval", "0",
            ], executable: "log-uploader", standardInput: true)
        child.input?.write(Data((1...3000).map { "line \($0)\n" }.joined().utf8))
        try child.input?.close()
        #expect(child.waitForExit(timeout: .seconds(20)) == 3)
        let notice = child.standardError.first { $0.contains("not starting another upload") } ?? ""
        #expect(notice.contains("before the expiration handlers run"), "\(notice)")
        #expect(notice.contains("lead=1.0 seconds") && notice.contains("before-expiration="), "\(notice)")
        #expect(!notice.contains(" left="), "no unqualified 'left' beside the lead: \(notice)")
        // The progress line's pending lines are the lines the stop message says are left.
        let progress = child.standardError.last { $0.hasPrefix("spooled=") } ?? ""
        let pending = progress.split(separator: " ").first { $0.hasPrefix("pending=") }?.dropFirst(8) ?? ""
        #expect(
            child.standardError.contains { $0.contains("segments (\(pending) lines) not uploaded") },
            "\(progress) / \(child.standardError.suffix(2))")
    }

    @Test(.startsProcesses) func smallCommandLineManners() throws {
        let tools = ChildProcess.harnessURL.deletingLastPathComponent()
        let version = try ChildCommand.run(tools.appendingPathComponent("overtimectl").path, ["--version"])
        #expect(version.status == 0 && version.output.hasPrefix("overtimectl "))
        let help = try ChildCommand.run(tools.appendingPathComponent("tiny-daemon").path, ["--help"])
        #expect(help.status == 0 && help.output.contains("usage: tiny-daemon"))
        let folder = TemporaryDirectory("manners")
        defer { folder.remove() }
        // Parents of the spool are made; a control socket in a missing folder says so.
        let nested = try RunningChild(
            [
                "--spool", folder.path + "/a/b/c/spool", "--sink", folder.path + "/out", "--control-socket",
                folder.path + "/missing/control.sock",
            ], executable: "log-uploader")
        #expect(nested.waitForExit(timeout: .seconds(10)) != 0)
        #expect(nested.standardError.contains { $0.contains("No such file or directory") }, "\(nested.standardError)")
        #expect(FileManager.default.fileExists(atPath: folder.path + "/a/b/c/spool/checkpoint"))
    }

    /// Numbers that are not numbers, or out of range (negative ones too: not "missing"),
    /// and sink URLs that cannot work exit 64 at start naming the option: they crashed
    /// (SIGILL, nothing printed), overflowed into exit 1, or failed only when uploading.
    @Test(
        .startsProcesses,
        arguments: [
            ["--budget", "nan"], ["--budget", "inf"], ["--budget", "1e16"], ["--budget", "-1"], ["--lead", "nan"],
            ["--lead", "30"], ["--upload-interval", "nan"], ["--upload-interval", "0.001"],
            ["--progress-interval", "inf"], ["--progress-interval", "nan"], ["--progress-interval", "0.00005"],
            ["--progress-interval", "1e-6"], ["--progress-interval", "-1"], ["--upload-interval", "-5"],
            ["--quota-mb", "-1"],
            ["--quota-mb", "99999999999999"], ["--segment-kb", "99999999999999999"], ["--segment-kb", "-4"],
            ["--quota-mb", "1", "--segment-kb", "1024"], ["--sink", "http://:80/x"], ["--sink", "http://host:99999/x"],
            ["--sink", "https://bad host/x"], ["--sink", ""], ["--sink", "/dev/null"], ["--sink", "/etc/hostname"],
            ["--sink", "http://user:se/cret@host/x"], ["--sink", "http://user:se#cret@host/x"],
        ])
    func numericOptionsOutOfRangeExit64NamingTheOption(_ option: [String]) throws {
        let folder = TemporaryDirectory("numbers")
        defer { folder.remove() }
        let child = try RunningChild(
            ["--spool", folder.path + "/spool", "--sink", folder.path + "/out"] + option, executable: "log-uploader")
        #expect(child.waitForExit(timeout: .seconds(10)) == 64)
        #expect(child.standardError.contains { $0.contains(option[0]) }, "\(child.standardError)")
        #expect(!child.standardError.contains { $0.contains("Missing value") }, "\(child.standardError)")
        #expect(!child.standardError.contains { $0.contains("cret") }, "a password is never printed")
    }

    /// tiny-daemon refuses what it does not know, and says in one line why it cannot start,
    /// with a sysexits status: it trapped (SIGILL, "Error raised at top level") on a
    /// control socket in a missing folder and ignored unknown options.
    @Test func tinyDaemonRefusesBadArgumentsInOneLine() throws {
        let tiny = ChildProcess.harnessURL.deletingLastPathComponent().appendingPathComponent("tiny-daemon").path
        let missing = try ChildCommand.run(tiny, ["--control-socket", "/nonexistent/d/c.sock"])
        #expect(missing.status == 78, "\(missing.output)")
        #expect(missing.output.contains("tiny-daemon: cannot start:") && !missing.output.contains("Fatal error"))
        let unknown = try ChildCommand.run(tiny, ["--contrl-socket", "x"])
        #expect(unknown.status == 64 && unknown.output.contains("unknown argument '--contrl-socket'"))
        let address = try ChildCommand.run(tiny, ["--metrics-listen", "8.8.8.8:9"])
        #expect(address.status == 78 && address.output.contains("not one of this machine's"), "\(address.output)")
    }

    /// Every interval option states its floor in `--help`.
    @Test func theIntervalsFloorsAreInTheHelp() throws {
        let tools = ChildProcess.harnessURL.deletingLastPathComponent()
        let uploader = try ChildCommand.run(tools.appendingPathComponent("log-uploader").path, ["run", "--help"])
        let flat = uploader.output.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(flat.contains("0 (only at the end), or 0.1 to 86400"), "\(uploader.output)")
        #expect(flat.contains("0 (only on background and stop), or 0.1 to 31536000"), "\(uploader.output)")
        // `log-uploader --help` shows what `log-uploader` runs: run's options too.
        let top = try ChildCommand.run(tools.appendingPathComponent("log-uploader").path, ["--help"])
        #expect(top.status == 0 && top.output.contains("--progress-interval") && top.output.contains("redrive"))
        let report = try ChildCommand.run(tools.appendingPathComponent("periodic-report").path, ["--help"])
        #expect(report.output.contains("1 or more"), "\(report.output)")
        let negative = try ChildCommand.run(tools.appendingPathComponent("periodic-report").path, ["--every", "-5"])
        #expect(negative.status == 64 && negative.output.contains("--every is a whole number"), "\(negative.output)")
    }

    /// `dump` of a folder or an empty file says what is wrong and exits 1.
    @Test(.startsProcesses) func dumpSaysWhatItCannotRead() throws {
        let folder = TemporaryDirectory("dump")
        defer { folder.remove() }
        _ = FileManager.default.createFile(atPath: folder.path + "/empty.seg", contents: Data())
        for (argument, said) in [(folder.path, "a folder"), (folder.path + "/empty.seg", "empty")] {
            let child = try RunningChild(["dump", argument], executable: "log-uploader")
            #expect(child.waitForExit(timeout: .seconds(10)) == 1)
            #expect(child.output.contains { $0.contains(said) }, "\(child.output)")
        }
    }
}
