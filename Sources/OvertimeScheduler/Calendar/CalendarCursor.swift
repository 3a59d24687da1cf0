// The search for the next local date and time a calendar expression matches, field by
// field, the way systemd's calendar search goes (so that both plan the same times).

import Overtime

/// A local date and time from which the search goes on.
struct CalendarCursor: Hashable {
    var date: CivilDate
    var hour: Int64
    var minute: Int64
    /// Microseconds within the minute.
    var second: Int64
    /// After a carry that started a unit over: the offset from UTC of the time carried to.
    /// systemd's search next reads the local time it started over at with that time's
    /// daylight saving flag (mktime(3) with `tm_isdst` set), which moves it by the
    /// difference when a change of daylight saving time lies between the two.
    private var carriedOffset: Int64?

    /// The local time `localSeconds` (seconds since 1970 as if the zone were UTC) and
    /// `microseconds`.
    init(localSeconds: Int64, microseconds: Int64) {
        let day = localSeconds.flooredDivision(by: 86_400)
        let secondOfDay = localSeconds - day * 86_400
        date = CivilDate(daysSinceEpoch: day)
        carriedOffset = nil
        hour = secondOfDay / 3600
        minute = secondOfDay / 60 % 60
        second = secondOfDay % 60 * 1_000_000 + microseconds
    }

    /// Seconds since 1970 as if the zone were UTC.
    var localSeconds: Int64 { date.daysSinceEpoch * 86_400 + hour * 3600 + minute * 60 + second / 1_000_000 }

    /// Carries fields past their ends into the next units (a minute 60 is the next hour's 0).
    mutating func normalize() {
        minute += second / 60_000_000
        second %= 60_000_000
        hour += minute / 60
        minute %= 60
        let days = hour / 24
        hour %= 24
        date = Self.date(year: date.year, month: date.month, day: date.day + days)
    }

    /// Carries a field set past its end (by a repetition without an end: minute 63), then
    /// starts the unit below the largest one that changed over (as systemd's search does:
    /// minute 63 at 10:00 goes on from 11:00; at 23:00, from 00:03 the next day).
    private mutating func carry(in zone: TimeZoneRules) {
        let before = self
        normalize()
        let carried = self
        if date.year != before.date.year {
            date = CivilDate(year: date.year, month: 1, day: date.day)
        } else if date.month != before.date.month {
            date.day = 1
        } else if date.day != before.date.day {
            hour = 0
        } else if hour != before.hour {
            minute = 0
        } else if minute != before.minute {
            second = 0
        }
        if self != carried { remember(carried, in: zone) }
    }

    /// Keeps the offset of `carried`, the time a carry reached before a unit started over.
    private mutating func remember(_ carried: CalendarCursor, in zone: TimeZoneRules) {
        let local = carried.localSeconds
        let instant = zone.instants(atLocal: local).first ?? local - Int64(zone.offset(at: local - 2 * 86_400))
        carriedOffset = Int64(zone.offset(at: instant))
    }

    /// Reads the local time again with the offset a carry left (see `carriedOffset`).
    private mutating func applyCarriedOffset(in zone: TimeZoneRules) {
        guard let offset = carriedOffset else { return }
        carriedOffset = nil
        let local = localSeconds
        let offsets = zone.instants(atLocal: local).map { local - $0 }
        guard !offsets.isEmpty, !offsets.contains(offset) else { return }
        let instant = local - offset
        let moved = instant + Int64(zone.offset(at: instant))
        // systemd gives up where this goes backwards ("Refuse to go backward"); going on
        // from the time as read plans what was meant.
        guard moved > local else { return }
        self = CalendarCursor(localSeconds: moved, microseconds: second % 1_000_000)
    }

    /// The first local date and time at or after this one that `fields` match, or `nil`
    /// when there is none before 2200.
    mutating func nextMatch(of fields: CalendarExpression, in zone: TimeZoneRules) -> CalendarCursor? {
        // Every step moves on; the bound only guards against a mistake looping for good.
        for _ in 0..<1_000_000 {
            applyCarriedOffset(in: zone)
            guard let year = fields.years.next(atOrAfter: date.year, maximum: CalendarExpression.latestYear),
                year <= CalendarExpression.latestYear
            else { return nil }
            if year != date.year { self = CalendarCursor(year: year, month: 1, day: 1) }
            guard let month = fields.months.next(atOrAfter: date.month, maximum: 12) else {
                self = CalendarCursor(year: year + 1, month: 1, day: 1)
                continue
            }
            if month != date.month {
                self = CalendarCursor(year: year, month: month, day: 1)
                if month > 12 {
                    // A carry into the next year starts it over at January.
                    let carried = self
                    date = CivilDate(year: carried.date.year, month: 1, day: 1)
                    remember(carried, in: zone)
                    continue
                }
            }
            let length = CivilDate.daysIn(month: month, year: year)
            let days = fields.daysFromEnd ? fields.days.fromEndOfMonth(length: length) : fields.days
            guard let day = days.next(atOrAfter: date.day, maximum: length) else {
                self = CalendarCursor(year: year, month: month + 1, day: 1)
                continue
            }
            if day != date.day {
                (date.day, hour, minute, second) = (day, 0, 0, 0)
                if day > length {
                    carry(in: zone)
                    continue
                }
            }
            guard fields.weekdays & (1 << date.weekdayFromMonday) != 0 else {
                self = CalendarCursor(year: year, month: month, day: day + 1)
                continue
            }
            guard let matchedHour = fields.hours.next(atOrAfter: hour, maximum: 23) else {
                self = CalendarCursor(year: year, month: month, day: day + 1)
                continue
            }
            if matchedHour != hour {
                (hour, minute, second) = (matchedHour, 0, 0)
                if matchedHour > 23 {
                    carry(in: zone)
                    continue
                }
            }
            guard let matchedMinute = fields.minutes.next(atOrAfter: minute, maximum: 59) else {
                (hour, minute, second) = (hour + 1, 0, 0)
                normalize()
                continue
            }
            if matchedMinute != minute {
                (minute, second) = (matchedMinute, 0)
                if matchedMinute > 59 {
                    carry(in: zone)
                    continue
                }
            }
            guard let matchedSecond = fields.seconds.next(atOrAfter: second, maximum: 59_999_999) else {
                (minute, second) = (minute + 1, 0)
                normalize()
                continue
            }
            if matchedSecond != second {
                second = matchedSecond
                if matchedSecond > 59_999_999 {
                    carry(in: zone)
                    continue
                }
            }
            return self
        }
        return nil
    }

    /// Midnight of `day` of `month` of `year`, carried over the ends of months and years.
    private init(year: Int64, month: Int64, day: Int64) {
        date = Self.date(year: year, month: month, day: day)
        (hour, minute, second, carriedOffset) = (0, 0, 0, nil)
    }

    private static func date(year: Int64, month: Int64, day: Int64) -> CivilDate {
        let first = CivilDate(year: year + (month - 1) / 12, month: (month - 1) % 12 + 1, day: 1)
        return CivilDate(daysSinceEpoch: first.daysSinceEpoch + day - 1)
    }
}
