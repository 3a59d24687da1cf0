// Instructions per begin+end pair, counted by valgrind's callgrind: a figure another
// tenant of the machine cannot move, beside the pairs per second that it can.

import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `grant_pair_instructions`: the instructions every thread of a process of its own
/// executes per begin+end pair, from two runs that differ only in their number of pairs
/// (so start-up, the open grants and shutdown cancel out).
public enum PairInstructions {
    /// Grants (timers) open while the pairs are made: fewer than the rate's million, so
    /// that the runs under valgrind stay short; a pair's cost grows with the logarithm of
    /// it at most.
    public static let open = 10_000

    /// Counts `implementation` by running this runner (`executable`) as a child under
    /// callgrind, twice: with `pairs` pairs, and with that many and 10 times as many more
    /// (a tenth of that for SwiftNIO, whose cancel searches its queue).
    public static func count(_ implementation: String, executable: String, pairs: Int) throws -> Double {
        let fewer = implementation == "nio_scheduled" ? max(1, pairs / 10) : pairs
        let more = fewer * 11
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/valgrind") else {
            throw ScenarioError("valgrind is not installed (scripts/setup installs it)")
        }
        let executable = try strippedCopy(of: executable)
        let low = try instructions(implementation, pairs: fewer, executable: executable)
        let high = try instructions(implementation, pairs: more, executable: executable)
        return Double(high - low) / Double(more - fewer)
    }

    /// A copy of `executable` without debug information (`strip -g`), made once: valgrind
    /// cannot read the DWARF that Swift 6.3 writes.
    private static func strippedCopy(of executable: String) throws -> String {
        let copy = NSTemporaryDirectory() + "/overtime-bench-stripped-\(getpid())"
        if FileManager.default.fileExists(atPath: copy) { return copy }
        try FileManager.default.copyItem(atPath: executable, toPath: copy)
        let strip = Process()
        strip.executableURL = URL(fileURLWithPath: "/usr/bin/strip")
        strip.arguments = ["-g", copy]
        try strip.run()
        strip.waitUntilExit()
        guard strip.terminationStatus == 0 else { throw ScenarioError("strip -g \(executable) failed") }
        return copy
    }

    private static func instructions(_ implementation: String, pairs: Int, executable: String) throws -> Int {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/valgrind")
        process.arguments = [
            "--tool=callgrind", "--callgrind-out-file=/dev/null", executable, "--child-pairs", implementation,
            "--count", "\(pairs)", "--open", "\(open)",
        ]
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let output = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        // "==123== Collected : 123456789"
        guard process.terminationStatus == 0,
            let line = output.split(separator: "\n").last(where: { $0.contains("Collected :") }),
            let count = line.split(separator: ":").last.flatMap({ Int($0.trimmingCharacters(in: .whitespaces)) })
        else {
            throw ScenarioError("callgrind of \(implementation) failed: \(output.suffix(400))")
        }
        return count
    }
}
