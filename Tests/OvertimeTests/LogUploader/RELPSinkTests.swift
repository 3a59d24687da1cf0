import Dispatch
import Foundation
import OvertimeRELP
import Testing

@testable import OvertimeLogUploader

@Suite(
    "Syslog delivery across collector restarts: TCP and RELP against a real rsyslog", .serialized,
    .timeLimit(.minutes(3)))
struct RELPSinkTests {
    private func spool(_ folder: TemporaryDirectory, lines: Int) throws -> Spool {
        var options = SpoolConfiguration()
        options.segmentBytes = 4096
        let spool = try Spool(directory: folder.path, configuration: options)
        for index in 1...lines { try spool.append("relp line \(index) " + String(repeating: "r", count: 60)) }
        try spool.sealActiveSegment()
        return spool
    }

    private func waitForLines(_ rsyslog: RsyslogServer, _ count: Int) async throws {
        for _ in 0..<1000 where rsyslog.lines().count < count { try await Task.sleep(for: .milliseconds(10)) }
    }

    @Test func theSyslogSinkNeverWritesIntoAConnectionTheCollectorClosedWhileIdle() async throws {
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

    @Test func relpLosesNothingAcrossKill9OfTheCollectorAndDuplicatesAreIdentifiable() async throws {
        let rsyslog = try RsyslogServer()
        let folder = TemporaryDirectory("relp")
        defer { folder.remove() }
        let total = 3000
        let spool = try spool(folder, lines: total)
        let sink = RELPSink(host: "127.0.0.1", port: rsyslog.relpPort, timeout: .seconds(2))
        // Kill -9 and restart the collector 5 times while segments are sent: on a thread of
        // its own, because waiting for a killed process blocks (never on the test's pool).
        let killerDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            for _ in 0..<5 {
                usleep(UInt32.random(in: 30_000...150_000))
                rsyslog.kill()
                usleep(30_000)
                try? rsyslog.restart()
            }
            killerDone.signal()
        }
        var failures = 0
        var slowest = Duration.zero
        for segment in spool.sealedSegments where failures < 500 {
            try await Task.sleep(for: .milliseconds(60))  // spread the sends over the kills
            while failures < 500 {
                let started = ContinuousClock.now
                do {
                    try await sink.store(segment)
                    slowest = max(slowest, ContinuousClock.now - started)
                    break
                } catch {
                    failures += 1
                    try await Task.sleep(for: .milliseconds(20))
                }
            }
        }
        killerDone.wait()
        try await waitForLines(rsyslog, total)
        let sequences = rsyslog.sequences()
        #expect(Set(sequences) == Set(1...UInt64(total)), "every line acknowledged is in the collector's file")
        print(
            "RELP: \(total) lines, \(sequences.count - Set(sequences).count) duplicates, \(failures) failed attempts, slowest store \(slowest)"
        )
        #expect(failures > 0 && failures < 500, "the kills interrupted sends, and sending resumed")
    }
}
