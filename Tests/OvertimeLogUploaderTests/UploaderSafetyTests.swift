import Foundation
import Overtime
import OvertimeLogUploader
import OvertimeSupport
import OvertimeTestSupport
import Synchronization
import Testing

/// The log-uploader daemon under the faults an operator meets: a spool that fills its
/// file system, collectors that refuse for a while, termination during a long backoff,
/// lines still in a pipe at SIGTERM.
@Suite(
    "log-uploader under faults, against real file systems and servers", .onOwnThread(runningAtMost: .minutes(3)),
    .serialized)
struct UploaderSafetyTests {
    /// Every record stored under `root` (a directory sink's folder, or nginx's `logs/`).
    static func collected(_ root: String) -> [SpoolRecord] {
        guard let enumerator = FileManager.default.enumerator(atPath: root) else { return [] }
        return enumerator.compactMap { $0 as? String }.filter { $0.hasSuffix(".log") }.sorted().flatMap { file in
            SegmentFormat.parse(Array((try? Data(contentsOf: URL(fileURLWithPath: root + "/" + file))) ?? Data()))
                .records
        }
    }

    static func waitFor(_ timeout: Duration = .seconds(20), _ condition: () -> Bool) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if condition() { return true }
            usleep(10_000)
        }
        return condition()
    }

    /// Waits until something answers on the socket at `path` (a stream or datagram socket):
    /// the file exists from `bind` on, a moment before `listen`.
    static func waitForSocket(_ path: String) {
        _ = waitFor {
            guard let address = UnixSocketAddress(path) else { return false }
            return [false, true].contains { datagram in
                let probe = makeUnixSocket(datagram: datagram)
                defer { close(probe) }
                return address.withSockAddr { connect(probe, $0, $1) } == 0
            }
        }
    }

    static func lines(_ prefix: String, _ range: ClosedRange<Int>) -> [String] {
        range.map { "\(prefix) \($0) " + String(repeating: "x", count: 150) }
    }

    @Test(.startsProcesses) func aSpoolThatFillsItsFileSystemDrainsItselfAndAcceptsLinesAgain() throws {
        let folder = TemporaryDirectory("full-disk")
        defer { folder.remove() }
        let mountPoint = folder.path + "/small"
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        let mount = try ChildCommand.run("/bin/mount", ["-t", "tmpfs", "-o", "size=2m", "tmpfs", mountPoint])
        guard mount.status == 0 else {
            print("SKIPPED: cannot mount a tmpfs here (needs root): \(mount.output)")
            return
        }
        defer { _ = try? ChildCommand.run("/bin/umount", ["-l", mountPoint]) }
        let socket = folder.path + "/ingest.sock"
        let collectedRoot = folder.path + "/collected"
        let child = try RunningChild(
            [
                "--spool", mountPoint + "/spool", "--sink", collectedRoot, "--ingest-socket", socket,
                "--segment-kb", "64", "--progress-interval", "0", "--budget", "20", "--lead", "2",
            ], executable: "log-uploader")
        Self.waitForSocket(socket)
        let client = try SpoolIngestClient(path: socket)
        var acknowledged: [ClosedRange<UInt64>] = []
        var refusal: String?
        for batch in 0..<400 where refusal == nil {
            do {
                if let range = try client.send(Self.lines("fill \(batch)", 1...50)) { acknowledged.append(range) }
            } catch {
                refusal = "\(error)"
            }
        }
        let full = try #require(refusal, "the 2 MiB file system never filled")
        #expect(full.contains("No space left on device"), "a clear error: \(full)")
        // Uploading acknowledges (the checkpoint written in place needs no free block) and frees space.
        child.send(SIGUSR1)
        var accepted: ClosedRange<UInt64>?
        #expect(
            Self.waitFor {
                accepted = try? client.send(Self.lines("after", 1...10))
                return accepted != nil
            }, "the spool accepts lines again once its segments are uploaded")
        child.send(SIGTERM)
        #expect(child.waitForExit(timeout: .seconds(30)) == 0)
        let stored = Set(Self.collected(collectedRoot).map(\.sequence))
        let lost = acknowledged.flatMap { Array($0) }.filter { !stored.contains($0) }
        #expect(lost.isEmpty, "every acknowledged line is collected: \(lost.count) missing")
        #expect(acknowledged.count > 10)
    }

    /// A foreground drain met `503` with `Retry-After: 20`; the stop comes with a 6 s
    /// budget. The collector's wait ends past the last moment an upload fits, so the stop
    /// does not sit out its budget: it exits at once with every line kept, and the next
    /// run uploads them all, exactly once.
    @Test(.startsProcesses) func terminationDuringALongRetryAfterStopsAtOnceAndTheNextRunUploads() throws {
        let nginx = try NginxServer()
        let folder = TemporaryDirectory("retry-after")
        defer { folder.remove() }
        nginx.setFlaky(503)
        let socket = folder.path + "/ingest.sock"
        let child = try RunningChild(
            [
                "--spool", folder.path + "/spool", "--sink", nginx.flakyURL, "--ingest-socket", socket,
                "--segment-kb", "4", "--upload-interval", "0.5", "--budget", "6", "--lead", "1",
                "--progress-interval", "0",
            ], executable: "log-uploader")
        Self.waitForSocket(socket)
        let client = try SpoolIngestClient(path: socket)
        // Less than a segment first: the drain that meets the 503 has this one upload in flight,
        // so when the collector is well again no upload begun before its answer is still on its
        // way. (The uploader promises that none *starts* before the time named and lets those in
        // flight end; with every batch sent first, four would be in flight, and one could reach
        // nginx after it was well again.)
        try client.send(Self.lines("retry 0", 1...15))
        // A periodic drain meets 503 + Retry-After: 20 and waits it out.
        #expect(
            Self.waitFor(.seconds(90)) {
                child.standardError.contains { $0.contains("upload failed") && $0.contains("503") }
            }, "no 503 met: \(child.standardError.suffix(5))")
        nginx.setFlaky(nil)
        try client.send(Self.lines("retry 0", 16...30))
        for batch in 1..<8 { try client.send(Self.lines("retry \(batch)", 1...30)) }
        let started = ContinuousClock.now
        child.send(SIGTERM)
        #expect(child.waitForExit(timeout: .seconds(15)) == 3, "stopped with segments kept")
        // Sitting out the budget would take its 6 s.
        #expect(ContinuousClock.now - started < .seconds(5), "the stop waited for nothing")
        let stored = { Self.collected(nginx.dataPath + "/logs").filter { $0.text.hasPrefix("retry ") } }
        #expect(stored().isEmpty, "no upload before the time the collector named")
        #expect(child.standardError.contains { $0.contains("Retry-After") })

        let next = try RunningChild(
            [
                "--spool", folder.path + "/spool", "--sink", nginx.flakyURL, "--segment-kb", "4", "--budget", "6",
                "--lead", "1", "--progress-interval", "0",
            ], executable: "log-uploader")
        usleep(300_000)
        next.send(SIGTERM)
        #expect(next.waitForExit(timeout: .seconds(15)) == 0)
        let texts = stored().map(\.text)
        #expect(texts.count == 8 * 30 && Set(texts).count == 8 * 30, "every line once, in the next run")
    }

    @Test(.startsProcesses) func aBrief404DeadLettersNothingByDefaultAndRedriveResendsWhatAStricterSetRefused() throws {
        let nginx = try NginxServer()
        let folder = TemporaryDirectory("redrive")
        defer { folder.remove() }
        let socket = folder.path + "/ingest.sock"
        let control = folder.path + "/control.sock"
        // Default statuses: a 404 is retried, so a brief one loses nothing and dead-letters nothing.
        nginx.setFlaky(404)
        var child = try RunningChild(
            [
                "--spool", folder.path + "/spool", "--sink", nginx.flakyURL, "--ingest-socket", socket,
                "--segment-kb", "4", "--budget", "20", "--lead", "2", "--progress-interval", "0",
            ], executable: "log-uploader")
        Self.waitForSocket(socket)
        var client = try SpoolIngestClient(path: socket)
        for batch in 0..<5 { try client.send(Self.lines("brief \(batch)", 1...30)) }
        child.send(SIGUSR1)
        usleep(1_500_000)
        nginx.setFlaky(nil)
        child.send(SIGTERM)
        #expect(child.waitForExit(timeout: .seconds(30)) == 0)
        #expect(Self.collected(nginx.dataPath + "/logs").filter { $0.text.hasPrefix("brief ") }.count == 150)
        let progress = try #require(child.standardError.last { $0.hasPrefix("spooled=") })
        #expect(progress.contains("dead-lettered=0"))

        // With 404 made permanent, the same outage dead-letters; redrive sends them again.
        nginx.setFlaky(404)
        child = try RunningChild(
            [
                "--spool", folder.path + "/spool", "--sink", nginx.flakyURL, "--ingest-socket", socket,
                "--control-socket", control, "--permanent-statuses", "404", "--segment-kb", "4", "--budget", "20",
                "--lead", "2", "--progress-interval", "0",
            ], executable: "log-uploader")
        Self.waitForSocket(control)
        Self.waitForSocket(socket)  // made after the control socket, which the runtime makes
        client = try SpoolIngestClient(path: socket)
        for batch in 0..<5 { try client.send(Self.lines("refused \(batch)", 1...30)) }
        child.send(SIGUSR1)
        #expect(Self.waitFor { folder.files(in: "spool/dead-letter").count >= 5 })
        nginx.setFlaky(nil)
        child.send(SIGUSR2)  // foreground: the redrive itself starts the upload
        let redrive = try ChildCommand.run(
            ChildProcess.harnessURL.deletingLastPathComponent().appendingPathComponent("overtimectl").path,
            ["call", "redrive", "--socket", control])
        #expect(redrive.status == 0, "\(redrive.output)")
        #expect(redrive.output.contains("queued for upload"))
        #expect(
            Self.waitFor {
                Self.collected(nginx.dataPath + "/logs").filter { $0.text.hasPrefix("refused ") }.count == 150
            })
        child.send(SIGTERM)
        #expect(child.waitForExit(timeout: .seconds(30)) == 0)
        #expect(folder.files(in: "spool/dead-letter").isEmpty)
    }

    /// log-uploader reading its stdin (a pipe the test writes) into `folder`, uploading to
    /// a folder sink; returned once ready (its signals handled: a SIGTERM before that ends
    /// it as any program's would), with the notify socket it reports to (keep it while the
    /// daemon runs).
    static func stdinDaemon(_ folder: TemporaryDirectory) throws -> (RunningChild, FakeSystemd) {
        let systemd = try FakeSystemd()
        let child = try RunningChild(
            [
                "--spool", folder.path + "/spool", "--sink", folder.path + "/collected", "--budget", "10",
                "--lead", "2", "--progress-interval", "0",
            ], environment: ["NOTIFY_SOCKET": systemd.path], executable: "log-uploader", standardInput: true)
        try #require(systemd.waitFor { $0.contains("READY=1") }, "never ready: \(child.standardError)")
        return (child, systemd)
    }

    @Test(.startsProcesses) func linesAlreadyInTheStdinPipeAtSIGTERMAreUploadedBeforeExit() throws {
        let folder = TemporaryDirectory("stdin")
        defer { folder.remove() }
        let (child, systemd) = try Self.stdinDaemon(folder)
        defer { withExtendedLifetime(systemd) {} }
        // More than one read's worth, written at once, then SIGTERM before the daemon read it all.
        let text = (1...3000).map { "piped \($0)\n" }.joined()
        try child.input!.write(contentsOf: Data(text.utf8))
        child.send(SIGTERM)
        #expect(child.waitForExit(timeout: .seconds(20)) == 0)
        let stored = Self.collected(folder.path + "/collected").filter { $0.text.hasPrefix("piped ") }.map(\.text)
        #expect(stored == (1...3000).map { "piped \($0)" })
        try? child.input!.close()
    }

    /// A line the stop cuts (its newline never read) reaches the collector marked as cut
    /// and counted in `truncated=`, never as a whole line: once with a partial line
    /// waiting, then with stdin kept full by a writer while SIGTERM arrives.
    @Test(.startsProcesses, arguments: [false, true])
    func aLineCutByTheStopIsStoredMarkedAsCut(keptFull: Bool) throws {
        let folder = TemporaryDirectory("cut")
        defer { folder.remove() }
        let (child, systemd) = try Self.stdinDaemon(folder)
        defer { withExtendedLifetime(systemd) {} }
        let body = String(repeating: "x", count: 300)
        let writing = Atomic<Bool>(true)
        let writer = child.input!.fileDescriptor
        if keptFull {
            // Writes whole lines in pieces that rarely end at a newline, until the pipe closes.
            Thread {
                // EPIPE once the daemon is gone; the SIGPIPE stays with this thread and ends with it.
                var pipeSignal = sigset_t()
                sigemptyset(&pipeSignal)
                sigaddset(&pipeSignal, SIGPIPE)
                pthread_sigmask(SIG_BLOCK, &pipeSignal, nil)
                var number = 0
                var pending: [UInt8] = []
                while writing.load(ordering: .relaxed) {
                    while pending.count < 4096 {
                        number += 1
                        pending += Array("full \(number) \(body)\n".utf8)
                    }
                    let count = pending.withUnsafeBytes { write(writer, $0.baseAddress, 1000) }
                    if count <= 0 { break }
                    pending.removeFirst(count)
                }
            }.start()
            usleep(300_000)
        } else {
            try child.input!.write(contentsOf: Data("whole line\npartial line without its end".utf8))
            usleep(300_000)  // read, and the partial held back waiting for its newline
        }
        child.send(SIGTERM)
        #expect(child.waitForExit(timeout: .seconds(20)) == 0)
        writing.store(false, ordering: .relaxed)
        // The writer's lines and the test's, not the daemon's own; a line cut within its
        // first bytes ("fu" and the marker) is the writer's too.
        let stored = Self.collected(folder.path + "/collected").map(\.text).filter { text in
            let line = text.hasSuffix(LineInput.cutMarker) ? String(text.dropLast(LineInput.cutMarker.count)) : text
            return ["full ", "whole", "partial"].contains {
                line.hasPrefix($0) || (!line.isEmpty && $0.hasPrefix(line))
            }
        }
        let cut = stored.filter { $0.hasSuffix(LineInput.cutMarker) }
        let whole = stored.filter { !$0.hasSuffix(LineInput.cutMarker) }
        if keptFull {
            #expect(whole.allSatisfy { $0.hasSuffix(" " + body) }, "a cut line passed off as whole")
            #expect(cut.count <= 1)
        } else {
            #expect(whole == ["whole line"])
            #expect(cut == ["partial line without its end" + LineInput.cutMarker])
        }
        let progress = try #require(child.standardError.last { $0.hasPrefix("spooled=") })
        #expect(progress.contains("truncated=\(cut.count) "), "\(progress)")
        try? child.input!.close()
    }

    @Test(.startsProcesses) func aSecondInstanceOnTheSameSpoolExitsAtOnceNamingTheHolder() throws {
        let folder = TemporaryDirectory("two")
        defer { folder.remove() }
        let arguments = [
            "--spool", folder.path + "/spool", "--sink", folder.path + "/collected", "--progress-interval", "0",
        ]
        let systemd = try FakeSystemd()
        let first = try RunningChild(
            arguments, environment: ["NOTIFY_SOCKET": systemd.path], executable: "log-uploader")
        // Ready: its spool held and its signals handled (the SIGTERM below ends it cleanly).
        try #require(systemd.waitFor { $0.contains("READY=1") }, "never ready: \(first.standardError)")
        let second = try RunningChild(arguments, executable: "log-uploader")
        #expect(second.waitForExit(timeout: .seconds(10)) == 75)
        #expect(second.standardError.contains { $0.contains("in use by process \(first.pid)") })
        first.send(SIGTERM)
        #expect(first.waitForExit() == 0)
    }
}
