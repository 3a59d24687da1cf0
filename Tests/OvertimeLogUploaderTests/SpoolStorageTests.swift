import Foundation
import Overtime
import OvertimeTestSupport
import OvertimeTesting
import Testing

@testable import OvertimeLogUploader

/// The spool keeps the same promises on either storage: what its tests on a volume in
/// memory show holds for the disk, and the other way round.
// Two minutes, not one: the guard counts the wait of Swift Testing's own steps on the threads
// every test shares (Tests/Support/ThreadSanitizer.swift).
@Suite("Spool storage: the same spool on disk and in memory", .timeLimit(.minutes(2)))
struct SpoolStorageTests {
    enum Place: String, CaseIterable, CustomTestStringConvertible {
        case disk, memory
        var testDescription: String { rawValue }
    }

    /// A folder on `place` for spools, and what opens one there.
    struct Volume {
        let storage: SpoolStorage
        let directory: String
        private let folder: TemporaryDirectory?

        init(_ place: Place) {
            switch place {
            case .disk:
                let folder = TemporaryDirectory("spool-storage")
                self.folder = folder
                storage = .disk
                directory = folder.path + "/spool"
            case .memory:
                folder = nil
                storage = .memory(InMemorySpoolVolume())
                directory = "/var/spool/test"
            }
        }

        func open(segmentBytes: Int = 4096, clock: any RuntimeClock = ManualClock()) throws(SpoolError) -> Spool {
            var configuration = SpoolConfiguration()
            configuration.segmentBytes = segmentBytes
            return try Spool(directory: directory, configuration: configuration, clock: clock, storage: storage)
        }

        /// Writes a file of someone else's onto the volume.
        func put(_ path: String, _ text: String) throws {
            let system = storage.files.system
            #expect(system.makeDirectories(parent(path)) == nil)
            let fd = try system.open(path, flags: O_WRONLY | O_CREAT | O_TRUNC).get()
            defer { system.close(fd) }
            #expect(system.write(fd, Array(text.utf8), at: nil) == 0)
        }

        func read(_ path: String) throws -> String {
            String(decoding: try storage.files.system.readAll(path).get(), as: UTF8.self)
        }

        private func parent(_ path: String) -> String { String(path[..<path.lastIndex(of: "/")!]) }

        func remove() { folder?.remove() }
    }

    private static func lines(_ range: ClosedRange<Int>) -> [[UInt8]] {
        range.map { Array("line \($0) \(String(repeating: "x", count: 80))".utf8) }
    }

    @Test(arguments: Place.allCases)
    func linesSurviveAReopenTheActiveSegmentIsSealedAndTheCheckpointHolds(_ place: Place) throws {
        let volume = Volume(place)
        defer { volume.remove() }
        var spool: Spool? = try volume.open()
        for chunk in 0..<10 { try spool!.append(Self.lines(chunk * 10 + 1...chunk * 10 + 10)) }
        try spool!.sealActiveSegment()
        let first = try #require(spool!.sealedSegments.first)
        try spool!.acknowledge(first)
        try spool!.append(Self.lines(101...103))  // left in the active segment
        let stream = spool!.streamID
        spool = nil

        let reopened = try volume.open()
        #expect(reopened.recovery.isClean)
        #expect(reopened.streamID == stream)
        #expect(reopened.checkpoint == Checkpoint(segment: first.number, sequence: first.lastSequence))
        let records = try reopened.sealedSegments.flatMap { try $0.readRecords() }
        #expect(records.map(\.sequence) == Array(first.lastSequence + 1...103))
        #expect(records.last?.text.hasPrefix("line 103 ") == true)
        #expect(try reopened.append("after the reopen") == 104)
    }

    @Test(arguments: Place.allCases)
    func aSecondOpenWhileHeldIsRefusedAndTheLockGoesWithTheSpool(_ place: Place) throws {
        let volume = Volume(place)
        defer { volume.remove() }
        var spool: Spool? = try volume.open()
        #expect {
            _ = try volume.open()
        } throws: { error in
            guard case SpoolError.locked(let path, _) = error else { return false }
            return path == volume.directory
        }
        #expect(spool != nil)
        spool = nil
        _ = try volume.open()
    }

    @Test(arguments: Place.allCases)
    func aDeadLetterLeavesTheQueueAndARedriveSendsItAgainFirst(_ place: Place) throws {
        let volume = Volume(place)
        defer { volume.remove() }
        let spool = try volume.open()
        for chunk in 0..<6 { try spool.append(Self.lines(chunk * 10 + 1...chunk * 10 + 10)) }
        try spool.sealActiveSegment()
        let refused = try #require(spool.sealedSegments.first)
        let bytes = try refused.readBytes()
        try spool.deadLetter(refused, reason: "413")
        #expect(spool.deadLetterCount == 1)
        #expect(!spool.sealedSegments.contains { $0.number == refused.number && !$0.mayAlreadyBeStored })
        #expect(try spool.redriveDeadLetters() == 1)
        let again = try #require(spool.sealedSegments.first)
        #expect(again.name == refused.name && again.mayAlreadyBeStored)
        #expect(try again.readBytes() == bytes, "sent again byte for byte")
        #expect(spool.deadLetterCount == 0)
    }

    @Test(arguments: Place.allCases)
    func aFolderThatIsNotASpoolIsRefusedAndLeftAsItWas(_ place: Place) throws {
        let volume = Volume(place)
        defer { volume.remove() }
        try volume.put(volume.directory + "/notes.txt", "someone else's")
        #expect {
            _ = try volume.open()
        } throws: { error in
            guard case SpoolError.invalidConfiguration(let field, let reason) = error else { return false }
            return field == "directory" && reason.contains("is not an Overtime spool")
        }
        #expect(try volume.read(volume.directory + "/notes.txt") == "someone else's")
        #expect(volume.storage.files.size(volume.directory + "/segments") == nil)
    }

    /// A full volume refuses an append whole: the lines already spooled stay, the refused
    /// ones take no number, and once there is room again lines are taken with no gap.
    @Test func aFullVolumeRefusesAnAppendWholeAndTakesLinesAgainOnceThereIsRoom() throws {
        let memory = InMemorySpoolVolume()
        let spool = try Spool(
            directory: "/spool", clock: ManualClock(), storage: .memory(memory))
        try spool.append(Self.lines(1...5))
        memory.capacityBytes = memory.usedBytes + 200
        var refused: SpoolError?
        do { try spool.append(Self.lines(6...10)) } catch { refused = error }
        #expect(refused?.isDiskFull == true, "\(String(describing: refused))")
        #expect(spool.pendingLines == 5)
        memory.capacityBytes = .max
        #expect(try spool.append(Self.lines(11...12)) == 6...7)
        try spool.sealActiveSegment()
        let texts = try spool.sealedSegments.flatMap { try $0.readRecords() }.map(\.text)
        #expect(texts.map { $0.split(separator: " ")[1] } == ["1", "2", "3", "4", "5", "11", "12"])
    }
}
