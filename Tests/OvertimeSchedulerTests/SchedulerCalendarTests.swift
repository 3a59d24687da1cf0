import Foundation
import Overtime
import OvertimeSupport
import OvertimeTestSupport
import OvertimeTesting
import Testing

@_spi(ScheduleStore) @testable import OvertimeScheduler

/// Calendar repetitions run by the scheduler on virtual time against a real SQLite file:
/// the times `systemd-analyze calendar` names, across changes of daylight saving time, with
/// the catch-up, flex and randomized delay intervals have.
@Suite("Scheduler calendar repetitions", .serialized, .timeLimit(.minutes(3)))
struct SchedulerCalendarTests {
    struct Week: Sendable, CustomStringConvertible {
        let expression: String
        /// Two or three days before a change of daylight saving time (UTC).
        let start: Int64
        var description: String { "\(expression) from \(WallClockInstant(secondsSinceEpoch: start))" }
    }

    static let weeks = [
        Week(expression: "*-*-* 02:30 Europe/Berlin", start: 1_806_062_400),  // 2027-03-26 12:00 (change: 03-28)
        Week(expression: "*-*-* 02:30 Europe/Berlin", start: 1_824_768_000),  // 2027-10-29 00:00 (change: 10-31)
        Week(expression: "*-*-* 02:30 America/New_York", start: 1_804_680_000),  // 2027-03-10 12:00 (change: 03-14)
        Week(expression: "*-*-* 01:30 America/New_York", start: 1_825_416_000),  // 2027-11-05 12:00 (change: 11-07)
        Week(expression: "*-*-* 02:30 America/New_York", start: 1_825_416_000),
    ]

    private func harness(at start: Int64, identifiers: [String] = ["job"]) throws -> SchedulerHarness {
        let env = try VirtualRuntime(budget: .seconds(3600), wallClock: WallClockInstant(secondsSinceEpoch: start))
        return try SchedulerHarness(identifiers: identifiers, env: env)
    }

    private func daily(_ expression: String, flex: Duration = .zero) throws -> ScheduledTaskRequest {
        var request = ScheduledTaskRequest(identifier: "job")
        request.repetition = Repetition(on: try CalendarSchedule(expression), flex: flex)
        return request
    }

    /// A week of a daily job across a change of daylight saving time: a 02:30 that does
    /// not exist runs not at all that day, one that happens twice runs once.
    @Test(arguments: weeks)
    func aWeekOfADailyJobRunsAtSystemdsTimes(week: Week) async throws {
        try await onOwnThread {
            let oracle = try CalendarScheduleTests.systemdTimes([week.expression], base: week.start, iterations: 7)
            guard case .times(let expected) = oracle[week.expression], expected.count == 7 else {
                Issue.record("systemd-analyze: \(String(describing: oracle))")
                return
            }
            let h = try harness(at: week.start)
            defer { h.finish() }
            try h.current.start()
            try h.current.submit(try daily(week.expression))
            h.advance(to: WallClockInstant(secondsSinceEpoch: expected.last! + 60))
            #expect(h.attempts.all.map(\.at.secondsSinceEpoch) == expected)
            #expect(h.attempts.all.allSatisfy { $0.at.nanosecondsSinceEpoch % 1_000_000_000 == 0 }, "never early")
        }
    }

    /// A repetition reads as `overtimectl` and the dashboard show it, not as a Swift value.
    @Test func aRepetitionDescribesItselfAsItsExpressionOrInterval() throws {
        #expect(Repetition(every: .seconds(3600)).description == "every 3600 s")
        #expect(
            Repetition(every: .milliseconds(250), flex: .milliseconds(50)).description
                == "every 250 ms, up to 50 ms early")
        let nightly = try CalendarSchedule("*-*-* 02:30 Europe/Berlin")
        #expect(Repetition(on: nightly).description == "on *-*-* 02:30 Europe/Berlin")
        #expect(
            Repetition(on: nightly, flex: .seconds(600)).description
                == "on *-*-* 02:30 Europe/Berlin, up to 600 s early")
    }

    @Test func missedTimesCatchUpByThePolicyAfterTheProgramWasAway() async throws {
        try await onOwnThread {
            let start: Int64 = 1_806_062_400  // 2027-03-26 12:00 UTC
            let h = try harness(at: start)
            defer { h.finish() }
            try h.current.start()
            var request = try daily("*-*-* 02:30 UTC")
            request.catchUp = .every(maximum: 2)
            try h.current.submit(request)
            h.advance(by: .seconds(86_400))  // one run: 03-27 02:30
            #expect(h.attempts.count == 1)
            // The program is away for three days (three 02:30s missed), then starts again.
            h.current.abandon()
            h.clock.stepWallClock(by: .seconds(3 * 86_400))
            try h.open()
            try h.current.start()
            h.advance(by: .seconds(60))
            #expect(h.attempts.count == 3, "two catch-up runs (the maximum), one after another")
            let next = WallClockInstant(secondsSinceEpoch: start + 5 * 86_400 - 9 * 3600 - 1800)  // 03-31 02:30
            h.advance(to: next + .seconds(1))
            #expect(h.attempts.all.last?.at == next, "then back on the calendar")
        }
    }

    @Test func flexLetsARunStartEarlyAndTheRandomDelayStaysTheSameEveryDay() async throws {
        try await onOwnThread {
            let start: Int64 = 1_806_062_400
            let h = try harness(at: start)
            defer { h.finish() }
            try h.current.start()
            var request = try daily("*-*-* 02:30 UTC", flex: .seconds(3600))
            request.randomizedDelay = .seconds(600)
            try h.current.submit(request)
            h.advance(by: .seconds(4 * 86_400))
            let times = h.attempts.all.map(\.at.secondsSinceEpoch)
            #expect(times.count == 4)
            let offsets = Set(times.map { ($0 - 5400) % 86_400 })  // seconds after 01:30
            #expect(offsets.count == 1, "the same drawn delay each day: \(times)")
            #expect(offsets.allSatisfy { (0...600).contains($0) }, "within the delay: \(offsets)")
            // The delay survives a restart (it is stored with the plan).
            try h.open()
            try h.current.start()
            h.advance(by: .seconds(2 * 86_400))
            #expect(Set(h.attempts.all.map { ($0.at.secondsSinceEpoch - 5400) % 86_400 }) == offsets)
        }
    }

    @Test(arguments: [false, true])
    func aClockSetBackPlansTheCalendarsNextTimeFromTheNewNow(wakesSystem: Bool) async throws {
        try await onOwnThread {
            let start: Int64 = 1_806_062_400  // 12:00 UTC
            let h = try harness(at: start)
            defer { h.finish() }
            try h.current.start()
            var request = try daily("*-*-* 02:30 UTC")
            request.wakesSystem = wakesSystem  // another bit in the store's details: still found
            try h.current.submit(request)
            h.advance(by: .seconds(18 * 3600))  // 06:00 the next day, after one run
            #expect(h.attempts.count == 1)
            h.clock.stepWallClock(by: .seconds(-3 * 86_400))
            h.advance(by: .seconds(86_400))
            #expect(h.attempts.count == 2, "the next 02:30 after the new time runs, not one three days on")
        }
    }

    @Test func aCalendarThatNamesNoMoreTimesIsRefusedAndOneThatEndsFinishes() async throws {
        try await onOwnThread {
            let start: Int64 = 1_806_062_400  // 2027-03-26 12:00 UTC
            let h = try harness(at: start)
            defer { h.finish() }
            try h.current.start()
            do {
                try h.current.submit(try daily("2026-*-* 02:30 UTC"))
                Issue.record("a calendar in the past was accepted")
            } catch let error as SchedulerError {
                #expect(error.code == .invalidRequest && error.field == "repetition.calendar", "\(error)")
            }
            try h.current.submit(try daily("2027-03-27..28 02:30 UTC"))
            h.advance(by: .seconds(5 * 86_400))
            #expect(h.attempts.count == 2)
            #expect(h.current.pendingRequests().isEmpty, "finished after its last time")
        }
    }
}
