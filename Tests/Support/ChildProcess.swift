import Foundation

/// Runs the `OvertimeTestHarness` executable built next to the test bundle.
package struct ChildProcess {
    package let status: Int32
    package let standardOutput: String
    package let standardError: String
    package let elapsed: Duration

    package static var harnessURL: URL {
        // The test binary and the package's executables share one build folder.
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("OvertimeTestHarness")
    }

    package static func run(_ arguments: [String], timeout: Duration = .seconds(60)) throws -> ChildProcess {
        let process = Process()
        process.executableURL = harnessURL
        process.arguments = arguments
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        let started = ContinuousClock.now
        try process.run()
        let deadline = started + timeout
        // Read while it runs so a full pipe cannot stall it.
        let outData = ReadInBackground(out.fileHandleForReading)
        let errData = ReadInBackground(err.fileHandleForReading)
        while process.isRunning, ContinuousClock.now < deadline { usleep(5000) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        return ChildProcess(
            status: process.terminationStatus, standardOutput: outData.text(), standardError: errData.text(),
            elapsed: ContinuousClock.now - started)
    }
}

/// Collects a pipe's bytes on a background thread.
package final class ReadInBackground: @unchecked Sendable {
    private var data = Data()
    private let done = DispatchSemaphore(value: 0)

    package init(_ handle: FileHandle) {
        DispatchQueue.global().async {
            self.data = handle.readDataToEndOfFile()
            self.done.signal()
        }
    }

    package func text() -> String {
        done.wait()
        return String(decoding: data, as: UTF8.self)
    }
}
