import Dispatch
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
        // Large segments (about 1,000 messages each) take long enough to send that a kill
        // lands inside a session.
        let spool = try spool(folder, lines: total, segmentBytes: 96 * 1024)
        let sink = RELPSink(host: "127.0.0.1", port: rsyslog.relpPort, timeout: .seconds(2))
        // Kill -9 and restart the collector 3 times, each time once messages are arriving (a
        // session is under way): on a thread of its own, because waiting for a killed
        // process blocks, never on the test's pool.
        let killerDone = DispatchSemaphore(value: 0)
        let kills = Locked(0)
        let sending = Locked(true)
        Thread.detachNewThread {
            var seen = 0
            for _ in 0..<3 {
                while rsyslog.lines().count < seen + 100, sending.withLock({ $0 }) { usleep(2000) }
                guard sending.withLock({ $0 }) else { break }
                rsyslog.kill()
                kills.withLock { $0 += 1 }
                usleep(30_000)
                try? rsyslog.restart()
                seen = rsyslog.lines().count
            }
            killerDone.signal()
        }
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
        sending.withLock { $0 = false }
        killerDone.wait()
        try await waitForLines(rsyslog, total)
        let sequences = rsyslog.sequences()
        #expect(Set(sequences) == Set(1...UInt64(total)), "every line acknowledged is in the collector's file")
        print(
            "RELP: \(total) lines, \(kills.withLock { $0 }) kills, \(sequences.count - Set(sequences).count) duplicates, \(failures) failed attempts"
        )
        #expect(kills.withLock { $0 } >= 1 && failures >= 1, "kills broke sessions under way")
        #expect(failures < 500, "and sending resumed")
    }
}
