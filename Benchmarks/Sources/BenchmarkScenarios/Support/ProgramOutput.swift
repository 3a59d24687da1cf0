// A helper program run to its end for what it prints: the peers, the limits, psql.

import Foundation

/// Runs `program` with `arguments` to its end: everything it printed (standard output and
/// error), or an error naming `what` and its exit status unless it exited 0.
public func programOutput(_ program: String, _ arguments: [String], what: String) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: program)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let text = String(decoding: data, as: UTF8.self)
    guard process.terminationStatus == 0 else {
        throw ScenarioError("\(what): exit \(process.terminationStatus): \(text.suffix(400))")
    }
    return text
}
