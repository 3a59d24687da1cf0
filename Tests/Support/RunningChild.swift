import Foundation
import Overtime
import OvertimeSupport

/// A harness process that keeps running while a test talks to it: signals, lines.
package final class RunningChild: Sendable {
    private let process: SpawnedProcess
    private let lines = Recorder<String>()
    private let errors = Recorder<String>()
    /// How many of the two pipes have been read to their end.
    private let pipesRead = Locked(0)

    /// The write end of the child's standard input, when started with `standardInput: true`.
    package var input: FileHandle? { process.inputPipe }

    /// Starts `executable` (built beside the tests) with `arguments`; with `wrapper`, runs
    /// `wrapper[0] wrapper[1…] <executable's path> arguments` instead (e.g. `prlimit …`);
    /// `passing` become the child's descriptors 3, 4, ….
    package init(
        _ arguments: [String], environment: [String: String] = [:], executable: String = "OvertimeTestHarness",
        standardInput: Bool = false, wrapper: [String] = [], passing: [Int32] = []
    ) throws {
        let tool = ChildProcess.harnessURL.deletingLastPathComponent().appendingPathComponent(executable)
        let command = wrapper + [tool.path] + arguments
        process = try SpawnedProcess(
            command[0], Array(command.dropFirst()),
            environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
            standardInput: standardInput, passing: passing)
        Self.collectLines(from: process.outputPipe!, into: lines, done: pipesRead)
        Self.collectLines(from: process.errorPipe!, into: errors, done: pipesRead)
    }

    package var pid: Int32 { process.pid }
    package var output: [String] { lines.all }
    package var standardError: [String] { errors.all }

    package func send(_ signal: Int32) { process.send(signal) }

    /// Waits until a line of standard output satisfies `match`; returns it, or nil after `timeout`.
    @discardableResult
    package func waitForLine(timeout: Duration = .seconds(20), _ match: (String) -> Bool) -> String? {
        let deadline = ContinuousClock.now + timeout
        repeat {
            if let line = lines.all.first(where: match) { return line }
            usleep(2000)
        } while ContinuousClock.now < deadline
        return nil
    }

    /// Waits for the process to exit and returns its status (nil after `timeout`).
    /// Once it exited, its last lines are read too (up to 2 s more, for a descendant that
    /// still holds the pipes), so ``output`` and ``standardError`` are whole.
    package func waitForExit(timeout: Duration = .seconds(30)) -> Int32? {
        let status = process.waitForExit(timeout: timeout)
        if status != nil {
            for _ in 0..<2000 {
                guard pipesRead.withLock({ $0 }) < 2 else { break }
                usleep(1000)
            }
        }
        return status
    }

    private static func collectLines(from handle: FileHandle, into recorder: Recorder<String>, done: Locked<Int>) {
        Thread.detachNewThread {
            defer { done.withLock { $0 += 1 } }
            var pending = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                pending.append(chunk)
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    recorder.append(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self))
                    pending.removeSubrange(pending.startIndex...newline)
                }
            }
        }
    }
}

/// Checks that a list of lifecycle events is a valid sequence of whole transitions.
package func lifecycleOrderProblems(_ events: [String]) -> [String] {
    var state = "active"
    var problems: [String] = []
    for event in events {
        switch (state, event) {
        case ("active", "willResignActive"): state = "resigning"
        case ("resigning", "didEnterBackground"): state = "background"
        case ("background", "didSuspend"): state = "suspended"
        case ("suspended", "didEnterBackground"): state = "background"  // a background launch
        case ("suspended", "willEnterForeground"), ("background", "willEnterForeground"): state = "entering"
        case ("entering", "didBecomeActive"): state = "active"
        case ("background", "willTerminate"), ("suspended", "willTerminate"): state = "terminating"
        case (_, "reload") where state != "terminated": break
        case (_, "didReceiveMemoryWarning") where state != "terminated": break
        default: problems.append("\(event) in \(state)")
        }
    }
    return problems
}
