import Foundation
import Overtime
import OvertimeControl
import OvertimeTestSupport
import Testing

/// A program's client of the control socket against a real runtime's socket: answers,
/// refusals, and a daemon that is not there, each told apart. The hang guard is two minutes
/// for a body of 28–68 ms: Swift Testing's own steps for a test wait their turn on the threads
/// every test shares (Tests/Support/ThreadSanitizer.swift), and the guard counts that wait.
@Suite("Control socket client", .timeLimit(.minutes(2)))
struct ControlSocketClientTests {
    @Test func answersRefusalsAndNoDaemonAreToldApart() async throws {
        // Everything that blocks (the runtime's start and end, the client's calls) on a
        // thread of its own, never on the test runner's cooperative threads.
        try await onOwnThread {
            let folder = TemporaryDirectory("control-client")
            defer { folder.remove() }
            let path = folder.path + "/control.sock"
            let env = try VirtualRuntime { $0.controlSocket = .path(path) }
            defer { env.shutDown() }
            _ = env.runtime.addControlCommand("echo") { arguments in .success(arguments.joined(separator: "|")) }
            _ = env.runtime.addControlCommand("refuse") { _ in .failure(ControlCommandError("not today")) }
            let client = ControlSocketClient(path: path, timeout: .seconds(5))
            #expect(try client.call("echo", ["a b", "<c>"]) == "a b|<c>")
            #expect(try client.call("echo") == "")
            do {
                _ = try client.call("refuse")
                Issue.record("a refusal was taken for an answer")
            } catch let error as ControlSocketError {
                #expect(error.isRefusal && error.message == "refuse: not today", "\(error)")
            }
            do {
                _ = try client.call("no-such-command")
                Issue.record("an unknown command was answered")
            } catch let error as ControlSocketError {
                #expect(error.isRefusal && error.message.contains("no-such-command"), "\(error)")
            }
            do {
                _ = try ControlSocketClient(path: folder.path + "/absent.sock").call("status")
                Issue.record("no daemon, and yet an answer")
            } catch let error as ControlSocketError {
                #expect(!error.isRefusal && error.message.contains("cannot connect"), "\(error)")
            }
        }
    }
}
