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

    /// Runs the harness with `arguments` to its end; after `timeout` it is sent SIGTERM.
    package static func run(_ arguments: [String], timeout: Duration = .seconds(60)) throws -> ChildProcess {
        let started = ContinuousClock.now
        let process = try SpawnedProcess(harnessURL.path, arguments)
        // Read while it runs so a full pipe cannot stall it.
        let outData = ReadInBackground(process.outputPipe!)
        let errData = ReadInBackground(process.errorPipe!)
        var status = process.waitForExit(timeout: timeout)
        if status == nil {
            process.send(SIGTERM)
            status = process.waitForExit()
        }
        return ChildProcess(
            status: status ?? -1, standardOutput: outData.text(), standardError: errData.text(),
            elapsed: ContinuousClock.now - started)
    }
}
