import Foundation

/// A harness process that keeps running while a test talks to it: signals, lines.
package final class RunningChild: @unchecked Sendable {
    package let process = Process()
    private let lines = Recorder<String>()
    private let errors = Recorder<String>()

    /// The write end of the child's standard input, when started with `standardInput: true`.
    package let input: FileHandle?

    /// Starts `executable` (built beside the tests) with `arguments`; with `wrapper`, runs
    /// `wrapper[0] wrapper[1…] <executable's path> arguments` instead (e.g. `prlimit …`).
    package init(
        _ arguments: [String], environment: [String: String] = [:], executable: String = "OvertimeTestHarness",
        standardInput: Bool = false, wrapper: [String] = []
    ) throws {
        let tool = ChildProcess.harnessURL.deletingLastPathComponent().appendingPathComponent(executable)
        if let launcher = wrapper.first {
            process.executableURL = URL(fileURLWithPath: launcher)
            process.arguments = Array(wrapper.dropFirst()) + [tool.path] + arguments
        } else {
            process.executableURL = tool
            process.arguments = arguments
        }
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        if standardInput {
            let pipe = Pipe()
            process.standardInput = pipe
            input = pipe.fileHandleForWriting
        } else {
            input = nil
        }
        try process.run()
        Self.collectLines(from: out.fileHandleForReading, into: lines)
        Self.collectLines(from: err.fileHandleForReading, into: errors)
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    package var pid: Int32 { process.processIdentifier }
    package var output: [String] { lines.all }
    package var standardError: [String] { errors.all }

    package func send(_ signal: Int32) { kill(pid, signal) }

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
    package func waitForExit(timeout: Duration = .seconds(30)) -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning, ContinuousClock.now < deadline { usleep(2000) }
        guard !process.isRunning else { return nil }
        process.waitUntilExit()
        return process.terminationStatus
    }

    private static func collectLines(from handle: FileHandle, into recorder: Recorder<String>) {
        Thread.detachNewThread {
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
        case ("suspended", "willEnterForeground"), ("background", "willEnterForeground"): state = "entering"
        case ("entering", "didBecomeActive"): state = "active"
        case ("background", "willTerminate"), ("suspended", "willTerminate"): state = "terminating"
        case (_, "reload") where state != "terminated": break
        default: problems.append("\(event) in \(state)")
        }
    }
    return problems
}
