import Foundation
import Overtime
import OvertimeSupport
import OvertimeTestSupport
import OvertimeTesting
import Testing

@_spi(ScheduleStore) @testable import OvertimeScheduler

/// The history keeps what `HistoryRetention` says, on virtual time against a real SQLite
/// file: a periodic request's attempts do not pile up on a device.
@Suite("Scheduler history retention", .serialized, .timeLimit(.minutes(2)))
struct SchedulerRetentionTests {
    private func periodic(_ identifier: String, every seconds: Int64) -> ScheduledTaskRequest {
        var request = ScheduledTaskRequest(identifier: identifier)
        request.repetition = Repetition(every: .seconds(seconds))
        return request
    }

    @Test func aPeriodicRequestKeepsOnlyItsNewestAttempts() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(configure: {
                $0.historyRetention = HistoryRetention(
                    maximumAge: nil, maximumAttemptsPerRequest: 5, checkInterval: .seconds(1))
            })
            defer { h.finish() }
            try h.current.start()
            try h.current.submit(periodic("job", every: 60))
            h.advance(by: .seconds(60 * 30))
            #expect(h.attempts.count >= 30)
            let history = try h.current.history("job")
            #expect(history.count == 5, "\(history.count) kept")
            #expect(history.map(\.runID) == h.attempts.all.suffix(5).reversed().map(\.runID), "the newest five")
        }
    }

    @Test func attemptsAndFinishedRequestsOlderThanTheMaximumAgeGo() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(
                identifiers: ["job", "once"], store: .sqlite,
                configure: {
                    $0.historyRetention = HistoryRetention(
                        maximumAge: .seconds(600), maximumAttemptsPerRequest: nil, checkInterval: .seconds(60))
                })
            defer { h.finish() }
            try h.current.start()
            try h.current.submit(ScheduledTaskRequest(identifier: "once"))
            try h.current.submit(periodic("job", every: 60))
            h.advance(by: .seconds(60 * 30))
            #expect(try h.current.history("once").isEmpty, "its one attempt is older than 10 minutes")
            let rows = try sqliteShell(h.path, "SELECT identifier FROM requests ORDER BY identifier")
            #expect(rows.map { $0.first ?? "" } == ["job"], "the finished one-shot's row went with it")
            let kept = try h.current.history("job")
            let oldest = try #require(kept.last?.endedAt)
            #expect(h.now - oldest <= .seconds(600 + 60), "nothing older than the age and one check interval")
            #expect(kept.count >= 10 && kept.count <= 12, "\(kept.count)")
        }
    }

    @Test func keepEverythingKeepsEverythingAndABadRetentionIsAClearError() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(configure: { $0.historyRetention = .keepEverything })
            defer { h.finish() }
            try h.current.start()
            try h.current.submit(periodic("job", every: 60))
            h.advance(by: .seconds(60 * 30))
            #expect(try h.current.history("job", limit: 100).count == h.attempts.count)

            for bad in [
                HistoryRetention(maximumAge: .zero), HistoryRetention(maximumAttemptsPerRequest: 0),
                HistoryRetention(maximumAge: .seconds(Int64.max)), HistoryRetention(checkInterval: .zero),
            ] {
                var configuration = SchedulerConfiguration(storePath: h.folder.path + "/other.db")
                configuration.historyRetention = bad
                #expect(throws: SchedulerError.self, "\(bad)") {
                    _ = try Scheduler(runtime: h.env.runtime, configuration: configuration)
                }
            }
        }
    }
}
