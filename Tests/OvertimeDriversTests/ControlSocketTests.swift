import Foundation
import OvertimeControlProtocol
import OvertimeSupport
import OvertimeTestSupport
import Testing

@testable import Overtime

@Suite("Control socket and overtimectl against a real daemon", .onOwnThread(runningAtMost: .minutes(2)))
struct ControlSocketTests {
    /// A daemon with two grants open from the start and one more begun in willTerminate
    /// and never ended, so that termination always waits for an expiration.
    /// `repeatGrace`: how long a repeated termination request is the same request — by
    /// default a minute, so that a repeated `overtimectl terminate` is the same request
    /// however long a busy machine takes to start the second one.
    private func startDaemon(grants: Int = 2, repeatGrace: Duration = .seconds(60)) throws -> (RunningChild, String) {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-\(UUID().uuidString).sock").path
        let child = try RunningChild(
            ["daemon"],
            environment: [
                "OVERTIME_CONTROL_SOCKET": path, "HARNESS_GRANTS": "\(grants)", "HARNESS_LEAD_MS": "500",
                "HARNESS_ON_TERMINATE": "hold",
                "HARNESS_REPEAT_GRACE_MS": "\(repeatGrace.components.seconds * 1000)",
            ])
        #expect(child.waitForLine { $0 == "READY" } != nil)
        return (child, path)
    }

    @Test(.startsProcesses) func everyCommandThroughOvertimectl() throws {
        let (child, path) = try startDaemon()
        var info = stat()
        #expect(lstat(path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)

        let (status, table, _) = try overtimectl(["status", "--socket", path])
        #expect(status == 0)
        #expect(table.contains("state        active"))
        #expect(table.contains("open tasks   2"))
        #expect(table.contains("time left    unlimited"))

        let (_, tasks, _) = try overtimectl(["tasks", "--socket", path])
        #expect(tasks.split(separator: "\n").first?.hasPrefix("ID   NAME   AGE") == true)
        #expect(tasks.contains("#r1  job-0") && tasks.contains("#r2  job-1"))
        #expect(tasks.contains("OvertimeTestHarness/main.swift:"))

        #expect(try overtimectl(["background", "--socket", path]).0 == 0)
        let (_, json, _) = try overtimectl(["status", "--json", "--socket", path])
        let response = try ControlResponse(json: Array(json.utf8))
        #expect(response.status?.state == "background")
        #expect((response.status?.backgroundTimeRemaining ?? 0) > 25)

        #expect(try overtimectl(["expire", "#r1", "--socket", path]).0 == 0)
        #expect(child.waitForLine { $0 == "EXPIRED job-0" } != nil)
        let (missing, _, missingError) = try overtimectl(["expire", "#r99", "--socket", path])
        #expect(missing == 1 && missingError.contains("no open background task #r99"))
        #expect(try overtimectl(["expire", "--socket", path]).0 == 0)
        #expect(child.waitForLine { $0 == "EXPIRED job-1" } != nil)

        #expect(try overtimectl(["foreground", "--socket", path]).0 == 0)
        #expect(try overtimectl(["reload", "--socket", path]).0 == 0)
        #expect(child.waitForLine { $0 == "EVENT reload active" } != nil)
        let warned = try overtimectl(["memory-warning", "--socket", path])
        #expect(warned.status == 0 && warned.output.contains("memory warning delivered"), "\(warned.output)")
        #expect(child.waitForLine { $0 == "EVENT didReceiveMemoryWarning active" } != nil)
        // Again at once: within the interval, coalesced, and said so (it said "accepted").
        let again = try overtimectl(["memory-warning", "--socket", path])
        #expect(again.status == 0 && again.output.contains("coalesced"), "\(again.output)")
        let (unknown, _, unknownError) = try overtimectl(["call", "simulate-launch", "--socket", path])
        #expect(unknown == 1 && unknownError.contains("unknown command 'simulate-launch'"))
        let (badID, _, badIDError) = try overtimectl(["expire", "r-1", "--socket", path])
        #expect(badID == 64 && badIDError.contains("'r-1' is not a task ID") && !badIDError.contains("SUBCOMMANDS"))

        #expect(try overtimectl(["terminate", "--socket", path]).0 == 0)
        #expect(child.waitForLine { $0.hasPrefix("EVENT willTerminate") } != nil)
        // Again at once: the same request (a double click, `timeout` signalling a group).
        #expect(try overtimectl(["terminate", "--socket", path]).0 == 0)
        usleep(300_000)
        #expect(!child.output.contains("EXPIRED final-flush"))
        // Deliberately now: every grant expires, and --wait returns once the daemon is gone.
        let (now, nowOutput, _) = try overtimectl(["terminate", "--now", "--wait", "--socket", path])
        #expect(now == 0 && nowOutput.contains("terminated"))
        #expect(child.output.contains("EXPIRED final-flush"))
        #expect(child.waitForExit() == 0)
        #expect(access(path, F_OK) != 0)  // the socket file is removed at shutdown
        let (gone, _, goneError) = try overtimectl(["status", "--socket", path])
        #expect(gone == 69)
        #expect(goneError.contains("cannot connect"))
        let (goneJSON, goneLine, _) = try overtimectl(["status", "--json", "--socket", path])
        #expect(goneJSON == 69 && goneLine.hasPrefix(#"{"error":"cannot connect"#) && goneLine.contains(#""ok":false"#))
    }

    /// A client that sends its requests and closes its side (`nc -N`, `socat`) gets every
    /// answer before the daemon closes the connection.
    @Test(.startsProcesses) func aClientThatHalfClosesGetsEveryAnswer() throws {
        // 200 open tasks: each answer to `tasks` is a table of about 20 KB, so the answers
        // outgrow the socket's buffer and wait in the daemon when the client closes its side.
        let (child, path) = try startDaemon(grants: 200)
        defer {
            child.send(SIGKILL)
            _ = child.waitForExit()
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        let address = try #require(UnixSocketAddress(path))
        #expect(address.withSockAddr { connect(fd, $0, $1) } == 0)
        let requests = Array(String(repeating: "{\"command\":\"tasks\"}\n", count: 12).utf8)
        #expect(requests.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == requests.count)
        shutdown(fd, Int32(SHUT_WR))
        usleep(500_000)  // the daemon sees the end of the requests before the client reads
        var answers: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            answers += buffer[0..<count]
        }
        let lines = answers.split(separator: UInt8(ascii: "\n"))
        #expect(lines.count == 12, "\(lines.count) answers for 12 requests (\(answers.count) bytes)")
        #expect(lines.allSatisfy { String(decoding: $0, as: UTF8.self).contains(#""ok":true"#) })
    }

    /// A command that answers later (``Runtime/addControlCommand(_:replying:)``) holds up
    /// neither the loop nor other clients, and its own client reads every answer in the
    /// order it asked, whatever order they were ready in.
    @Test(.startsProcesses) func aCommandThatAnswersLaterBlocksNoOneAndAnswersStayInOrder() throws {
        let (child, path) = try startDaemon(grants: 0)
        defer {
            child.send(SIGKILL)
            _ = child.waitForExit()
        }
        let first = try RawControlClient(path)
        first.send(#"{"command":"hold","arguments":["a"]}"# + "\n" + #"{"command":"status"}"# + "\n")
        #expect(child.waitForLine { $0 == "HOLDING a" } != nil)
        // Meanwhile another client is answered and the loop does its own work.
        let (status, table, _) = try overtimectl(["status", "--socket", path])
        #expect(status == 0 && table.contains("state        active"))
        #expect(try overtimectl(["background", "--socket", path]).0 == 0)
        #expect(child.waitForLine { $0.hasPrefix("EVENT didEnterBackground") } != nil)
        // The first client's status waits behind its unanswered "hold".
        #expect(first.readLines(1, waitingMilliseconds: 300).isEmpty)
        let (_, released, _) = try overtimectl(["call", "release", "--socket", path])
        #expect(released.contains("releasing 1"))
        let answers = first.readLines(2, waitingMilliseconds: 10_000)
        #expect(answers.count == 2)
        #expect(answers.first?.contains(#""message":"released""#) == true, "\(answers)")
        // Answered as of when it was asked: before the other client's "background".
        #expect(answers.last?.contains(#""state":"active""#) == true, "\(answers)")

        // A command that replies twice: the first reply is the answer, the second ignored.
        first.send(#"{"command":"twice"}"# + "\n" + #"{"command":"status"}"# + "\n")
        let twice = first.readLines(2, waitingMilliseconds: 10_000)
        #expect(twice.first?.contains(#""message":"first""#) == true, "\(twice)")
        #expect(twice.last?.contains(#""status""#) == true && !twice.joined().contains("second"), "\(twice)")

        // A client that leaves before its answer: the late reply goes nowhere, and the
        // daemon goes on answering.
        let leaving = try RawControlClient(path)
        leaving.send(#"{"command":"hold","arguments":["b"]}"# + "\n")
        #expect(child.waitForLine { $0 == "HOLDING b" } != nil)
        leaving.close()
        #expect(try overtimectl(["call", "release", "--socket", path]).1.contains("releasing 1"))
        first.send(#"{"command":"status"}"# + "\n")
        #expect(first.readLines(1, waitingMilliseconds: 10_000).first?.contains(#""ok":true"#) == true)
    }

    /// overtimectl reads an answer of any size in linear time, and refuses one past its
    /// bound (a daemon that never ends its line) with status 76.
    @Test(
        .startsProcesses,
        .notUnderThreadSanitizer(
            "overtimectl reading one answer from a fake daemon: one thread; instrumented, its 96 MB took 160 s of a slot"
        ))
    func overtimectlReadsLargeAnswersAndBoundsThem() throws {
        let folder = TemporaryDirectory("ctl-large")
        defer { folder.remove() }
        for (size, expected) in [(16 << 20, Int32(0)), (80 << 20, Int32(76))] {
            let path = folder.path + "/fake-\(size).sock"
            // A fake daemon: answers any request with one JSON line of `size` bytes
            // (the second never ends its line).
            let server = try SpawnedProcess(
                "/usr/bin/python3",
                [
                    "-c",
                    """
                    import socket, sys
                    s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(); print("L", flush=True)
                    c, _ = s.accept(); c.recv(65536)
                    n = int(sys.argv[2]); end = sys.argv[3] == "1"
                    body = b'{"ok":true,"message":"' + b"x" * (n - 31) + b'"}' + (b"\\n" if end else b"")
                    c.sendall(body if end else b"x" * n); c.close()
                    """, path, "\(size)", expected == 0 ? "1" : "0",
                ])
            defer {
                server.send(SIGKILL)
                _ = server.waitForExit()
            }
            _ = server.outputPipe!.availableData
            let (status, output, error) = try overtimectl(["call", "anything", "--socket", path])
            #expect(status == expected, "\(error.prefix(300))")
            if expected == 0 { #expect(output.utf8.count >= 16 << 20 - 40) }
            if expected == 76 { #expect(error.contains("longer than")) }
        }
    }

    @Test(.startsProcesses) func anotherUserIsRefusedAtBothGates() throws {
        let (child, path) = try startDaemon()
        let (blocked, _, blockedError) = try overtimectl(["status", "--socket", path], as: 65534)
        #expect(blocked == 77)
        #expect(blockedError.contains("Permission denied"))
        // With the file opened up, the peer-credential check still refuses.
        chmod(path, 0o666)
        let (refused, _, refusedError) = try overtimectl(["status", "--socket", path], as: 65534)
        #expect(refused == 77)
        #expect(refusedError.contains("permission denied: uid 65534"))
        #expect(try overtimectl(["status", "--socket", path]).0 == 0)  // the owner still gets in
        child.send(SIGKILL)
    }

    @Test(.startsProcesses) func fuzzedRequestLinesNeverCrashTheDaemon() throws {
        let (child, path) = try startDaemon(repeatGrace: .seconds(1))
        var generator = SplitMix64(seed: 0x0f1e_2d3c)
        let samples: [[UInt8]] = [
            Array("{".utf8), Array("[]".utf8), Array("null".utf8), Array(#"{"command":5}"#.utf8),
            Array(#"{"command":"expire","id":-1}"#.utf8), Array(#"{"command":"nope"}"#.utf8),
            Array(#"{"command":"status","extra":{"deep":[1,2,3]}}"#.utf8), [0xFF, 0xFE, 0x00, 0x7F],
        ]
        for round in 0..<300 {
            let socket = makeUnixSocket(datagram: false)
            defer { close(socket) }
            let address = try #require(UnixSocketAddress(path))
            try #require(address.withSockAddr { connect(socket, $0, $1) } == 0)
            var line: [UInt8]
            switch round % 4 {
            case 0: line = samples[Int(generator.next() % UInt64(samples.count))]
            case 1: line = (0..<Int(generator.next() % 200)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            case 2:
                line = Array(#"{"command":"status""#.utf8) + Array(repeating: 0x20, count: Int(generator.next() % 50))
            default:
                line = Array(repeating: UInt8(ascii: "a"), count: round == 3 ? 70_000 : Int(generator.next() % 1000))
            }
            line.removeAll { $0 == UInt8(ascii: "\n") }
            line.append(UInt8(ascii: "\n"))
            _ = line.withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
        // Still serving, still alive.
        let (status, table, _) = try overtimectl(["status", "--socket", path])
        #expect(status == 0 && table.contains("open tasks   2"))
        child.send(SIGTERM)
        #expect(child.waitForLine { $0.hasPrefix("EVENT willTerminate") } != nil)
        usleep(1_100_000)  // past the grace in which a repeat is the same request
        child.send(SIGTERM)  // again: stop now, not at the held grants' expiration
        #expect(child.waitForExit() == 0)
        #expect(child.standardError.contains { $0.contains("received SIGTERM") })
        #expect(child.standardError.contains { $0.contains("expiring every background task now") })
    }

    @Test func aMissingSocketIsAClearErrorNotACrash() throws {
        let (status, _, error) = try overtimectl(["status", "--socket", "/nonexistent/overtime.sock"])
        #expect(status == 69)
        #expect(error.contains("cannot connect to /nonexistent/overtime.sock: No such file or directory"))
    }
}

/// A control-socket client on a plain socket: requests written as given, answers read as
/// lines, for tests of what overtimectl (one request per connection) cannot send.
private final class RawControlClient {
    private var fd: Int32
    private var pending: [UInt8] = []

    init(_ path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        let address = try #require(UnixSocketAddress(path))
        try #require(address.withSockAddr { connect(fd, $0, $1) } == 0)
    }

    deinit { close() }

    func send(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }

    /// Up to `count` answer lines, waiting at most `waitingMilliseconds` for each.
    func readLines(_ count: Int, waitingMilliseconds: Int32) -> [String] {
        var lines: [String] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while lines.count < count {
            if let end = pending.firstIndex(of: UInt8(ascii: "\n")) {
                lines.append(String(decoding: pending[..<end], as: UTF8.self))
                pending.removeSubrange(...end)
                continue
            }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, waitingMilliseconds) == 1 else { break }
            let got = read(fd, &buffer, buffer.count)
            guard got > 0 else { break }
            pending += buffer[0..<got]
        }
        return lines
    }

    func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }
}
