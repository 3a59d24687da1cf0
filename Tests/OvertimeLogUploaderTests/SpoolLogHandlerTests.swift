import Dispatch
import Foundation
import Logging
import Overtime
import OvertimeSupport
import OvertimeTestSupport
import OvertimeTesting
import Testing

@testable import OvertimeLogUploader

@Suite("SpoolLogHandler: swift-log into the spool", .blocksBriefly, .timeLimit(.minutes(3)))
struct SpoolLogHandlerTests {
    /// Every line in `spool`, its active segment sealed first.
    private static func spooledLines(_ spool: Spool) throws -> [String] {
        try spool.sealActiveSegment()
        return try spool.sealedSegments.flatMap { try $0.readRecords() }.map(\.text)
    }

    @Test func linesFromManyThreadsLandInTheSpoolWithLevelLabelAndMetadata() throws {
        let folder = TemporaryDirectory("handler")
        defer { folder.remove() }
        let spool = try Spool(directory: folder.path, clock: SystemClock())
        let writer = SpoolLogWriter(spool: spool, linesPerSecond: 100_000)
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            var logger = Logger(label: "worker") { SpoolLogHandler(label: $0, writer: writer) }
            logger[metadataKey: "thread"] = "\(thread)"
            for index in 0..<250 { logger.info("request \(index)\nsecond line", metadata: ["index": "\(index)"]) }
            logger.debug("below the level: not written")
        }
        writer.flush()
        let lines = try Self.spooledLines(spool)
        #expect(lines.count == 1000)
        #expect(writer.droppedLines == 0)
        let sample = try #require(lines.first { $0.contains("thread=2") && $0.contains("index=7 ") })
        #expect(sample.contains(" info worker: request 7 second line index=7 thread=2"))
        #expect(sample.hasPrefix("20") && sample.dropFirst(10).hasPrefix("T"))  // ISO 8601, UTC
        #expect(!lines.contains { $0.contains("below the level") })
    }

    /// A program's own log cannot flood its spool: the same message again is counted and
    /// said once with the count; lines beyond the rate are counted and said when lines are
    /// allowed again; none of it silently.
    @Test func repeatsAreCountedAndTheRateIsCapped() throws {
        let folder = TemporaryDirectory("handler-flood")
        defer { folder.remove() }
        let clock = ManualClock()
        let spool = try Spool(directory: folder.path, clock: clock)
        let writer = SpoolLogWriter(spool: spool, linesPerSecond: 10)
        let logger = Logger(label: "daemon") { SpoolLogHandler(label: $0, writer: writer) }
        for _ in 0..<10_000 { logger.notice("received SIGUSR1: background") }
        logger.notice("something else")
        for index in 0..<50 { logger.info("distinct \(index)") }  // beyond 10 a second
        clock.advance(by: .seconds(5))
        logger.info("later")
        writer.flush()
        let lines = try Self.spooledLines(spool)
        #expect(lines.filter { $0.contains("received SIGUSR1") }.count == 1)
        // Stamped and levelled as every other line.
        let repeated = lines.first { $0.contains("the previous log message repeated 9999 more times") }
        #expect(repeated?.contains(" notice overtime: the previous") == true, "\(lines)")
        #expect(repeated?.first?.isNumber == true, "starts with its time: \(repeated ?? "")")
        let limited = lines.first { $0.contains("log lines not spooled: more than the rate allowed") }
        #expect(
            limited?.contains(" notice overtime: 42 log lines") == true,
            "10 a second: 8 of 50 after two lines: \(lines)")
        #expect(lines.last?.contains("later") == true || lines.contains { $0.contains("later") })
        #expect(lines.count < 20, "\(lines.count) lines")
    }

    /// One repeat is "1 more time".
    @Test func oneRepeatIsOneMoreTime() throws {
        let folder = TemporaryDirectory("handler-once")
        defer { folder.remove() }
        let spool = try Spool(directory: folder.path, clock: ManualClock())
        let writer = SpoolLogWriter(spool: spool)
        let logger = Logger(label: "daemon") { SpoolLogHandler(label: $0, writer: writer) }
        logger.notice("twice")
        logger.notice("twice")
        logger.notice("then another")
        writer.flush()
        let lines = try Self.spooledLines(spool)
        #expect(lines.contains { $0.hasSuffix("the previous log message repeated 1 more time") }, "\(lines)")
    }

    /// After ``SpoolLogWriter/stopSpooling()`` lines are not spooled; those before are.
    @Test func aStoppedWriterSpoolsWhatCameBeforeOnly() throws {
        let folder = TemporaryDirectory("handler-stop")
        defer { folder.remove() }
        let spool = try Spool(directory: folder.path, clock: SystemClock())
        let writer = SpoolLogWriter(spool: spool)
        let logger = Logger(label: "daemon") { SpoolLogHandler(label: $0, writer: writer) }
        logger.notice("received SIGTERM")
        writer.stopSpooling()
        logger.notice("stopping: uploads left")
        writer.flush()
        let lines = try Self.spooledLines(spool)
        #expect(lines.count == 1 && lines[0].contains("received SIGTERM"), "\(lines)")
    }

    /// A daemon that bootstraps swift-log first logs the spool's own failures through the
    /// spool: each failed write would report itself into the next write, for ever.
    @Test func theSpoolsReportOfItsOwnFailedWriteIsNotWrittenBackIntoIt() throws {
        let memory = InMemorySpoolVolume()
        let writerBox = Locked<SpoolLogWriter?>(nil)
        let logs = LogCapture()
        let spool = try Spool(
            directory: "/spool", clock: ManualClock(), storage: .memory(memory),
            logger: logs.logger(label: "overtime.spool") { event in
                guard let writer = writerBox.withLock({ $0 }) else { return }
                SpoolLogHandler(label: "overtime.spool", writer: writer).log(event: event)
            })
        let writer = SpoolLogWriter(spool: spool)
        writerBox.withLock { $0 = writer }
        // The disk is full: every write fails until there is room again.
        memory.capacityBytes = memory.usedBytes
        writer.submit(Array("the first line".utf8))
        // A flush returns once every line submitted before it is written (or failed) and the
        // writer is idle: a report written back would be one more line failing in turn, and
        // the flush would not return.
        writer.flush()
        let failures = logs.entries.all.filter { $0.message.hasPrefix("spool write failed") }
        #expect(failures.count == 1, "\(failures.count) failure reports")
        memory.capacityBytes = .max
        writer.submit(Array("after there is room again".utf8))
        writer.flush()
        let lines = try Self.spooledLines(spool)
        #expect(lines == ["after there is room again"])
    }
}
