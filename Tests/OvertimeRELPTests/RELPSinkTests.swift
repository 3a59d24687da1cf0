import Foundation
import Overtime
import OvertimeRELP
import OvertimeSupport
import OvertimeTestSupport
import Testing

@testable import OvertimeLogUploader

@Suite(
    "Syslog delivery across collector restarts: TCP and RELP against a real rsyslog", .serialized,
    .timeLimit(.minutes(3)))
struct RELPSinkTests {
    private func spool(_ folder: TemporaryDirectory, lines: Int, segmentBytes: Int = 4096) throws -> Spool {
        var options = SpoolConfiguration()
        options.segmentBytes = segmentBytes
        let spool = try Spool(directory: folder.path, configuration: options, clock: SystemClock())
        for index in 1...lines { try spool.append("relp line \(index) " + String(repeating: "r", count: 60)) }
        try spool.sealActiveSegment()
        return spool
    }

    private func waitForLines(_ rsyslog: RsyslogServer, _ count: Int) async throws {
        for _ in 0..<1000 {
            guard rsyslog.lines().count < count else { break }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    @Test(.startsProcesses) func theSyslogSinkNeverWritesIntoAConnectionTheCollectorClosedWhileIdle() async throws {
        let rsyslog = try RsyslogServer()
        let folder = TemporaryDirectory("syslog-restart")
        defer { folder.remove() }
        let spool = try spool(folder, lines: 200)
        let segments = spool.sealedSegments
        try #require(segments.count >= 4)
        let sink = SyslogSink(host: "127.0.0.1", port: rsyslog.port)
        var expected = 0
        for segment in segments {
            // Idle between segments, the collector is killed and restarted: the kept
            // connection is dead, and the next segment must not vanish into it.
            try await sink.store(segment)
            expected += segment.records
            try await waitForLines(rsyslog, expected)
            rsyslog.kill()
            try rsyslog.restart()
        }
        try await waitForLines(rsyslog, expected)
        #expect(Set(rsyslog.sequences()) == Set(1...200), "no segment lost across \(segments.count) restarts")
    }

    @Test(.startsProcesses) func relpLosesNothingAcrossKill9OfTheCollectorAndDuplicatesAreIdentifiable() async throws {
        let rsyslog = try RsyslogServer()
        let folder = TemporaryDirectory("relp")
        defer { folder.remove() }
        let total = 4000
        // Large segments (about 1,000 messages each): a session sends 32 KiB, a third of
        // one, before the collector is killed, so some of its messages were written and
        // acknowledged and the rest were not.
        let spool = try spool(folder, lines: total, segmentBytes: 96 * 1024)
        // Kill -9 and restart the collector 3 times, each time inside a session, the first
        // of every other one: through a relay that stops passing the session's bytes on and
        // kills the collector meanwhile (on its own thread: never on the test's pool).
        let relay = try SessionInterruptingRelay(to: rsyslog.relpPort, interruptions: 3, afterBytes: 32 * 1024) {
            rsyslog.kill()
            try? rsyslog.restart()
        }
        let sink = RELPSink(host: "127.0.0.1", port: relay.port, timeout: .seconds(2))
        var failures = 0
        for segment in spool.sealedSegments where failures < 500 {
            while failures < 500 {
                do {
                    try await sink.store(segment)
                    break
                } catch {
                    failures += 1
                    try await Task.sleep(for: .milliseconds(20))
                }
            }
        }
        try await waitForLines(rsyslog, total)
        let sequences = rsyslog.sequences()
        let duplicates = sequences.count - Set(sequences).count
        #expect(Set(sequences) == Set(1...UInt64(total)), "every line acknowledged is in the collector's file")
        print(
            "RELP: \(total) lines, \(relay.interruptions) kills, \(duplicates) duplicates, \(failures) failed attempts")
        #expect(relay.interruptions == 3 && failures >= 3, "each kill broke a session under way")
        #expect(failures < 500, "and sending resumed")
        // librelp has at most 128 messages unanswered, and 32 KiB is more than 128: messages
        // were written and answered before each kill, and were sent again.
        #expect(duplicates > 0, "what arrived twice is identified by its stream and sequence")
    }
}
