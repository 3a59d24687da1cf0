import Foundation
import OvertimeSupport
import OvertimeTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// overtimectl as an operator types it, against daemons that misbehave: a stand-in server
/// on a Unix socket that answers what it is told to, or nothing.
///
/// Each test runs one overtimectl, which ends within its 10 s timeout, on a thread of its
/// own (`onOwnThread`), not through the marked suites' gate (`.onOwnThread`): behind that
/// gate, under ThreadSanitizer, they waited more than their two minutes for slots the
/// calendar oracle's cases held, and the wait counted against their limit.
@Suite(
    "overtimectl's manners", .timeLimit(.minutes(2)),
    .notUnderThreadSanitizer(
        "overtimectl's exit statuses and messages: a program of one thread against a stand-in server"))
struct OvertimectlMannersTests {
    /// Listens at a fresh path; each connection's request line is read and `answer` (if
    /// any) written back; the connection is then held open until the server goes.
    final class StandInServer: Sendable {
        let folder = TemporaryDirectory("ctl-standin")
        let path: String
        private let listener: Int32
        private let held = Locked<[Int32]>([])

        init(answer: String?) throws {
            path = folder.path + "/control.sock"
            listener = makeUnixSocket(datagram: false)
            let address = try #require(UnixSocketAddress(path))
            #expect(address.withSockAddr { bind(listener, $0, $1) } == 0)
            #expect(listen(listener, 8) == 0)
            let (fd, held) = (listener, held)
            Thread.detachNewThread {
                while true {
                    let client = accept(fd, nil, nil)
                    guard client >= 0 else { return }
                    var byte: UInt8 = 0
                    while read(client, &byte, 1) == 1, byte != UInt8(ascii: "\n") {}
                    if let answer {
                        _ = Array((answer + "\n").utf8).withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
                    }
                    held.withLock { $0.append(client) }
                }
            }
        }

        deinit {
            shutdown(listener, Int32(SHUT_RDWR))  // the accepting thread's accept fails: it ends
            close(listener)
            for client in held.withLock({ $0 }) { close(client) }
            folder.remove()
        }
    }

    /// The socket before the command, as the shipped unit's comment and periodic-report's
    /// header write it ("Unknown option" before).
    @Test func theSocketMayComeBeforeTheCommand() async throws {
        try await onOwnThread {
            let server = try StandInServer(
                answer:
                    #"{"ok":true,"status":{"state":"active","pid":7,"openBackgroundTasks":0,"terminating":false,"parts":[]}}"#
            )
            let before = try overtimectl(["--socket", server.path, "status"])
            #expect(before.status == 0 && before.output.contains("active"), "\(before.output)\(before.errors)")
            let after = try overtimectl(["status", "--socket", server.path])
            #expect(after.status == 0 && after.output == before.output)
        }
    }

    /// `{"ok":true}` with no status is not the protocol's answer to `status` (it printed
    /// nothing and exited 0).
    @Test func anAnswerWithoutItsContentIsAProtocolError() async throws {
        try await onOwnThread {
            let server = try StandInServer(answer: #"{"ok":true}"#)
            let result = try overtimectl(["status", "--socket", server.path])
            #expect(result.status == 76 && result.errors.contains("holds no status"), "\(result.errors)")
        }
    }

    /// A daemon that accepts and never answers: "timed out", not "Resource temporarily
    /// unavailable (errno 11)".
    @Test func aDaemonThatNeverAnswersIsATimeout() async throws {
        try await onOwnThread {
            let server = try StandInServer(answer: nil)
            let result = try overtimectl(["status", "--socket", server.path])
            #expect(result.status == 69, "\(result.errors)")
            #expect(
                result.errors.contains("timed out after 10 s") && !result.errors.contains("errno"), "\(result.errors)")
        }
    }
}
