import Foundation

/// `huge_line_ingest_mb_per_sec`: one line of `bytes` bytes and no newline into a shipped
/// `log-uploader`'s standard input, then a short line and the end of input: the daemon keeps
/// the line's first 1 MiB (the spool's longest line), skips the rest and stores the next
/// line whole. Timed from the first byte written until the process has exited, so the figure
/// is the daemon's whole path from pipe to spool; linear in the line's length, it stays near
/// the rate of ordinary input whatever the length.
public enum HugeLine {
    /// Megabytes (10^6 bytes) of input per second through `executable` started with `arguments`
    /// (`@D` in them becomes a fresh folder under `scratch`) and `--exit-on-eof`.
    public static func megabytesPerSecond(
        _ executable: String, _ arguments: [String], bytes: Int, scratch: String
    ) throws -> Double {
        let folder = scratch + "/huge-line-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments =
            arguments.map { $0.replacingOccurrences(of: "@D", with: folder) } + ["--exit-on-eof"]
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let chunk = Data(repeating: UInt8(ascii: "a"), count: 1 << 20)
        let started = ContinuousClock.now
        var written = 0
        while written < bytes {
            let piece = chunk.prefix(min(chunk.count, bytes - written))
            try input.fileHandleForWriting.write(contentsOf: piece)
            written += piece.count
        }
        try input.fileHandleForWriting.write(contentsOf: Data("\nthe next line\n".utf8))
        try input.fileHandleForWriting.close()
        process.waitUntilExit()
        let elapsed = ContinuousClock.now - started
        guard process.terminationReason == .exit, process.terminationStatus == 0 else {
            throw ScenarioError("log-uploader ended with status \(process.terminationStatus) on a huge line")
        }
        return Double(bytes + 15) / 1e6 / seconds(elapsed)
    }
}
