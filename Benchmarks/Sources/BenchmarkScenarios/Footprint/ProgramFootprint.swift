// The shipped programs measured from outside, as an operator runs them: start to READY=1,
// SIGTERM to exit, resident memory, threads, libraries and wake-ups at rest.

import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Everything measured of one program in one session of starts and stops.
public struct ProgramFigures: Sendable {
    /// exec → `READY=1`, median of the warm starts, ms.
    public var startToReadyMilliseconds: Double
    /// SIGTERM → exit, median, ms.
    public var sigtermToExitMilliseconds: Double
    /// Resident memory at rest (3 s after `READY=1`), MB.
    public var residentMegabytes: Double
    /// Proportional set size at rest (shared pages by their share), MB.
    public var proportionalMegabytes: Double = 0
    /// Anonymous memory at rest (nothing a file backs), MB.
    public var anonymousMegabytes: Double = 0
    /// Threads at rest.
    public var threads: Int
    /// Shared objects mapped at rest.
    public var sharedLibraries: Int
    /// Wake-ups per second of every thread at rest.
    public var wakeupsPerSecond: Double
    /// The same wake-ups by thread name (the whole count of the rest, not per second).
    public var wakeupsByThread: [String: Int]
    /// Bytes written to storage at rest, per hour (`/proc/PID/io` over the rest).
    public var bytesWrittenPerHour: Double = 0
}

/// The footprint rows' measurements of a program, from outside.
public enum ProgramFootprint {
    /// Starts `executable` `starts + 1` times in one state folder (the first start makes
    /// its state and is not counted), stopping each with SIGTERM; the last start rests
    /// 3 s, then is looked at and its wake-ups and bytes written counted for `restSeconds`
    /// — with `load` running all along, when given (``BusyMachine``).
    public static func measure(
        _ executable: String, _ arguments: [String], starts: Int, restSeconds: Double, load: BusyMachine? = nil
    ) throws -> ProgramFigures {
        try load?.start()
        defer { load?.stop() }
        let folder = try MeasuredProcess.temporaryFolder()
        defer { _ = try? FileManager.default.removeItem(atPath: folder) }
        var ready: [Double] = []
        var stops: [Double] = []
        var figures = ProgramFigures(
            startToReadyMilliseconds: 0, sigtermToExitMilliseconds: 0, residentMegabytes: 0, threads: 0,
            sharedLibraries: 0, wakeupsPerSecond: 0, wakeupsByThread: [:])
        for start in 0...starts {
            let process = try MeasuredProcess(executable, arguments, folder: folder)
            let readyAt = try process.waitForReady()
            if start == starts {
                // At rest once the start's last work is over and the watchdog has looked once
                // more (a quarter of its 10 s timeout) and gone back to sleep.
                usleep(settleMicroseconds)
                figures.residentMegabytes = process.residentMegabytes
                figures.proportionalMegabytes = process.proportionalMegabytes
                figures.anonymousMegabytes = process.anonymousMegabytes
                figures.threads = process.threads
                figures.sharedLibraries = process.sharedLibraries
                let writtenBefore = process.bytesWritten
                (figures.wakeupsPerSecond, figures.wakeupsByThread) = process.wakeupsPerSecond(seconds: restSeconds)
                figures.bytesWrittenPerHour = Double(process.bytesWritten - writtenBefore) / restSeconds * 3600
            } else {
                usleep(200_000)  // settled: nothing pending
            }
            let (took, status) = try process.terminate()
            guard status == 0 else {
                throw ScenarioError("\(executable) exited with status \(status): \(process.standardError.suffix(400))")
            }
            if start > 0 {
                ready.append(Double(readyAt - process.spawnedAt) / 1e6)
                stops.append(Double(took) / 1e6)
            }
        }
        figures.startToReadyMilliseconds = median(ready)
        figures.sigtermToExitMilliseconds = median(stops)
        return figures
    }

    /// Resident memory (MB) of `log-uploader` after `lines` lines came in on stdin and it
    /// spooled them (and settled for a second). `warm`: in a state folder an earlier start
    /// made, as the figures at rest are; else the first start, which also makes its state
    /// (the schedule's tables among it), in an empty folder.
    public static func residentAfterLines(
        _ executable: String, _ arguments: [String], lines: Int, warm: Bool
    ) throws -> Double {
        let folder = try MeasuredProcess.temporaryFolder()
        defer { _ = try? FileManager.default.removeItem(atPath: folder) }
        if warm {
            let first = try MeasuredProcess(executable, arguments, folder: folder)
            _ = try first.waitForReady()
            let (_, status) = try first.terminate()
            guard status == 0 else {
                throw ScenarioError("exited with status \(status): \(first.standardError.suffix(400))")
            }
        }
        let process = try MeasuredProcess(executable, arguments, folder: folder)
        _ = try process.waitForReady()
        var batch: [UInt8] = []
        for index in 0..<lines {
            batch += Array("footprint line \(index) with some text as a daemon would log it\n".utf8)
            if batch.count > 1 << 20 {
                try process.write(batch)
                batch = []
            }
        }
        try process.write(batch)
        process.closeInput()  // stdin's end: read to the end, the daemon goes on
        usleep(1_000_000)
        let resident = process.residentMegabytes
        let (_, status) = try process.terminate(timeout: 120)
        guard status == 0 else {
            throw ScenarioError("exited with status \(status): \(process.standardError.suffix(400))")
        }
        return resident
    }

    /// Size in MB of `executable` stripped of symbols (a copy; the file is left as it is).
    public static func strippedMegabytes(_ executable: String) throws -> Double {
        let folder = try MeasuredProcess.temporaryFolder()
        defer { _ = try? FileManager.default.removeItem(atPath: folder) }
        let copy = folder + "/stripped"
        try FileManager.default.copyItem(atPath: executable, toPath: copy)
        let strip = Process()
        strip.executableURL = URL(fileURLWithPath: "/usr/bin/strip")
        strip.arguments = [copy]
        try strip.run()
        strip.waitUntilExit()
        guard strip.terminationStatus == 0 else { throw ScenarioError("strip \(executable) failed") }
        let size = try FileManager.default.attributesOfItem(atPath: copy)[.size] as? Int ?? 0
        return Double(size) / 1_048_576
    }

    private static func median(_ values: [Double]) -> Double {
        guard !values.isEmpty else { return 0 }
        let sorted = values.sorted()
        return sorted[sorted.count / 2]
    }
}
