import Foundation
import Logging
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
            directory: scratch + "/spool-\(UUID().uuidString)", configuration: configuration,
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
    public static func logHandler(lines: Int, scratch: String) throws -> (rate: Double, dropped: Int) {
        let spool = try makeSpool(scratch: scratch)
        defer { try? FileManager.default.removeItem(atPath: spool.directory) }
        let writer = SpoolLogWriter(spool: spool)
        let logger = Logger(label: "bench") { label in SpoolLogHandler(label: label, writer: writer) }
        // "2026-11-21T10:00:00.000Z info bench: " is 37 bytes; the message makes it 200.
        let message = Logger.Message(stringLiteral: String(repeating: "m", count: 163))
        let threads = 2
        settleDisk()
        let start = monotonicNanoseconds()
        onThreads(threads) { _ in
            for _ in 0..<lines / threads { logger.info(message) }
        }
        writer.flush()
        let elapsed = monotonicNanoseconds() - start
        return (Double(spool.appendedLines) * 1e9 / Double(elapsed), writer.droppedLines)
    }
}
