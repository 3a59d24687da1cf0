import Dispatch
import Foundation
import OvertimeTestSupport
import Testing

@testable import OvertimeLogUploader

@Suite("Spool on a full disk (RLIMIT_FSIZE, in a child process)", .timeLimit(.minutes(3)))
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
        #expect(lines.contains("AFTER \(acknowledged + 1)") || lines.contains { $0.hasPrefix("AFTER ") })
        // Reopened: every acknowledged line, then the one after; nothing to repair.
        let reopened = try #require(lines.first { $0.hasPrefix("REOPENED ") })
        #expect(reopened == "REOPENED \(acknowledged + 1) after the disk had room again true true")
    }
}
