import Foundation
import Overtime
import OvertimeLogUploader
import OvertimeSupport
import OvertimeTestSupport
import Testing

/// log-uploader given its sockets as systemd gives them (`LISTEN_PID`, `LISTEN_FDS`,
/// `LISTEN_FDNAMES`, descriptors from 3): by a parent that holds them across restarts as
/// a `.socket` unit does, by systemd's own `systemd-socket-activate`, and with the shipped
/// `log-uploader.socket`'s modes, a daemon user of its own and a producer of the group.
@Suite("Socket activation: sockets passed by a service manager", .serialized, .timeLimit(.minutes(3)))
struct SocketActivationTests {
    /// `sh` in between sets `LISTEN_PID` to its own PID and execs the program, which keeps
    /// it: the variable names the program, as systemd sets it after forking.
    private static let listenPID = ["/bin/sh", "-c", "LISTEN_PID=$$ exec \"$0\" \"$@\""]

    /// A Unix socket bound at `path` with `mode` (listening, for a stream socket), as a
    /// `.socket` unit makes it.
    private static func socket(at path: String, datagram: Bool, mode: mode_t = 0o600) throws -> Int32 {
        let fd = makeUnixSocket(datagram: datagram)
        let address = try #require(UnixSocketAddress(path))
        try #require(address.withSockAddr { bind(fd, $0, $1) } == 0, "bind \(path): \(errnoDescription())")
        try #require(chmod(path, mode) == 0)
        if !datagram { try #require(listen(fd, 64) == 0) }
        return fd
    }

    /// Sends one datagram without waiting: `false` when the socket's queue is full
    /// (`net.unix.max_dgram_qlen` datagrams, 10 by default; systemd raises it to 512).
    private static func send(datagram text: String, to path: String) -> Bool {
        guard let address = UnixSocketAddress(path) else { return false }
        let fd = makeUnixSocket(datagram: true)
        defer { close(fd) }
        return text.utf8CString.withUnsafeBytes { bytes in
            address.withSockAddr { sendto(fd, bytes.baseAddress, bytes.count - 1, Int32(MSG_DONTWAIT), $0, $1) }
                == bytes.count - 1
        }
    }

    private func daemon(
        _ folder: TemporaryDirectory, _ extra: [String], names: [String], passing: [Int32],
        wrapper: [String] = listenPID, environment: [String: String] = [:]
    ) throws -> RunningChild {
        try RunningChild(
            ["--spool", folder.path + "/spool", "--sink", folder.path + "/collected", "--progress-interval", "0"]
                + extra,
            environment: ["LISTEN_FDS": "\(passing.count)", "LISTEN_FDNAMES": names.joined(separator: ":")]
                .merging(environment) { $1 },
            executable: "log-uploader", wrapper: wrapper, passing: passing)
    }

    private func collectedLines(_ folder: TemporaryDirectory) -> [String] {
        UploaderSafetyTests.collected(folder.path + "/collected").map(\.text)
    }

    @Test func passedSocketsAreServedLeftInPlaceAndWhatIsSentBetweenRunsWaitsForTheNext() async throws {
        try await onOwnThread { try passedSocketsAreServedLeftInPlaceAndWhatIsSentBetweenRunsWaitsForTheNextBody() }
    }

    private func passedSocketsAreServedLeftInPlaceAndWhatIsSentBetweenRunsWaitsForTheNextBody() throws {
        let folder = TemporaryDirectory("activation")
        defer { folder.remove() }
        let ingestPath = folder.path + "/ingest.sock"
        let inputPath = folder.path + "/input.sock"
        let controlPath = folder.path + "/control.sock"
        let ingest = try Self.socket(at: ingestPath, datagram: false)
        let input = try Self.socket(at: inputPath, datagram: true)
        let control = try Self.socket(at: controlPath, datagram: false)
        let spare = try Self.socket(at: folder.path + "/spare.sock", datagram: false)
        defer { for fd in [ingest, input, control, spare] { close(fd) } }
        let arguments = [
            "--ingest-socket", "fd://producers", "--datagram-socket", "fd://producers", "--control-socket",
            "fd://control", "--upload-interval", "0",
        ]
        let names = ["producers", "producers", "control", "metrics"]

        let first = try daemon(folder, arguments, names: names, passing: [ingest, input, control, spare])
        let stored = try SpoolIngestClient(path: ingestPath).send(["acknowledged 1", "acknowledged 2"])
        #expect(stored != nil)
        #expect(Self.send(datagram: "datagram 1\n", to: inputPath))
        let status = try overtimectl(["status", "--socket", controlPath])
        #expect(status.status == 0, "the control socket answers: \(status.errors)")
        first.send(SIGTERM)
        #expect(first.waitForExit() == 0, "\(first.standardError)")
        #expect(
            first.standardError.contains { $0.contains("fd://metrics") && $0.contains("nothing answers") },
            "a passed socket no option names is warned about: \(first.standardError)")
        for path in [ingestPath, inputPath, controlPath] {
            #expect(access(path, F_OK) == 0, "\(path) is the service manager's: left in place")
        }

        // Stopped: datagrams wait in the socket the parent still holds (as many as its queue
        // takes), a batch in the backlog.
        let queued = (1...50).filter { Self.send(datagram: "between runs \($0)\n", to: inputPath) }
        #expect(queued.count >= 5, "datagrams are queued while no daemon runs")
        let late = Locked<ClosedRange<UInt64>?>(nil)
        let produced = DispatchSemaphore(value: 0)
        let connected = DispatchSemaphore(value: 0)
        spawnThread(name: "late-producer") {
            let client = try? SpoolIngestClient(path: ingestPath)
            connected.signal()
            late.withLock { $0 = try? client?.send(["sent while stopped"]) }
            produced.signal()
        }
        connected.wait()

        let second = try daemon(folder, arguments, names: names, passing: [ingest, input, control, spare])
        produced.wait()
        #expect(late.withLock { $0 } != nil, "the batch sent while stopped was acknowledged by the next run")
        #expect(UploaderSafetyTests.waitFor { (try? overtimectl(["status", "--socket", controlPath]).status) == 0 })
        second.send(SIGTERM)
        #expect(second.waitForExit() == 0, "\(second.standardError)")
        let lines = collectedLines(folder)
        for expected in ["acknowledged 1", "acknowledged 2", "datagram 1", "sent while stopped"]
            + queued.map({ "between runs \($0)" })
        {
            #expect(lines.contains(expected), "\(expected) was uploaded")
        }
    }

    @Test(.startsProcesses) func systemdSocketActivateStartsTheDaemonOnTheFirstConnection() async throws {
        try await onOwnThread { try systemdSocketActivateStartsTheDaemonOnTheFirstConnectionBody() }
    }

    private func systemdSocketActivateStartsTheDaemonOnTheFirstConnectionBody() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-socket-activate") else {
            Issue.record("systemd-socket-activate is missing (Debian: systemd); scripts/setup installs it")
            return
        }
        let folder = TemporaryDirectory("activate")
        defer { folder.remove() }
        let ingestPath = folder.path + "/ingest.sock"
        let controlPath = folder.path + "/control.sock"
        // systemd's own implementation of the protocol: it listens, and on the first
        // connection execs the program with LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES set.
        let child = try RunningChild(
            [
                "--spool", folder.path + "/spool", "--sink", folder.path + "/collected", "--progress-interval", "0",
                "--ingest-socket", "fd://producers", "--control-socket", "fd://control", "--upload-interval", "0",
            ], executable: "log-uploader",
            wrapper: [
                "/usr/bin/systemd-socket-activate", "-l", ingestPath, "-l", controlPath, "--fdname=producers:control",
            ])
        UploaderSafetyTests.waitForSocket(ingestPath)
        let stored = try SpoolIngestClient(path: ingestPath).send(["first connection"])
        #expect(stored != nil, "the connection that started it was served")
        #expect(try overtimectl(["status", "--socket", controlPath]).status == 0)
        child.send(SIGTERM)
        #expect(child.waitForExit() == 0, "\(child.standardError)")
        #expect(collectedLines(folder).contains("first connection"))
    }

    @Test(.startsProcesses) func theShippedSocketUnitLetsItsGroupSendToADaemonOfItsOwnUser() async throws {
        try await onOwnThread { try theShippedSocketUnitLetsItsGroupSendToADaemonOfItsOwnUserBody() }
    }

    private func theShippedSocketUnitLetsItsGroupSendToADaemonOfItsOwnUserBody() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let unit = try String(
            contentsOf: root.appendingPathComponent("Examples/systemd/log-uploader.socket"), encoding: .utf8)
        let service = try String(
            contentsOf: root.appendingPathComponent("Examples/systemd/log-uploader.service"), encoding: .utf8)
        func value(_ key: String) throws -> String {
            let line = try #require(
                unit.split(separator: "\n").first { $0.hasPrefix(key + "=") }, "\(key)= in the unit")
            return String(line.dropFirst(key.count + 1))
        }
        let name = try value("FileDescriptorName")
        let mode = try #require(mode_t(try value("SocketMode"), radix: 8))
        #expect(try value("SocketGroup") == "log-producers")
        #expect(service.contains("--ingest-socket fd://\(name)") && service.contains("--datagram-socket fd://\(name)"))
        #expect(try value("ListenStream").hasSuffix("/ingest.sock") && value("ListenDatagram").hasSuffix("/input.sock"))

        // The unit's sockets in a world-readable folder (DirectoryMode=0755), owned by root
        // and the producers' group (nogroup here), with the unit's mode.
        let folder = TemporaryDirectory("shipped-socket")
        defer { folder.remove() }
        chmod(folder.path, 0o755)
        let sockets = folder.path + "/run"
        try FileManager.default.createDirectory(atPath: sockets, withIntermediateDirectories: false)
        chmod(sockets, 0o755)
        let ingestPath = sockets + "/ingest.sock"
        let inputPath = sockets + "/input.sock"
        let ingest = try Self.socket(at: ingestPath, datagram: false, mode: mode)
        let input = try Self.socket(at: inputPath, datagram: true, mode: mode)
        defer { for fd in [ingest, input] { close(fd) } }
        let producers: gid_t = 65534
        chown(ingestPath, 0, producers)
        chown(inputPath, 0, producers)
        // The daemon: a user of its own (DynamicUser=), UMask=0077, its state in a folder of its own.
        let daemonUser = 61_023
        let state = folder.path + "/state"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: false)
        chown(state, uid_t(daemonUser), gid_t(daemonUser))
        chmod(state, 0o700)
        let child = try RunningChild(
            [
                "--spool", state + "/spool", "--sink", state + "/collected", "--progress-interval", "0",
                "--ingest-socket", "fd://\(name)", "--datagram-socket", "fd://\(name)", "--upload-interval", "0",
            ],
            environment: ["LISTEN_FDS": "2", "LISTEN_FDNAMES": "\(name):\(name)"], executable: "log-uploader",
            wrapper: [
                "/usr/bin/setpriv", "--reuid=\(daemonUser)", "--regid=\(daemonUser)", "--clear-groups", "/bin/sh", "-c",
                "umask 077; LISTEN_PID=$$ exec \"$0\" \"$@\"",
            ], passing: [ingest, input])

        // A producer in the group, and a user who is not.
        let script = """
            import socket, sys
            d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            d.sendto(b"datagram from " + sys.argv[3].encode() + b"\\n", sys.argv[2])
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(sys.argv[1])
            s.sendall(b"batch from " + sys.argv[3].encode() + b"\\n\\n")
            print(s.makefile().readline().strip())
            """
        func produce(uid: Int, gid: Int, as who: String) throws -> ChildCommand {
            try ChildCommand.run(
                "/usr/bin/setpriv",
                [
                    "--reuid=\(uid)", "--regid=\(gid)", "--clear-groups", "/usr/bin/python3", "-c", script, ingestPath,
                    inputPath, who,
                ])
        }
        let member = try produce(uid: 65534, gid: Int(producers), as: "a member")
        #expect(member.status == 0 && member.output.hasPrefix("ok "), "\(member.output)")
        let stranger = try produce(uid: 61_024, gid: 61_024, as: "a stranger")
        #expect(stranger.status != 0 && stranger.output.contains("Permission denied"), "\(stranger.output)")

        child.send(SIGTERM)
        #expect(child.waitForExit() == 0, "\(child.standardError)")
        let lines = UploaderSafetyTests.collected(state + "/collected").map(\.text)
        #expect(Set(lines).isSuperset(of: ["datagram from a member", "batch from a member"]), "\(lines)")
        #expect(!lines.contains { $0.contains("stranger") })
    }

    @Test func socketsThatAreMissingOrUnsuitableAreRefusedAtStartNamingWhy() async throws {
        try await onOwnThread { try socketsThatAreMissingOrUnsuitableAreRefusedAtStartNamingWhyBody() }
    }

    private func socketsThatAreMissingOrUnsuitableAreRefusedAtStartNamingWhyBody() throws {
        let folder = TemporaryDirectory("activation-misuse")
        defer { folder.remove() }
        let stream = try Self.socket(at: folder.path + "/stream.sock", datagram: false)
        let datagram = try Self.socket(at: folder.path + "/dgram.sock", datagram: true)
        let other = try Self.socket(at: folder.path + "/other.sock", datagram: false)
        var pair: [Int32] = [-1, -1]
        socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair)
        let file = open(folder.path + "/plain", O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        defer { for fd in [stream, datagram, other, file] + pair { close(fd) } }

        func refusal(_ extra: [String], names: [String], passing: [Int32], wrapper: [String] = Self.listenPID) throws
            -> String
        {
            let child = try daemon(folder, extra, names: names, passing: passing, wrapper: wrapper)
            let status = child.waitForExit(timeout: .seconds(20))
            #expect(status != nil && status != 0, "\(extra) is refused")
            return child.standardError.joined(separator: "\n")
        }
        // Nothing passed at all.
        var errors = try refusal(["--ingest-socket", "fd://producers"], names: [], passing: [], wrapper: [])
        #expect(errors.contains("no socket named 'producers' was passed") && errors.contains("LISTEN_FDS"), "\(errors)")
        // Passed to another process (a variable inherited by a child).
        errors = try refusal(
            ["--ingest-socket", "fd://producers"], names: ["producers"], passing: [stream],
            wrapper: ["/usr/bin/env", "LISTEN_PID=1"])
        #expect(errors.contains("passed to process 1, not to this one"), "\(errors)")
        // Under another name.
        errors = try refusal(["--control-socket", "fd://control"], names: ["producers"], passing: [stream])
        #expect(errors.contains("no socket named 'control'") && errors.contains("'producers'"), "\(errors)")
        // The wrong kind, not listening (Accept=yes), not a socket, two of one kind and name.
        errors = try refusal(["--ingest-socket", "fd://in"], names: ["in"], passing: [datagram])
        #expect(errors.contains("is not a stream socket"), "\(errors)")
        errors = try refusal(["--datagram-socket", "fd://in"], names: ["in"], passing: [stream])
        #expect(errors.contains("is not a datagram socket"), "\(errors)")
        errors = try refusal(["--control-socket", "fd://control"], names: ["control"], passing: [pair[0]])
        #expect(errors.contains("is not listening") && errors.contains("Accept=no"), "\(errors)")
        errors = try refusal(["--ingest-socket", "fd://in"], names: ["in"], passing: [file])
        #expect(errors.contains("is not a socket"), "\(errors)")
        errors = try refusal(
            ["--ingest-socket", "fd://in", "--control-socket", "fd://in"], names: ["in", "in"],
            passing: [stream, other])
        #expect(errors.contains("2 sockets passed as 'in'") && errors.contains("FileDescriptorName="), "\(errors)")
        // A name systemd could not have given is a usage error.
        let bad = try daemon(folder, ["--ingest-socket", "fd://"], names: [], passing: [], wrapper: [])
        #expect(bad.waitForExit(timeout: .seconds(20)) == 64)
        for name in ["stream.sock", "dgram.sock", "other.sock"] {
            #expect(access(folder.path + "/" + name, F_OK) == 0, "a refused passed socket's file is left alone")
        }
    }
}
