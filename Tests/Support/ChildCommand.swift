import Foundation

/// A short command run to completion, output collected.
package struct ChildCommand {
    package let status: Int32
    package let output: String

    /// Runs `executable` with `arguments`; standard output and error are collected together.
    package static func run(_ executable: String, _ arguments: [String]) throws -> ChildCommand {
        let process = try SpawnedProcess(executable, arguments, standardError: .standardOutput)
        let output = ReadInBackground(process.outputPipe!)
        let status = process.waitForExit(timeout: .seconds(120))
        return ChildCommand(status: status ?? -1, output: output.text())
    }
}
