import Foundation

/// A short command run to completion, output collected.
package struct ChildCommand {
    package let status: Int32
    package let output: String

    package static func run(_ executable: String, _ arguments: [String]) throws -> ChildCommand {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return ChildCommand(status: process.terminationStatus, output: String(decoding: data, as: UTF8.self))
    }
}
