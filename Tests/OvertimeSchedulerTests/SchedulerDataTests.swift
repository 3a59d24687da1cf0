import Foundation
import OvertimeControlProtocol
import OvertimeSchedulerCodable
import OvertimeSupport
import OvertimeTestSupport
import OvertimeTesting
import Testing

@testable import Overtime
@_spi(ScheduleStore) @testable import OvertimeScheduler

/// A request's input reaches every run; a run's output is kept with its attempt in the
/// history; both are bounded, with a typed error over the bound. Virtual time, a real
/// SQLite file, restarts in between.
@Suite("Scheduler data in and out", .serialized, .timeLimit(.minutes(2)))
struct SchedulerDataTests {
    /// Every byte value, twice, and a NUL in the middle: nothing is read as text.
    static let binary = (0..<512).map { UInt8($0 % 256) }

    @Test func theInputReachesEveryAttemptAndEachAttemptsOutputIsKept() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(identifiers: [])
            defer { h.finish() }
            let seen = Recorder<[UInt8]>()
            func register() throws {
                try h.current.register("data") { task in
                    seen.append(task.input)
                    do {
                        try task.setOutput(Array("attempt \(task.attempt)".utf8))
                        if task.attempt == 2 { try task.setOutput(Self.binary) }  // the last one counts
                    } catch {
                        Issue.record("\(error)")
                    }
                    task.setTaskCompleted(success: task.attempt == 2)
                }
            }
            try register()
            try h.current.start()
            var request = ScheduledTaskRequest(identifier: "data")
            request.input = Self.binary
            request.earliestBegin = h.now + .seconds(60)
            try h.current.submit(request)
            // A restart before it runs: the input is read back from the store.
            h.current.abandon()
            try h.open(identifiers: [])
            try register()
            try h.current.start()
            h.advance(by: .seconds(60 + 3600))
            #expect(seen.all == [Self.binary, Self.binary], "both attempts got the input")
            let history = try h.current.history("data")
            #expect(history.map(\.result) == [.succeeded, .failed])
            #expect(history.map(\.output) == [Self.binary, Array("attempt 1".utf8)])
            let table = SchedulerTestControl.answer(h, "history", ["data"]) ?? ""
            #expect(table.contains("\"attempt 1\"") && table.contains("512 bytes"), "\(table)")
        }
    }

    @Test func dataOverTheBoundIsATypedErrorAndLosesNothing() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(identifiers: [])
            defer { h.finish() }
            let errors = Recorder<String>()
            try h.current.register("big") { task in
                try? task.setOutput(Array("kept".utf8))
                do {
                    try task.setOutput([UInt8](repeating: 1, count: ScheduleLimits.maximumDataBytes + 1))
                } catch {
                    let error = error as? SchedulerError
                    errors.append("\(error.map { "\($0.code)" } ?? "?") \(error?.field ?? "")")
                }
                task.setTaskCompleted(success: true)
                try? task.setOutput(Array("after completion".utf8))  // misuse: ignored
            }
            try h.current.start()
            var request = ScheduledTaskRequest(identifier: "big")
            request.input = [UInt8](repeating: 0, count: ScheduleLimits.maximumDataBytes + 1)
            do {
                try h.current.submit(request)
                Issue.record("an input over the bound was accepted")
            } catch let error as SchedulerError {
                #expect(error.code == .dataTooLarge && error.field == "input", "\(error)")
            }
            #expect(h.current.pendingRequests().isEmpty)
            request.input = [UInt8](repeating: 7, count: ScheduleLimits.maximumDataBytes)  // at the bound: fine
            try h.current.submit(request)
            h.advance(by: .seconds(1))
            #expect(errors.all == ["dataTooLarge output"])
            #expect(try h.current.history("big").first?.output == Array("kept".utf8))
            #expect(h.env.logs.messages(at: .warning).contains { $0.message.contains("setOutput called after") })
        }
    }
}

/// Control commands with arguments, answered by the scheduler's queue, for tests.
enum SchedulerTestControl {
    static func answer(_ h: SchedulerHarness, _ command: String, _ arguments: [String]) -> String? {
        let later = Recorder<ControlResponse>()
        let line = #"{"command":"\#(command)","arguments":[\#(arguments.map { "\"\($0)\"" }.joined(separator: ","))]}"#
        h.env.runtime.execute {
            _ = h.env.runtime.controlCommands.handle(Array(line.utf8), context: h.env.runtime.driverContext) {
                later.append($0)
            }
        }
        h.env.runtime.waitForQueuedRequests()
        for _ in 0..<5000 {
            guard later.count == 0 else { break }
            usleep(1000)
        }
        return later.all.first.map { $0.message ?? $0.error ?? "" }
    }
}

/// The Codable convenience (`OvertimeSchedulerCodable`): values in and out as JSON.
@Suite("Scheduler data as Codable values", .serialized, .timeLimit(.minutes(2)))
struct SchedulerCodableDataTests {
    struct ReportJob: Codable, Equatable {
        var region: String
        var days: [Int]
    }

    struct ReportResult: Codable, Equatable {
        var rows: Int
        var file: String
    }

    @Test func valuesGoInAndComeOutAsJSON() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(identifiers: [])
            defer { h.finish() }
            let decoded = Recorder<String>()
            try h.current.register("report.daily") { task in
                do {
                    let job = try task.input(as: ReportJob.self)
                    decoded.append(job.region)
                    try task.setOutput(
                        encoding: ReportResult(rows: job.days.count * 10, file: "/srv/\(job.region).csv"))
                    task.setTaskCompleted(success: true)
                } catch {
                    decoded.append("error: \(error)")
                    task.setTaskCompleted(success: false)
                }
            }
            try h.current.start()
            var request = ScheduledTaskRequest(identifier: "report.daily")
            try request.setInput(encoding: ReportJob(region: "eu", days: [1, 2, 3]))
            #expect(String(decoding: request.input, as: UTF8.self) == #"{"days":[1,2,3],"region":"eu"}"#)
            try h.current.submit(request)
            h.advance(by: .seconds(1))
            #expect(decoded.all == ["eu"])
            let record = try #require(try h.current.history("report.daily").first)
            #expect(try record.output(as: ReportResult.self) == ReportResult(rows: 30, file: "/srv/eu.csv"))
            #expect(throws: DecodingError.self) { _ = try record.output(as: ReportJob.self) }
        }
    }
}
