// A POSIX `TZ` rule (`CET-1CEST,M3.5.0,M10.5.0/3`): a TZif file's footer, which gives the
// offsets after its last listed change (slim files list none past today).

import Overtime

/// Standard time, and daylight saving time between two yearly dates.
struct PosixTimeZoneRule: Sendable, Hashable {
    /// A day of the year a change happens on.
    enum Day: Hashable {
        /// `Jn`: 1 to 365, February 29 never counted.
        case julian(Int64)
        /// `n`: 0 to 365, February 29 counted in leap years.
        case zeroBased(Int64)
        /// `Mm.w.d`: weekday `d` (0 Sunday) of week `w` (5: the last) of month `m`.
        case monthWeekDay(month: Int64, week: Int64, weekday: Int64)
    }

    /// When daylight saving time starts and ends, and its offset.
    struct Daylight: Hashable {
        var offset: Int32
        var start: Day
        /// Seconds after midnight (local standard time) of `start`: may be negative or past 24 h.
        var startTime: Int64
        var end: Day
        /// Seconds after midnight (local daylight time) of `end`.
        var endTime: Int64
    }

    /// The standard offset, seconds east of UTC.
    var standardOffset: Int32
    /// `nil`: no daylight saving time.
    var daylight: Daylight?

    /// The rule `text` states, or `nil` when it is not one.
    init?(parsing text: String) {
        var scanner = RuleScanner(Array(text.utf8))
        guard scanner.skipName(), let standard = scanner.offset() else { return nil }
        standardOffset = Int32(-standard)
        if scanner.atEnd {
            daylight = nil
            return
        }
        guard scanner.skipName() else { return nil }
        var daylightOffset = Int64(standardOffset) + 3600
        if let explicit = scanner.offset() { daylightOffset = -explicit }
        var start = Day.monthWeekDay(month: 3, week: 2, weekday: 0)  // POSIX leaves it open; the US rule
        var end = Day.monthWeekDay(month: 11, week: 1, weekday: 0)
        var startTime: Int64 = 7200
        var endTime: Int64 = 7200
        if scanner.take(0x2C) {
            guard let parsedStart = scanner.day() else { return nil }
            start = parsedStart
            if scanner.take(0x2F) {
                guard let time = scanner.offset() else { return nil }
                startTime = time
            }
            guard scanner.take(0x2C), let parsedEnd = scanner.day() else { return nil }
            end = parsedEnd
            if scanner.take(0x2F) {
                guard let time = scanner.offset() else { return nil }
                endTime = time
            }
        }
        guard scanner.atEnd else { return nil }
        daylight = Daylight(
            offset: Int32(daylightOffset), start: start, startTime: startTime, end: end, endTime: endTime)
    }

    /// The offset in effect at `seconds` since 1970 (UTC).
    func offset(at seconds: Int64) -> Int32 {
        guard let daylight else { return standardOffset }
        let localDays = (seconds + Int64(standardOffset)).flooredDivision(by: 86_400)
        let year = CivilDate(daysSinceEpoch: localDays).year
        // Check the year before and after too: a southern zone's summer spans New Year.
        for candidate in [year - 1, year, year + 1] {
            let start = Self.midnight(of: daylight.start, in: candidate) + daylight.startTime - Int64(standardOffset)
            let end = Self.midnight(of: daylight.end, in: candidate) + daylight.endTime - Int64(daylight.offset)
            if start < end {
                if seconds >= start && seconds < end { return daylight.offset }
            } else if seconds >= start
                && seconds < Self.midnight(of: daylight.end, in: candidate + 1)
                    + daylight.endTime - Int64(daylight.offset)
            {
                return daylight.offset
            }
        }
        return standardOffset
    }

    /// Seconds since 1970 at midnight (as if UTC) of `day` in `year`.
    private static func midnight(of day: Day, in year: Int64) -> Int64 {
        let january1 = CivilDate(year: year, month: 1, day: 1).daysSinceEpoch
        switch day {
        case .julian(let number):
            let leapShift: Int64 = CivilDate.isLeapYear(year) && number >= 60 ? 1 : 0
            return (january1 + number - 1 + leapShift) * 86_400
        case .zeroBased(let number):
            return (january1 + number) * 86_400
        case .monthWeekDay(let month, let week, let weekday):
            let first = CivilDate(year: year, month: month, day: 1)
            let firstWeekday = Int64((first.weekdayFromMonday + 1) % 7)  // 0: Sunday
            var dayOfMonth = 1 + (weekday - firstWeekday + 7) % 7 + (week - 1) * 7
            let length = CivilDate.daysIn(month: month, year: year)
            while dayOfMonth > length { dayOfMonth -= 7 }
            return (first.daysSinceEpoch + dayOfMonth - 1) * 86_400
        }
    }
}

/// Reads the parts of a POSIX `TZ` rule.
private struct RuleScanner {
    let bytes: [UInt8]
    var position = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool { position == bytes.count }

    mutating func take(_ byte: UInt8) -> Bool {
        guard position < bytes.count, bytes[position] == byte else { return false }
        position += 1
        return true
    }

    /// A zone abbreviation: three or more letters, or anything in `<…>`.
    mutating func skipName() -> Bool {
        if take(0x3C) {
            guard let close = bytes[position...].firstIndex(of: 0x3E), close > position else { return false }
            position = close + 1
            return true
        }
        let start = position
        while position < bytes.count, (bytes[position] | 0x20) >= 0x61, (bytes[position] | 0x20) <= 0x7A {
            position += 1
        }
        return position - start >= 3
    }

    mutating func number(maximum: Int64) -> Int64? {
        let start = position
        var value: Int64 = 0
        while position < bytes.count, bytes[position] >= 0x30, bytes[position] <= 0x39, position - start < 4 {
            value = value * 10 + Int64(bytes[position] - 0x30)
            position += 1
        }
        return position > start && value <= maximum ? value : nil
    }

    /// `[+-]hh[:mm[:ss]]` in seconds (a POSIX offset: positive west of Greenwich; also a
    /// change's time of day).
    mutating func offset() -> Int64? {
        let save = position
        var sign: Int64 = 1
        if take(0x2D) { sign = -1 } else { _ = take(0x2B) }
        guard let hours = number(maximum: 167) else {
            position = save
            return nil
        }
        var seconds = hours * 3600
        if take(0x3A) {
            guard let minutes = number(maximum: 59) else { return nil }
            seconds += minutes * 60
            if take(0x3A) {
                guard let rest = number(maximum: 59) else { return nil }
                seconds += rest
            }
        }
        return sign * seconds
    }

    mutating func day() -> PosixTimeZoneRule.Day? {
        if take(0x4A) {
            guard let number = number(maximum: 365), number >= 1 else { return nil }
            return .julian(number)
        }
        if take(0x4D) {
            guard let month = number(maximum: 12), month >= 1, take(0x2E), let week = number(maximum: 5), week >= 1,
                take(0x2E), let weekday = number(maximum: 6)
            else { return nil }
            return .monthWeekDay(month: month, week: week, weekday: weekday)
        }
        return number(maximum: 365).map { .zeroBased($0) }
    }
}

extension Int64 {
    /// The quotient rounded towards negative infinity.
    func flooredDivision(by divisor: Int64) -> Int64 {
        let (quotient, remainder) = quotientAndRemainder(dividingBy: divisor)
        return remainder < 0 ? quotient - 1 : quotient
    }
}
