import Dispatch
import Foundation
import Overtime
import OvertimeTestSupport
import Testing

@testable import OvertimeLogUploader

@Suite("Spool: durable segments, recovery, checkpoint, quota", .timeLimit(.minutes(3)))
struct SpoolTests {
    private let padding = String(repeating: "p", count: 100)

    private func configuration(segmentBytes: Int = 4096, quota: Int = 1 << 20) -> SpoolConfiguration {
        var configuration = SpoolConfiguration()
        configuration.segmentBytes = segmentBytes
        configuration.quotaBytes = max(quota, 2 * segmentBytes)
        return configuration
    }

    private func readAll(_ spool: Spool) throws -> [SpoolRecord] {
        try spool.sealActiveSegment()
        return try spool.sealedSegments.flatMap { segment in
            SegmentFormat.parse(Array(try Data(contentsOf: URL(fileURLWithPath: segment.path)))).records
        }
    }

    @Test func appendedLinesComeBackInOrderWithTheirSequencesAndStream() throws {
        let folder = TemporaryDirectory()
        defer { folder.remove() }
        let spool = try Spool(directory: folder.path, configuration: configuration(), clock: SystemClock())
        for chunk in 0..<10 {
            // One append's lines share a batch, and a batch one segment: append in chunks.
            let range = try spool.append((0..<10).map { Array("line \(chunk * 10 + $0) \(padding)".utf8) })
            #expect(range == UInt64(chunk * 10 + 1)...UInt64(chunk * 10 + 10))
        }
        #expect(try spool.append("one more") == 101)
        let records = try readAll(spool)
        #expect(records.map(\.sequence) == Array(1...101))
        #expect(records.first?.text == "line 0 \(padding)" && records.last?.text == "one more")
        #expect(spool.sealedSegments.count > 1)  // 4 KiB segments rotate
        for segment in spool.sealedSegments {
            let parsed = SegmentFormat.parse(Array(try Data(contentsOf: URL(fileURLWithPath: segment.path))))
            #expect(parsed.streamID == spool.streamID && parsed.segment == segment.number && parsed.problem == nil)
            #expect(segment.name == "\(spool.streamID)/\(SegmentName.padded(segment.number)).log")
        }
    }

    @Test func concurrentWritersAreGroupCommittedWithoutGapsOrDuplicates() throws {
        let folder = TemporaryDirectory()
        defer { folder.remove() }
        let spool = try Spool(
            directory: folder.path, configuration: configuration(segmentBytes: 64 * 1024), clock: SystemClock())
        DispatchQueue.concurrentPerform(iterations: 4) { writer in
            for index in 0..<500 { _ = try? spool.append("writer \(writer) line \(index)") }
        }
        let records = try readAll(spool)
        #expect(records.map(\.sequence) == Array(1...2000))
        for writer in 0..<4 {
            let mine = records.filter { $0.text.hasPrefix("writer \(writer) ") }.map(\.text)
            #expect(mine == (0..<500).map { "writer \(writer) line \($0)" })
        }
    }

    @Test func severalSegmentsAcknowledgedAtOnceShareOneCheckpoint() throws {
        let folder = TemporaryDirectory()
        defer { folder.remove() }
        var spool: Spool! = try Spool(directory: folder.path, configuration: configuration(), clock: SystemClock())
        for chunk in 0..<10 { try spool.append((0..<10).map { Array("line \(chunk) \($0) \(padding)".utf8) }) }
        try spool.sealActiveSegment()
        let segments = spool.sealedSegments
        try #require(segments.count >= 3)
        try spool.acknowledge(Array(segments.prefix(2)))
        #expect(spool.checkpointWrites == 1)
        #expect(spool.checkpoint == Checkpoint(segment: segments[1].number, sequence: segments[1].lastSequence))
        #expect(spool.sealedSegments == Array(segments.dropFirst(2)))
        #expect(!FileManager.default.fileExists(atPath: segments[0].path))
        #expect(!FileManager.default.fileExists(atPath: segments[1].path))
        // After a restart the checkpoint is the one written.
        let written = spool.checkpoint
        spool = nil
        let reopened = try Spool(directory: folder.path, configuration: configuration(), clock: SystemClock())
        #expect(reopened.checkpoint == written)
        #expect(reopened.sealedSegments.map(\.number) == segments.dropFirst(2).map(\.number))
    }

    @Test func aTornTailIsCutBackToTheLastValidRecordAndReported() throws {
        let folder = TemporaryDirectory()
        defer { folder.remove() }
        var spool: Spool? = try Spool(
            directory: folder.path, configuration: configuration(segmentBytes: 1 << 20), clock: SystemClock())
        try spool!.append((1...10).map { Array("kept \($0)".utf8) })
        let open = try #require(folder.files(in: "segments").first { $0.hasSuffix(".open") })
        let path = folder.path + "/segments/" + open
        // A crash in the middle of writing the eleventh record: half a frame on disk.
        let handle = try #require(FileHandle(forWritingAtPath: path))
        handle.seekToEndOfFile()
        handle.write(Data([40, 0, 0, 0, 1, 2, 3, 4, 11, 0]))
        handle.closeFile()
        spool = nil
        let reopened = try Spool(
            directory: folder.path, configuration: configuration(segmentBytes: 1 << 20), clock: SystemClock())
        let truncation = try #require(reopened.recovery.truncations.first)
        #expect(truncation.keptRecords == 10 && truncation.droppedBytes == 10)
        #expect(truncation.problem.contains("torn record"))
        #expect(try reopened.append("after restart") == 11)
        #expect(try readAll(reopened).map(\.text) == (1...10).map { "kept \($0)" } + ["after restart"])
    }

    @Test func aFlippedBitKeepsEveryValidRecordBeforeIt() throws {
        let folder = TemporaryDirectory()
        defer { folder.remove() }
        var spool: Spool? = try Spool(
            directory: folder.path, configuration: configuration(segmentBytes: 1 << 20), clock: SystemClock())
        try spool!.append((1...20).map { Array(String(format: "record %02d", $0).utf8) })
        try spool!.sealActiveSegment()
        let segment = try #require(spool!.sealedSegments.first)
        spool = nil
        var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: segment.path)))
        let at = try #require(bytes.indices.first { Array(bytes[$0..<($0 + 9)]) == Array("record 08".utf8) })
        bytes[at + 7] ^= 0x04  // one bit in record 8
        try Data(bytes).write(to: URL(fileURLWithPath: segment.path))
        let reopened = try Spool(
            directory: folder.path, configuration: configuration(segmentBytes: 1 << 20), clock: SystemClock())
        let truncation = try #require(reopened.recovery.truncations.first)
        #expect(truncation.keptRecords == 7)
        #expect(truncation.problem.contains("checksum mismatch"))
        #expect(try readAll(reopened).map(\.sequence) == Array(1...7))
        // Sequences never go back: 8 to 20 may have reached a collector before the crash.
        #expect(try reopened.append("next") > 20)
    }

    @Test func theCheckpointMovesOnAcknowledgeAndSurvivesACrashBeforeTheDelete() throws {
        let folder = TemporaryDirectory()
        defer { folder.remove() }
        var spool: Spool? = try Spool(directory: folder.path, configuration: configuration(), clock: SystemClock())
        for chunk in 0..<20 { try spool!.append((1...10).map { Array("line \(chunk * 10 + $0) \(padding)".utf8) }) }
        try spool!.sealActiveSegment()
        let segments = spool!.sealedSegments
        #expect(segments.count >= 3)
        try spool!.acknowledge(segments[0])
        #expect(spool!.checkpoint == Checkpoint(segment: segments[0].number, sequence: segments[0].lastSequence))
        #expect(!FileManager.default.fileExists(atPath: segments[0].path))
        let stored = CheckpointFormat.read(
            Array(try Data(contentsOf: URL(fileURLWithPath: folder.path + "/checkpoint"))))
        guard case .valid(let record) = stored else { Issue.record("checkpoint: \(stored)"); return }
        #expect(record.checkpoint == spool!.checkpoint && record.stream == spool!.streamID)
        // A crash after the checkpoint moved past segment 2 but before its file was deleted.
        let moved = CheckpointRecord(
            generation: record.generation + 1, stream: record.stream,
            checkpoint: Checkpoint(segment: segments[1].number, sequence: segments[1].lastSequence))
        try Data(CheckpointFormat.encodeFile(moved)).write(to: URL(fileURLWithPath: folder.path + "/checkpoint"))
        spool = nil
        let reopened = try Spool(directory: folder.path, configuration: configuration(), clock: SystemClock())
        #expect(reopened.recovery.removedAcknowledged == 1)
        #expect(reopened.sealedSegments.map(\.number) == segments.dropFirst(2).map(\.number))
        #expect(try reopened.append("continues") == 201)
    }

    /// Recovery takes a segment the checkpoint has passed for stored and deletes it: a
    /// refused segment that cannot be moved aside must not be passed.
    @Test func aDeadLetterThatCannotBeMovedStaysQueuedAndTheCheckpointStaysBehindIt() throws {
        let folder = TemporaryDirectory()
        defer { folder.remove() }
        var spool: Spool? = try Spool(directory: folder.path, configuration: configuration(), clock: SystemClock())
        for chunk in 0..<10 { try spool!.append((1...10).map { Array("line \(chunk * 10 + $0) \(padding)".utf8) }) }
        try spool!.sealActiveSegment()
        let refused = try #require(spool!.sealedSegments.first)
        let before = spool!.checkpoint
        // The dead-letter folder is a file now: the move fails (ENOTDIR).
        try FileManager.default.removeItem(atPath: folder.path + "/dead-letter")
        try Data("not a folder".utf8).write(to: URL(fileURLWithPath: folder.path + "/dead-letter"))
        #expect(throws: SpoolError.self) { try spool!.deadLetter(refused, reason: "refused for good") }
        #expect(spool!.checkpoint == before)
        #expect(spool!.sealedSegments.first?.path == refused.path)
        spool = nil
        try FileManager.default.removeItem(atPath: folder.path + "/dead-letter")
        let reopened = try Spool(directory: folder.path, configuration: configuration(), clock: SystemClock())
        let records = try readAll(reopened)
        #expect(records.count == 100, "every line is still there after a restart")
        // Once it can be moved, it is: out of the queue, into the folder, the checkpoint past it.
        let again = try #require(reopened.sealedSegments.first { $0.number == refused.number })
        try reopened.deadLetter(again, reason: "refused for good")
        #expect(reopened.deadLetterCount == 1)
        #expect(!reopened.sealedSegments.contains { $0.number == refused.number })
        #expect(reopened.checkpoint.segment >= refused.number)
    }

    @Test func dropOldestQuotaDeletesWholeSegmentsAndCountsTheLines() throws {
        let folder = TemporaryDirectory()
        defer { folder.remove() }
        let spool = try Spool(
            directory: folder.path, configuration: configuration(segmentBytes: 4096, quota: 8192), clock: SystemClock())
        for index in 0..<400 { try spool.append("line \(index) " + String(repeating: "x", count: 40)) }
        #expect(spool.droppedLines > 0)
        let kept = try readAll(spool)
        #expect(kept.count + spool.droppedLines == 400)
        #expect(kept.last?.sequence == 400)  // the newest lines are the ones kept
        let stored = spool.sealedSegments.reduce(0) { $0 + $1.bytes }
        #expect(stored <= 8192)
    }

    @Test func blockWriterQuotaWaitsThenFailsClearlyAndResumesAfterAnAcknowledge() throws {
        let folder = TemporaryDirectory()
        defer { folder.remove() }
        var options = configuration(segmentBytes: 4096, quota: 8192)
        options.quotaPolicy = .blockWriter(timeout: .milliseconds(100))
        let spool = try Spool(directory: folder.path, configuration: options, clock: SystemClock())
        var failure: SpoolError?
        for index in 0..<400 {
            do throws(SpoolError) {
                try spool.append("line \(index) " + String(repeating: "x", count: 40))
            } catch {
                failure = error
                break
            }
        }
        guard case .quotaExceeded(let quota, _) = failure else {
            Issue.record("expected quotaExceeded, got \(String(describing: failure))")
            return
        }
        #expect(quota == 8192)
        #expect(spool.droppedLines == 0)
        try spool.acknowledge(try #require(spool.sealedSegments.first))
        #expect(try spool.append("fits again") > 0)
    }

    @Test func badInputGetsClearErrorsAndStoresNothing() throws {
        let folder = TemporaryDirectory()
        defer { folder.remove() }
        let spool = try Spool(directory: folder.path, configuration: configuration(), clock: SystemClock())
        #expect(throws: SpoolError.lineTooLong(bytes: SegmentFormat.maximumLineBytes + 1)) {
            try spool.append([[UInt8](repeating: 65, count: SegmentFormat.maximumLineBytes + 1), Array("ok".utf8)])
        }
        #expect(try spool.append("first") == 1)
        var options = SpoolConfiguration()
        options.quotaBytes = 100
        #expect(throws: SpoolError.self) {
            try Spool(directory: folder.path + "-2", configuration: options, clock: SystemClock())
        }
        // A second opener of a spool in use is refused at once, naming the holder.
        #expect(throws: SpoolError.locked(path: folder.path, holder: getpid())) {
            try Spool(directory: folder.path, configuration: configuration(), clock: SystemClock())
        }
    }

    /// The segment being written when the process died, cut anywhere inside its last
    /// append — at a record boundary too — keeps every whole append and none of the cut
    /// one: a batch is stored whole or not at all.
    @Test func anAppendCutShortByACrashIsDroppedWhole() throws {
        for cutRecords in [1, 2, 3] {
            for midRecord in [false, true] {
                let folder = TemporaryDirectory("atomic")
                defer { folder.remove() }
                do {
                    let spool = try Spool(directory: folder.path, configuration: configuration(), clock: SystemClock())
                    try spool.append((1...3).map { "first \($0)" }.map { Array($0.utf8) })
                    try spool.append((1...4).map { "second \($0)" }.map { Array($0.utf8) })
                }
                let open = try #require(
                    FileManager.default.contentsOfDirectory(atPath: folder.path + "/segments").first {
                        $0.hasSuffix(".open")
                    })
                let path = folder.path + "/segments/" + open
                let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
                // The second append's last `cutRecords` records are lost, or half of the first of them.
                let records = SegmentFormat.parse(bytes).records
                let kept = records.dropLast(cutRecords)
                var length = kept.reduce(SegmentFormat.headerSize) {
                    $0 + SegmentFormat.frameSize + SegmentFormat.bodyPrefixSize + $1.line.count
                }
                if midRecord { length += 10 }
                try Data(bytes.prefix(length)).write(to: URL(fileURLWithPath: path))
                let reopened = try Spool(directory: folder.path, configuration: configuration(), clock: SystemClock())
                let texts = try reopened.sealedSegments.flatMap {
                    SegmentFormat.parse(Array(try Data(contentsOf: URL(fileURLWithPath: $0.path)))).records
                }.map(\.text)
                #expect(
                    texts == ["first 1", "first 2", "first 3"], "cut \(cutRecords) records, mid-record \(midRecord)")
                #expect(!reopened.recovery.isClean)
                #expect(try reopened.append("next") == 4, "the dropped append's numbers are given out again")
            }
        }
    }

    /// Damage inside the segment being written — bits flipped, the file cut, ranges zeroed —
    /// never costs an intact record of an append that was completed: a later record ending
    /// an append is intact, so no crash cut it. (One 400-record append lost whole to a bit
    /// flip at byte 31,822, 207 of its records intact, before.) What a cut takes is the
    /// append it cut, whole; every record read back is one that was written.
    @Test(
        .notUnderThreadSanitizer(
            "120 spools written, damaged and recovered one after another on one thread: nothing shared; under ThreadSanitizer it held one of Swift Testing's two shared threads for over a minute"
        ))
    func damageInTheOpenSegmentCostsNoIntactRecordOfACompletedAppend() throws {
        var random = SplitMix64(seed: 0x61_04)
        var trials: [(kind: String, detail: String)] = []
        for kind in ["flip", "cut", "zeroes"] {
            for _ in 0..<40 { trials.append((kind, "")) }
        }
        for (kind, _) in trials {
            let folder = TemporaryDirectory("open-damage")
            defer { folder.remove() }
            let appends = [400, 37, 120, 1, 80]
            do {
                let spool = try Spool(
                    directory: folder.path, configuration: configuration(segmentBytes: 1 << 22), clock: SystemClock())
                var number = 0
                for size in appends {
                    try spool.append(
                        (0..<size).map { _ in
                            number += 1
                            return Array("line \(number) ".utf8)
                                + Array(repeating: UInt8(ascii: "x"), count: number % 90)
                        })
                }
            }
            let open = try #require(folder.files(in: "segments").first { $0.hasSuffix(".open") })
            let path = folder.path + "/segments/" + open
            var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
            let written = SegmentFormat.parse(bytes).records
            #expect(written.count == appends.reduce(0, +))
            // Where each record lies in the file.
            var spans: [Range<Int>] = []
            var offset = SegmentFormat.headerSize
            for record in written {
                let end = offset + SegmentFormat.frameSize + SegmentFormat.bodyPrefixSize + record.line.count
                spans.append(offset..<end)
                offset = end
            }
            let body = SegmentFormat.headerSize..<bytes.count
            let damaged: Range<Int>
            switch kind {
            case "flip":
                let at = Int(random.next() % UInt64(body.count)) + body.lowerBound
                bytes[at] ^= UInt8(1 << (random.next() % 8))
                damaged = at..<(at + 1)
            case "cut":
                let at = Int(random.next() % UInt64(body.count)) + body.lowerBound
                damaged = at..<bytes.count
                bytes = Array(bytes[..<at])
            default:
                let at = Int(random.next() % UInt64(body.count)) + body.lowerBound
                let length = min(Int(random.next() % 300) + 1, bytes.count - at)
                for index in at..<(at + length) { bytes[index] = 0 }
                damaged = at..<(at + length)
            }
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            let reopened = try Spool(
                directory: folder.path, configuration: configuration(segmentBytes: 1 << 22), clock: SystemClock())
            let read = try readAll(reopened)
            let intact = { (index: Int) in !spans[index].overlaps(damaged) }
            // An append was completed, as far as the file can tell, when an intact record
            // that ends an append lies after the damage.
            let completedAfterDamage = written.indices.contains { index in
                intact(index) && spans[index].lowerBound >= damaged.upperBound && written[index].time & 1 == 1
            }
            var expected: [SpoolRecord] = []
            var firstOfAppend = 0
            for index in written.indices where written[index].time & 1 == 1 {
                let append = firstOfAppend...index
                firstOfAppend = index + 1
                let touched = append.contains { !intact($0) }
                let before = spans[append.upperBound].upperBound <= damaged.lowerBound
                if !touched && (before || completedAfterDamage) || touched && completedAfterDamage {
                    expected += append.filter(intact).map { written[$0] }
                }
            }
            let lost = Set(expected.map(\.sequence)).subtracting(read.map(\.sequence)).count
            #expect(lost == 0, "\(kind) at \(damaged): intact records of completed appends lost")
            let original = Dictionary(uniqueKeysWithValues: written.map { ($0.sequence, $0.line) })
            #expect(read.allSatisfy { original[$0.sequence] == $0.line }, "\(kind): a record read back was not written")
            #expect(zip(read, read.dropFirst()).allSatisfy { $0.sequence < $1.sequence })
        }
    }

    /// A spool folder is ours to take only when it is empty or a spool: a folder holding
    /// another program's files, or a symbolic link, is refused and left as it was.
    @Test func aFolderThatIsNotASpoolOrALinkIsRefusedAndLeftAsItWas() throws {
        let folder = TemporaryDirectory("foreign-spool")
        defer { folder.remove() }
        let theirs = folder.path + "/etc-like"
        try FileManager.default.createDirectory(atPath: theirs, withIntermediateDirectories: true)
        try Data("key=value\n".utf8).write(to: URL(fileURLWithPath: theirs + "/app.conf"))
        #expect(throws: SpoolError.self) { try Spool(directory: theirs, clock: SystemClock()) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: theirs) == ["app.conf"], "nothing added")
        let link = folder.path + "/link"
        #expect(symlink(folder.path + "/real", link) == 0)
        do {
            _ = try Spool(directory: link, clock: SystemClock())
            Issue.record("a spool opened through a symbolic link")
        } catch {
            #expect("\(error)".contains("symbolic link"))
        }
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/real"))
        // An empty folder and an existing spool open.
        try FileManager.default.createDirectory(atPath: folder.path + "/empty", withIntermediateDirectories: true)
        do { _ = try Spool(directory: folder.path + "/empty", clock: SystemClock()) }
        _ = try Spool(directory: folder.path + "/empty", clock: SystemClock())
    }

    @Test func theParserNeverTrapsOnArbitraryBytes() {
        var generator = SplitMix64(seed: 42)
        var valid: [UInt8] = SegmentFormat.header(streamID: StreamID.random(), segment: 1)
        for index in 0..<20 {
            SegmentFormat.appendRecord(sequence: UInt64(index), time: 0, line: Array("l\(index)".utf8), to: &valid)
        }
        for round in 0..<2000 {
            var bytes = valid
            switch round % 3 {
            case 0: bytes = Array(bytes.prefix(Int(generator.next() % UInt64(bytes.count + 1))))
            case 1:
                bytes[Int(generator.next() % UInt64(bytes.count))] ^= UInt8(truncatingIfNeeded: generator.next() | 1)
            default: bytes = (0..<Int(generator.next() % 300)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            }
            let parsed = SegmentFormat.parse(bytes)
            #expect(parsed.validLength <= bytes.count)
            #expect(parsed.records.count <= 20)
        }
    }
}
