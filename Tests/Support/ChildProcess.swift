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
        let result = try SpawnedProcess.run(harnessURL.path, arguments, timeout: timeout)
        return ChildProcess(
            status: result.status, standardOutput: result.output, standardError: result.errors,
            elapsed: ContinuousClock.now - started)
    }
}
