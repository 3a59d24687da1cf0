import Dispatch
import Foundation
import OvertimeTestSupport
import Testing

@testable import OvertimeLogUploader

@Suite("Spool on a full disk (RLIMIT_FSIZE, in a child process)", .onOwnThread(runningAtMost: .minutes(3)))
struct SpoolFullDiskTests {
    @Test func theWriterGetsAClearErrorAndEverythingAcknowledgedSurvives() throws {
        let folder = TemporaryDirectory("full-disk")
        defer { folder.remove() }
        let child = try ChildProcess.run(["spool-full-disk", folder.path + "/spool"])
        #expect(child.status == 0)
        let lines = child.standardOutput.split(separator: "\n").map(String.init)
        let error = try #require(lines.first { $0.hasPrefix("ERROR ") })
        #expect(error.hasPrefix("ERROR true "))
        #expect(error.contains("File too large"))
        let acknowledged = try #require(lines.first { $0.hasPrefix("ACKED ") }.flatMap { Int($0.dropFirst(6)) })
        #expect(acknowledged > 100)
        // The line that failed gave its number back: the next line takes it, no gap.
        #expect(lines.contains("AFTER \(acknowledged + 1)"), "\(lines)")
        // Reopened: every acknowledged line, then the one after; nothing to repair.
        let reopened = try #require(lines.first { $0.hasPrefix("REOPENED ") })
        #expect(reopened == "REOPENED \(acknowledged + 1) after the disk had room again true true")
    }

    @Test func linesThatFailGiveTheirNumbersBackWhileOthersAreBeingAppended() throws {
        let folder = TemporaryDirectory("full-disk-concurrent")
        defer { folder.remove() }
        let child = try ChildProcess.run(["spool-full-disk-concurrent", folder.path + "/spool"])
        #expect(child.status == 0, "\(child.standardOutput)")
        let line = try #require(child.standardOutput.split(separator: "\n").first { $0.hasPrefix("CONCURRENT ") })
        let fields = line.split(separator: " ")
        let records = fields.first { $0.hasPrefix("records=") }?.dropFirst(8)
        let acknowledged = fields.first { $0.hasPrefix("acknowledged=") }?.dropFirst(13)
        #expect(records != nil && records == acknowledged, "what is on disk is exactly what was acknowledged: \(line)")
        #expect(
            line.hasSuffix(" true true"),
            "sequences run without a gap, each acknowledged range names its lines: \(line)")
    }
}
