import Foundation
import Overtime
import OvertimeTestSupport
import Testing

@testable import OvertimeLogUploader

@Suite(
    "Checkpoint: two checksummed slots, damage detected, numbering never guessed", .blocksBriefly,
    .timeLimit(.minutes(3))
)
struct CheckpointTests {
    private let stream = StreamID(bytes: Array(0..<16))

    private func record(_ generation: UInt64, segment: UInt64, sequence: UInt64) -> CheckpointRecord {
        CheckpointRecord(
            generation: generation, stream: stream, checkpoint: Checkpoint(segment: segment, sequence: sequence))
    }

    // MARK: The pure part: what a file's bytes can be trusted for

    @Test func bothSlotsValidTheNewerGenerationWins() {
        var file = CheckpointFormat.encodeFile(record(4, segment: 9, sequence: 900))
        // A crash between the two slot writes: A holds generation 5, B still 4.
        file.replaceSubrange(0..<64, with: CheckpointFormat.encodeSlot(record(5, segment: 10, sequence: 1000)))
        #expect(CheckpointFormat.read(file) == .valid(record(5, segment: 10, sequence: 1000)))
    }

    @Test func everySingleBitFlipInASlotIsCaughtAndTheOtherSlotUsed() {
        let good = record(7, segment: 9, sequence: 912)
        let file = CheckpointFormat.encodeFile(good)
        for slot in 0..<2 {
            for bit in 0..<(56 * 8) {
                var damaged = file
                damaged[slot * 4096 + bit / 8] ^= UInt8(1 << (bit % 8))
                #expect(
                    CheckpointFormat.read(damaged) == .partlyDamaged(good, problem: "slot \(slot) fails its checksum"))
            }
        }
    }

    /// A file cut short (or grown) still holds whole slots: every intact one is used,
    /// wherever the cut falls.
    @Test func aSlotIntactInATruncatedOrGrownFileIsUsed() {
        let good = record(7, segment: 9, sequence: 912)
        let file = CheckpointFormat.encodeFile(good)
        for length in [64, 100, 4095, 4096, 4159] {
            guard case .partlyDamaged(let used, let problem) = CheckpointFormat.read(Array(file.prefix(length))) else {
                Issue.record("cut to \(length) bytes: slot A is intact and must be used")
                continue
            }
            #expect(used == good)
            #expect(problem.contains("\(length) bytes") && problem.contains("slot 1 is missing"))
        }
        guard case .partlyDamaged(let used, _) = CheckpointFormat.read(Array(file.prefix(4160))) else {
            Issue.record("both slots whole in a short file")
            return
        }
        #expect(used == good)
        guard case .partlyDamaged(let grown, _) = CheckpointFormat.read(file + [0, 0, 0]) else {
            Issue.record("grown")
            return
        }
        #expect(grown == good)
        guard case .damaged = CheckpointFormat.read(Array(file.prefix(63))) else {
            Issue.record("no whole slot"); return
        }
    }

    @Test func bothSlotsDamagedEmptyOrLegacyAreNeverTrusted() {
        var file = CheckpointFormat.encodeFile(record(3, segment: 2, sequence: 200))
        file[40] ^= 1
        file[4096 + 33] ^= 0x80
        guard case .damaged = CheckpointFormat.read(file) else { Issue.record("both slots damaged"); return }
        guard case .damaged = CheckpointFormat.read([]) else { Issue.record("empty file"); return }
        guard case .damaged(let reason) = CheckpointFormat.read(Array("segment=9\nsequence=912\n".utf8)) else {
            Issue.record("legacy text"); return
        }
        #expect(reason.contains("text format"))
    }

    // MARK: The spool on top of it

    private func filledSpool(_ folder: TemporaryDirectory, segments: Int) throws -> Spool {
        var options = SpoolConfiguration()
        options.segmentBytes = 4096
        let spool = try Spool(directory: folder.path, configuration: options, clock: SystemClock())
        for chunk in 0..<(segments * 4) {
            try spool.append((0..<10).map { Array("line \(chunk) \($0) \(String(repeating: "x", count: 80))".utf8) })
        }
        try spool.sealActiveSegment()
        return spool
    }

    private func damage(_ folder: TemporaryDirectory, _ change: (inout [UInt8]) -> Void) throws {
        let url = URL(fileURLWithPath: folder.path + "/checkpoint")
        var bytes = Array(try Data(contentsOf: url))
        change(&bytes)
        try Data(bytes).write(to: url)
    }

    @Test func aTruncatedCheckpointOnAnUploadedSpoolStartsANewStreamSoNoNameIsReused() throws {
        let folder = TemporaryDirectory()
        defer { folder.remove() }
        var spool: Spool! = try filledSpool(folder, segments: 3)
        let first = spool.streamID
        let uploaded = spool.sealedSegments
        try spool.acknowledge(uploaded)
        spool = nil
        try damage(folder) { $0 = [] }
        let reopened = try Spool(directory: folder.path, clock: SystemClock())
        #expect(reopened.recovery.startedNewStream)
        #expect(reopened.recovery.checkpointDamage != nil)
        #expect(!reopened.recovery.isClean)
        #expect(reopened.streamID != first, "a new stream: segment names and sequences cannot collide")
        try reopened.append("after the damage")
        try reopened.sealActiveSegment()
        let next = try #require(reopened.sealedSegments.first)
        #expect(!uploaded.map(\.name).contains(next.name))
        // The damaged file is kept for the operator, not deleted.
        #expect(FileManager.default.fileExists(atPath: folder.path + "/quarantine/checkpoint"))
    }

    /// A checkpoint deleted from a spool that was drained (nothing pending, so nothing
    /// else shows the spool was used) is a stream change, and is reported as one.
    @Test func aCheckpointDeletedFromADrainedSpoolIsReportedAsANewStream() throws {
        let folder = TemporaryDirectory()
        defer { folder.remove() }
        var spool: Spool! = try filledSpool(folder, segments: 2)
        let first = spool.streamID
        try spool.acknowledge(spool.sealedSegments)
        #expect(spool.pendingLines == 0)
        spool = nil
        #expect(unlink(folder.path + "/checkpoint") == 0)
        let logs = LogCapture()
        let reopened = try Spool(directory: folder.path, clock: SystemClock(), logger: logs.logger)
        #expect(reopened.recovery.startedNewStream)
        #expect(reopened.recovery.checkpointDamage?.contains("missing") == true)
        #expect(!reopened.recovery.isClean)
        #expect(reopened.streamID != first)
        #expect(logs.messages(at: .critical).contains { $0.message.contains("started a new stream") })
        // A brand-new spool is not reported.
        let fresh = TemporaryDirectory()
        defer { fresh.remove() }
        let freshLogs = LogCapture()
        let new = try Spool(directory: fresh.path, clock: SystemClock(), logger: freshLogs.logger)
        #expect(new.recovery.isClean && !new.recovery.startedNewStream)
        #expect(freshLogs.messages(at: .critical).isEmpty)
    }

    /// One damaged slot — a flipped bit in slot A, or the file cut short after slot A —
    /// keeps the stream and its numbering; the damage is reported and nothing pending is
    /// deleted, and the next acknowledgement makes the file whole again.
    @Test(arguments: [false, true])
    func oneDamagedSlotKeepsTheStreamAndTheNumbering(truncated: Bool) throws {
        let folder = TemporaryDirectory()
        defer { folder.remove() }
        var spool: Spool! = try filledSpool(folder, segments: 3)
        let stream = spool.streamID
        try spool.acknowledge(Array(spool.sealedSegments.prefix(2)))
        let checkpoint = spool.checkpoint
        let pending = spool.sealedSegments
        spool = nil
        if truncated {
            try damage(folder) { $0 = Array($0.prefix(4096)) }
        } else {
            try damage(folder) { $0[33] ^= 0x04 }  // a bit of slot A's segment number
        }
        let reopened = try Spool(directory: folder.path, clock: SystemClock())
        #expect(!reopened.recovery.startedNewStream)
        #expect(reopened.streamID == stream)
        #expect(reopened.checkpoint == checkpoint)
        #expect(reopened.sealedSegments.map(\.name) == pending.map(\.name), "nothing pending deleted")
        #expect(
            reopened.recovery.checkpointDamage?.contains(truncated ? "4096 bytes" : "slot 0 fails its checksum") == true
        )
        try reopened.acknowledge(reopened.sealedSegments)
        #expect(SpoolFiles.disk.size(folder.path + "/checkpoint") == CheckpointFormat.fileSize)
    }

    @Test func bothSlotsDamagedNeverDeletesAPendingSegmentAndSendsThemUnderTheirOwnNames() throws {
        let folder = TemporaryDirectory()
        defer { folder.remove() }
        var spool: Spool! = try filledSpool(folder, segments: 4)
        try spool.acknowledge(Array(spool.sealedSegments.prefix(1)))
        let pending = spool.sealedSegments
        let lines = spool.pendingLines
        spool = nil
        // Flips that, without a checksum, would raise the segment number past pending segments.
        try damage(folder) {
            $0[32] ^= 0x08
            $0[4096 + 32] ^= 0x08
        }
        let reopened = try Spool(directory: folder.path, clock: SystemClock())
        #expect(reopened.recovery.startedNewStream)
        #expect(reopened.pendingLines == lines)
        #expect(reopened.sealedSegments.map(\.name) == pending.map(\.name))
        #expect(reopened.recovery.resendSegments == pending.count)
        // Acknowledging them deletes them without touching the new stream's numbering.
        try reopened.acknowledge(reopened.sealedSegments)
        #expect(reopened.pendingLines == 0)
        #expect(reopened.checkpoint == Checkpoint(segment: 0, sequence: 0))
        #expect(try reopened.append("first of the new stream") == 1)
    }

    @Test func deadLettersAreRedrivenUnderTheirOwnNamesAndSurviveARestart() throws {
        let folder = TemporaryDirectory()
        defer { folder.remove() }
        var spool: Spool! = try filledSpool(folder, segments: 3)
        let refused = spool.sealedSegments
        for segment in refused { try spool.deadLetter(segment, reason: "test") }
        #expect(spool.pendingLines == 0)
        #expect(spool.deadLetterCount == refused.count)
        #expect(try spool.redriveDeadLetters() == refused.count)
        #expect(spool.deadLetterCount == 0)
        #expect(spool.sealedSegments.map(\.name) == refused.map(\.name))
        spool = nil
        // Queued again before a restart: still queued after it (not deleted as acknowledged).
        let reopened = try Spool(directory: folder.path, clock: SystemClock())
        #expect(reopened.sealedSegments.map(\.name) == refused.map(\.name))
        #expect(reopened.sealedSegments.map(\.records) == refused.map(\.records))
    }

    @Test func theDirectorySinkNeverOverwritesADifferentSegment() async throws {
        let folder = TemporaryDirectory()
        defer { folder.remove() }
        let spool = try filledSpool(folder, segments: 1)
        let segment = try #require(spool.sealedSegments.first)
        let sink = DirectorySink(root: folder.path + "/collected")
        try await sink.store(segment)
        try await sink.store(segment)  // the same bytes again: stored, idempotent
        let target = folder.path + "/collected/" + segment.name
        try Data("someone else's data".utf8).write(to: URL(fileURLWithPath: target))
        do {
            try await sink.store(segment)
            Issue.record("a different file was overwritten")
        } catch {
            guard error.code == .permanent else { Issue.record("\(error)"); return }
            #expect(error.reason.contains("not overwritten"))
        }
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "someone else's data")
        let leftovers = try FileManager.default.contentsOfDirectory(
            atPath: folder.path + "/collected/\(segment.stream)")
        #expect(leftovers == [segment.name.split(separator: "/").last.map(String.init)!], "no temporary files left")
    }
}
