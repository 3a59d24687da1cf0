import Foundation

/// A short command run to completion, output collected.
package struct ChildCommand {
    package let status: Int32
    package let output: String

    /// Runs `executable` with `arguments`; standard output and error are collected together.
    package static func run(_ executable: String, _ arguments: [String]) throws -> ChildCommand {
        let result = try SpawnedProcess.run(executable, arguments, mergingErrors: true)
        return ChildCommand(status: result.status, output: result.output)
    }
}
