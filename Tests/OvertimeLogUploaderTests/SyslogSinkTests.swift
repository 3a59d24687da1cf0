import Foundation
import Overtime
import OvertimeTestSupport
import Testing

@testable import OvertimeLogUploader

@Suite("SyslogSink against a real rsyslog (imtcp, octet counting)", .timeLimit(.minutes(3)))
struct SyslogSinkTests {
    @Test(.startsProcesses) func linesArriveInOrderWithTheirStructuredData() async throws {
        let rsyslog = try RsyslogServer()
        let folder = TemporaryDirectory("syslog")
        defer { folder.remove() }
        var options = SpoolConfiguration()
        options.segmentBytes = 4096
        let spool = try Spool(directory: folder.path, configuration: options, clock: SystemClock())
        for index in 1...150 { try spool.append("syslog line \(index) with \"quotes\" and ] brackets") }
        try spool.sealActiveSegment()
        let sink = SyslogSink(host: "127.0.0.1", port: rsyslog.port, appName: "overtime-test")
        for segment in spool.sealedSegments { try await sink.store(segment) }
        for _ in 0..<500 {
            guard rsyslog.lines().count < 150 else { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        let lines = rsyslog.lines()
        #expect(lines.count == 150)
        for (index, line) in lines.enumerated() {
            #expect(line.hasPrefix("[overtime@32473 stream=\"\(spool.streamID)\" seq=\"\(index + 1)\" segment=\""))
            #expect(line.hasSuffix("] syslog line \(index + 1) with \"quotes\" and ] brackets"))
        }
    }

    @Test func aDeadCollectorIsARetryableError() async throws {
        let folder = TemporaryDirectory("syslog")
        defer { folder.remove() }
        let spool = try Spool(directory: folder.path, clock: SystemClock())
        try spool.append("never sent")
        try spool.sealActiveSegment()
        let sink = SyslogSink(host: "127.0.0.1", port: try freeLoopbackPort())
        let segment = try #require(spool.sealedSegments.first)
        do throws(SinkError) {
            try await sink.store(segment)
            Issue.record("expected an error")
        } catch {
            guard error.code == .retryable else {
                Issue.record("expected retryable, got \(error)")
                return
            }
            #expect(error.reason.contains("Connection refused"))
        }
    }
}
