import Foundation
import Logging
import Overtime
import OvertimeLogUploader
import Synchronization

/// `spool_ingest_lines_per_sec`: 200-byte lines into a spool on disk, every group commit
/// made durable with `fdatasync` (the default durability), timed until the last line is
/// durable.
public enum SpoolIngest {
    /// A 200-byte line.
    static let line = [UInt8](repeating: UInt8(ascii: "x"), count: 199) + [UInt8(ascii: "\n")]

    /// A fresh spool in a folder of its own under `scratch` (on disk, not tmpfs).
    static func makeSpool(scratch: String) throws -> Spool {
        var configuration = SpoolConfiguration()
        configuration.segmentBytes = 4 << 20
        configuration.quotaBytes = 8 << 30
        return try Spool(
            directory: scratch + "/spool-\(UUID().uuidString)", configuration: configuration, clock: SystemClock(),
            logger: Logger(label: "overtime-bench") { _ in SwiftLogNoOpLogHandler() })
    }

    /// `Spool.append` from 8 writer threads, `batch` lines (51 KB, less than one 64 KiB
    /// pipe buffer a shipper reads at once) per call. Each call returns once its lines are
    /// durable; while one group commit syncs, the others' lines gather for the next.
    public static func append(lines: Int, batch: Int = 256, scratch: String) throws -> Double {
        let spool = try makeSpool(scratch: scratch)
        defer { try? FileManager.default.removeItem(atPath: spool.directory) }
        let threads = 8
        let calls = max(lines / (threads * batch), 1)
        let failure = Mutex<String?>(nil)
        settleDisk()
        let start = monotonicNanoseconds()
        onThreads(threads) { _ in
            let lines = [[UInt8]](repeating: line, count: batch)
            do {
                for _ in 0..<calls { try spool.append(lines) }
            } catch {
                failure.withLock { $0 = "\(error)" }
            }
        }
        let elapsed = monotonicNanoseconds() - start
        if let failure = failure.withLock({ $0 }) { throw ScenarioError("spool append failed: \(failure)") }
        return Double(spool.appendedLines) * 1e9 / Double(elapsed)
    }

    /// `Logger.info` through `SpoolLogHandler` from 2 threads; timed until the writer has
    /// made every line durable. Lines the handler dropped (queue full) do not count.
    /// `linesPerSecond` is the writer's flood guard: `nil` keeps its default (100 a second,
    /// meant for a program's own log), so the rate measured is the guard's, not the disk's.
    public static func logHandler(
        lines: Int, linesPerSecond: Int? = nil, scratch: String
    ) throws -> (rate: Double, dropped: Int) {
        let spool = try makeSpool(scratch: scratch)
        defer { try? FileManager.default.removeItem(atPath: spool.directory) }
        let writer =
            linesPerSecond.map { SpoolLogWriter(spool: spool, linesPerSecond: $0) } ?? SpoolLogWriter(spool: spool)
        let logger = Logger(label: "bench") { label in SpoolLogHandler(label: label, writer: writer) }
        // "2026-11-21T10:00:00.000Z info bench: " is 37 bytes; the message makes it 200. Each
        // message is distinct (thread and count in front): the writer folds repeats of one
        // message into a count, and a benchmark of identical lines measures only that.
        let filler = String(repeating: "m", count: 163 - 12)
        let threads = 2
        settleDisk()
        let start = monotonicNanoseconds()
        onThreads(threads) { thread in
            for index in 0..<lines / threads {
                let tag = String(thread * 1_000_000_000 + index)
                logger.info("\(String(repeating: "0", count: max(0, 12 - tag.count)))\(tag)\(filler)")
            }
        }
        writer.flush()
        let elapsed = monotonicNanoseconds() - start
        return (Double(spool.appendedLines) * 1e9 / Double(elapsed), writer.droppedLines)
    }
}
