import Dispatch
import Foundation
import Logging
import OvertimeTestSupport
import Testing

@testable import OvertimeLogUploader

@Suite("SpoolLogHandler: swift-log into the spool", .timeLimit(.minutes(1)))
struct SpoolLogHandlerTests {
    @Test func linesFromManyThreadsLandInTheSpoolWithLevelLabelAndMetadata() throws {
        let folder = TemporaryDirectory("handler")
        defer { folder.remove() }
        let spool = try Spool(directory: folder.path)
        let writer = SpoolLogWriter(spool: spool)
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            var logger = Logger(label: "worker") { SpoolLogHandler(label: $0, writer: writer) }
            logger[metadataKey: "thread"] = "\(thread)"
            for index in 0..<250 { logger.info("request \(index)\nsecond line", metadata: ["index": "\(index)"]) }
            logger.debug("below the level: not written")
        }
        writer.flush()
        try spool.sealActiveSegment()
        let lines = try spool.sealedSegments.flatMap {
            SegmentFormat.parse(Array(try Data(contentsOf: URL(fileURLWithPath: $0.path)))).records
        }.map(\.text)
        #expect(lines.count == 1000)
        #expect(writer.droppedLines == 0)
        let sample = try #require(lines.first { $0.contains("thread=2") && $0.contains("index=7 ") })
        #expect(sample.contains(" info worker: request 7 second line index=7 thread=2"))
        #expect(sample.hasPrefix("20") && sample.dropFirst(10).hasPrefix("T"))  // ISO 8601, UTC
        #expect(!lines.contains { $0.contains("below the level") })
    }
}
