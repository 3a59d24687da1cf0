import Foundation
import Overtime
import OvertimeTestSupport
import Testing

@testable import OvertimeScheduler

/// Calendar expressions against `systemd-analyze calendar`, the oracle: the same
/// expressions, time zones and base times must give the same times.
@Suite(
    "CalendarSchedule: OnCalendar expressions, as systemd plans them", .onOwnThread(runningAtMost: .minutes(2)),
    .notUnderThreadSanitizer("calendar arithmetic against systemd-analyze's answers: one thread, nothing shared"))
struct CalendarScheduleTests {
    static let zones = [
        "Europe/Berlin", "America/New_York", "Australia/Sydney", "Asia/Kolkata", "Pacific/Chatham",
        "Europe/London", "America/Sao_Paulo", "Asia/Tehran", "UTC", "Australia/Lord_Howe",
    ]

    static let expressions = [
        "*-*-* 02:30:00", "*-*-* 01:30", "daily", "hourly", "weekly", "monthly", "quarterly", "semiannually",
        "yearly", "*:0/20", "*:0/7:13", "Mon..Fri 08:00", "Sat,Sun *-*-* 03:15:45", "Mon *-05~07/1 09:00",
        "*-02~01", "*-*~1..3 12:00", "*-*-1/10 06:00", "*-1..3-1", "2028-02-29 02:30", "*-*-* 00..04/2:00",
        "*-02-30", "Fri *-*-13 13:13", "*-*-* 02,14:30", "*-*-* 02:00..03:00/15", "2027..2029-03,10-* 02:*:00",
        "Sun *-*-* 01:59:59", "*-12-31 23:59:59", "*:*:0/7", "*-*-1/7 00:30", "*-*-* 0/5:00",
        "*:10/30", "*-*-* 20..23:50..59:0/20", "*-*-* 22..23:30/20:0/25",
    ]

    /// Base times around the changes of daylight saving time in 2027, and in 2040 and 2045
    /// (past the tz files' tables: their footer rules plan those).
    static let baseTimes: [Int64] = [
        1_795_000_000,  // 2026-11-19
        1_805_846_400,  // 2027-03-26
        1_806_451_200,  // 2027-04-02
        1_825_200_000,  // 2027-11-05
        1_827_100_000,  // 2027-11-27 (Lord Howe's and Sydney's summer)
        2_215_036_800,  // 2040-03-11
        2_392_790_400,  // 2045-10-27
    ]

    @Test(arguments: baseTimes)
    func everyExpressionInEveryZoneGivesSystemdsTimes(base: Int64) throws {
        let iterations = 12
        let all = Self.zones.flatMap { zone in Self.expressions.map { "\($0) \(zone)" } }
        let oracle = try Self.systemdTimes(all, base: base, iterations: iterations)
        let mismatches = Self.compare(all, with: oracle, base: base, iterations: iterations)
        #expect(mismatches.isEmpty, "\(mismatches.count) of \(all.count) differ: \(mismatches.prefix(8))")
    }

    /// What systemd accepts that was refused: `@SECONDS`, a lowercase `utc`, seconds with
    /// more than six decimals (rounded), a year written with a leading zero.
    @Test func systemdsOtherSpellingsGiveItsTimes() throws {
        let all = [
            "@1774746000", "@1774746000 UTC", "02026-03-29 01:00", "*-*-* 02:30:00.1234567",
            "*-*-* 02:30:00.9999999", "*-*-* 02:30 utc", "Mon *-*-* 08:00 utc", "002027-*-01 00:00",
        ]
        for expression in all { #expect(throws: Never.self) { try CalendarSchedule(expression) } }
        let oracle = try Self.systemdTimes(all, base: 1_700_000_000, iterations: 3)
        let mismatches = Self.compare(all, with: oracle, base: 1_700_000_000, iterations: 3)
        #expect(oracle.count == all.count && mismatches.isEmpty, "\(mismatches)")
    }

    /// The differences from systemd 252 that `CalendarSchedule`'s documentation names, each
    /// from its base time: Overtime's time, and systemd's, which moves or skips it.
    @Test func whereOvertimeDiffersFromSystemdOnPurpose() throws {
        let cases: [(expression: String, base: Int64, ours: Int64, systemds: Int64)] = [
            // 2026-10-25 from 02:10 CEST: 02:30 CEST (00:30 UTC); systemd 02:30 CET.
            ("*-10~07 02:30 Europe/Berlin", 1_792_887_000, 1_792_888_200, 1_792_891_800),
            // Chatham's 2026-09-27 03:45 +1345 (the first instant of summer time); systemd the 28th.
            ("*-*-* 03:45 Pacific/Chatham", 1_790_380_800, 1_790_431_200, 1_790_517_600),
            // After its run at 2026-03-29 00:30 GMT (half an hour before that year's change):
            // 2027-03-29 00:30 IST, the day after the change; systemd 2030-03-29.
            ("*-03~03 00:30 Europe/Dublin", 1_774_744_200, 1_806_276_600, 1_900_974_600),
            // The same day written as a date: both give the first 02:30.
            ("*-10-25 02:30 Europe/Berlin", 1_792_887_000, 1_792_888_200, 1_792_888_200),
        ]
        for (expression, base, ours, systemds) in cases {
            let schedule = try CalendarSchedule(expression)
            #expect(schedule.nextTime(after: WallClockInstant(secondsSinceEpoch: base))?.secondsSinceEpoch == ours)
            let oracle = try Self.systemdTimes([expression], base: base, iterations: 1)
            #expect(oracle[expression] == .times([systemds]), "\(expression)")
        }
    }

    /// Random expressions from the grammar's parts, in random zones from random base times
    /// (the seed in the name of a failure reproduces it).
    @Test(arguments: [UInt64(1), 2, 3, 4, 5, 6])
    func randomExpressionsGiveSystemdsTimes(seed: UInt64) throws {
        var random = SplitMix64(seed: seed &* 0x9E37_79B9_7F4A_7C15)
        func field(_ range: ClosedRange<Int>, width: Int) -> String {
            func value(_ number: Int) -> String {
                let text = String(number)
                return String(repeating: "0", count: max(0, width - text.count)) + text
            }
            switch Int.random(in: 0..<6, using: &random) {
            case 0: return "*"
            case 1: return value(Int.random(in: range, using: &random))
            case 2:
                let start = Int.random(in: range, using: &random)
                return "\(value(start))..\(value(Int.random(in: start...range.upperBound, using: &random)))"
            case 3:
                return
                    "\(value(Int.random(in: range, using: &random)))/\(Int.random(in: 1...max(1, range.count / 2), using: &random))"
            case 4:
                let start = Int.random(in: range, using: &random)
                let stop = Int.random(in: start...range.upperBound, using: &random)
                return "\(value(start))..\(value(stop))/\(Int.random(in: 1...max(1, range.count / 3), using: &random))"
            default:
                let values = (0..<Int.random(in: 2...3, using: &random)).map { _ in
                    Int.random(in: range, using: &random)
                }
                return Set(values).sorted().map(value).joined(separator: ",")
            }
        }
        let weekdays = ["", "Mon ", "Sat,Sun ", "Tue..Thu ", "Fri ", "Mon,Wed..Fri "]
        var expressions: [String] = []
        for _ in 0..<120 {
            let day = field(1...28, width: 2)
            let date = Int.random(in: 0..<4, using: &random) == 0 ? "*-*~\(day)" : "*-\(field(1...12, width: 2))-\(day)"
            let time = "\(field(0...23, width: 2)):\(field(0...59, width: 2)):\(field(0...59, width: 2))"
            let zone = Self.zones[Int.random(in: 0..<Self.zones.count, using: &random)]
            expressions.append("\(weekdays.randomElement(using: &random)!)\(date) \(time) \(zone)")
        }
        let base = Int64.random(in: 1_790_000_000...2_400_000_000, using: &random)
        let oracle = try Self.systemdTimes(expressions, base: base, iterations: 8)
        let mismatches = Self.compare(expressions, with: oracle, base: base, iterations: 8)
        #expect(mismatches.isEmpty, "seed \(seed), base \(base): \(mismatches.count) differ: \(mismatches.prefix(5))")
    }

    @Test func previousTimeIsTheLastBeforeAnInstant() throws {
        let schedule = try CalendarSchedule("*-*-* 02:30 Europe/Berlin")
        var instant = WallClockInstant(secondsSinceEpoch: 1_805_846_400)
        for _ in 0..<10 {
            let next = try #require(schedule.nextTime(after: instant))
            #expect(schedule.previousTime(before: next + .nanoseconds(1)) == next)
            #expect(schedule.previousTime(before: next).map { $0 < next } ?? true)
            if let previous = schedule.previousTime(before: next) {
                #expect(schedule.nextTime(after: previous) == next)
            }
            instant = next
        }
        #expect(
            try CalendarSchedule("2027-01-01 00:00 UTC").previousTime(
                before: WallClockInstant(secondsSinceEpoch: 1_700_000_000)) == nil)
    }

    @Test func aSlimTimeZoneFileUsesItsFooterRule() throws {
        // zic's slim output lists no changes past the present, leaving them to the footer
        // (as Alpine and other small images ship the tz database).
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let source = directory.path + "/zones"
        try """
        Rule Test 2000 max - Mar lastSun 1:00u 1:00 S
        Rule Test 2000 max - Oct lastSun 1:00u 0 -
        Zone Test/Slim 1:00 Test CE%sT

        """.write(toFile: source, atomically: true, encoding: .utf8)
        let compiled = try ChildCommand.run("/usr/sbin/zic", ["-b", "slim", "-d", directory.path, source])
        #expect(compiled.status == 0, "\(compiled.output)")
        let slim = try TimeZoneRules.named("Test/Slim", in: directory.path)
        let fat = try TimeZoneRules.named("Europe/Berlin")
        #expect(slim.transitions.count < 10, "a slim file lists few changes")
        for seconds in stride(from: Int64(1_800_000_000), to: 2_500_000_000, by: 3_600 * 7) {
            #expect(slim.offset(at: seconds) == fat.offset(at: seconds), "at \(seconds)")
        }
    }

    @Test func badExpressionsAndZonesAreClearErrors() {
        let cases: [(String, CalendarScheduleError.Code, String)] = [
            ("", .invalidExpression, "empty"),
            ("*-*-* 25:00", .invalidExpression, "hour"),
            ("*-13-01", .invalidExpression, "month"),
            ("Sat..Mon", .invalidExpression, "backwards"),
            ("Mon *-*-* 1:00 Mars/Olympus_Mons", .unknownTimeZone, "Mars/Olympus_Mons"),
            ("daily ../../etc/passwd", .invalidExpression, "not a calendar expression"),
            ("daily Europe/../../../etc/passwd", .unknownTimeZone, "not a time zone name"),
            ("*:*/0", .invalidExpression, "zero"),
            ("*-*-* 22..23:50/20:0/25", .invalidExpression, "out of range"),
            ("*-*~03/8", .invalidExpression, "out of range"),
            ("Fun 10:00", .invalidExpression, "weekday"),
            ("1969-01-01", .invalidExpression, "1970"),
            ("*-*-* 1:2:3:4", .invalidExpression, "time of day"),
            (String(repeating: "1,", count: 400) + "1:00", .invalidExpression, "512"),
        ]
        for (expression, code, words) in cases {
            do {
                _ = try CalendarSchedule(expression)
                Issue.record("'\(expression)' was accepted")
            } catch {
                #expect(error.code == code, "\(expression): \(error)")
                #expect(error.message.contains(words), "\(expression): \(error)")
            }
        }
    }

    @Test func aDamagedTimeZoneFileIsAClearError() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        try FileManager.default.createDirectory(atPath: directory.path + "/Bad", withIntermediateDirectories: true)
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: "/usr/share/zoneinfo/Europe/Berlin")))
        bytes.removeLast(bytes.count / 2)
        try Data(bytes).write(to: URL(fileURLWithPath: directory.path + "/Bad/Cut"))
        try Data("TZif2 nonsense".utf8).write(to: URL(fileURLWithPath: directory.path + "/Bad/Junk"))
        for name in ["Bad/Cut", "Bad/Junk"] {
            #expect(throws: CalendarScheduleError.self) { try TimeZoneRules.named(name, in: directory.path) }
        }
    }

    /// What `systemd-analyze calendar` says of an expression.
    enum OracleAnswer: Equatable {
        /// The times (whole seconds) it names.
        case times([Int64])
        /// It does not parse.
        case rejected
        /// It parses, but systemd cannot plan it (its search gives up).
        case failed
    }

    /// `systemd-analyze calendar` for each of `expressions` from `base`: all in one run,
    /// or one run each when some fail (the output then cannot be matched by order).
    static func systemdTimes(_ expressions: [String], base: Int64, iterations: Int) throws -> [String: OracleAnswer] {
        func run(_ batch: [String]) throws -> ChildCommand {
            try ChildCommand.run(
                "/usr/bin/env",
                ["TZ=UTC", "systemd-analyze", "calendar", "--iterations", "\(iterations)", "--base-time=@\(base)"]
                    + batch)
        }
        func times(_ output: String) -> [[Int64]] {
            var blocks: [[Int64]] = []
            for line in output.split(separator: "\n") {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                if trimmed.hasPrefix("Normalized form: ") {
                    blocks.append([])
                } else if !blocks.isEmpty, trimmed.hasPrefix("Next elapse:") || trimmed.hasPrefix("Iter. #") {
                    let fields = trimmed.split(separator: " ")
                    guard fields.count >= 4, fields[fields.count - 1] == "UTC" else { continue }
                    let date = fields[fields.count - 3].split(separator: "-").compactMap { Int64($0) }
                    let time = fields[fields.count - 2].split(separator: ":").compactMap { Int64($0) }
                    guard date.count == 3, time.count == 3 else { continue }
                    let days = CivilDate(year: date[0], month: date[1], day: date[2]).daysSinceEpoch
                    blocks[blocks.count - 1].append(days * 86_400 + time[0] * 3600 + time[1] * 60 + time[2])
                }
            }
            return blocks
        }
        let together = try run(expressions)
        let blocks = times(together.output)
        if together.status == 0, blocks.count == expressions.count {
            return Dictionary(uniqueKeysWithValues: zip(expressions, blocks.map(OracleAnswer.times)))
        }
        var answers: [String: OracleAnswer] = [:]
        for expression in expressions {
            let alone = try run([expression])
            if alone.output.contains("Failed to parse") {
                answers[expression] = .rejected
            } else if alone.status != 0 {
                answers[expression] = .failed
            } else {
                answers[expression] = .times(times(alone.output).first ?? [])
            }
        }
        return answers
    }

    /// Compares our times for each expression with the oracle's; returns the differences.
    static func compare(
        _ expressions: [String], with oracle: [String: OracleAnswer], base: Int64, iterations: Int
    ) -> [String] {
        var mismatches: [String] = []
        for expression in expressions {
            let schedule: CalendarSchedule
            do {
                schedule = try CalendarSchedule(expression)
            } catch {
                if oracle[expression] != .rejected { mismatches.append("\(expression): we refuse it: \(error)") }
                continue
            }
            guard case .times(let theirs) = oracle[expression] else {
                if oracle[expression] == .rejected { mismatches.append("\(expression): systemd refuses it, we do not") }
                continue
            }
            var ours: [Int64] = []
            var instant = WallClockInstant(secondsSinceEpoch: base)
            while ours.count < iterations, let next = schedule.nextTime(after: instant) {
                ours.append(next.secondsSinceEpoch)
                instant = next
            }
            if ours != theirs {
                let first = Array(zip(ours, theirs)).firstIndex { $0.0 != $0.1 } ?? min(ours.count, theirs.count)
                mismatches.append(
                    "\(expression): from #\(first + 1) ours \(ours.dropFirst(first).prefix(3)) systemd \(theirs.dropFirst(first).prefix(3))"
                )
            }
        }
        return mismatches
    }
}
