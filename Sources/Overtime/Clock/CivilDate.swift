// Days since 1970 and proleptic Gregorian dates, both ways (Howard Hinnant's algorithms).

/// A proleptic Gregorian date, for what shows or plans by the calendar.
package struct CivilDate: Hashable, Comparable, Sendable {
    /// The year (1970, 2027, …).
    package var year: Int64
    /// 1 to 12.
    package var month: Int64
    /// 1 to 31.
    package var day: Int64

    /// The date `year`-`month`-`day` (not checked: callers pass valid dates).
    package init(year: Int64, month: Int64, day: Int64) {
        self.year = year
        self.month = month
        self.day = day
    }

    /// The date of the day `daysSinceEpoch` days after 1970-01-01 (`civil_from_days`).
    package init(daysSinceEpoch: Int64) {
        let z = daysSinceEpoch + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
    }

    /// Days from 1970-01-01 to this date (`days_from_civil`).
    package var daysSinceEpoch: Int64 {
        let shiftedYear = month <= 2 ? year - 1 : year
        let era = (shiftedYear >= 0 ? shiftedYear : shiftedYear - 399) / 400
        let yearOfEra = shiftedYear - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// 0 for Monday to 6 for Sunday (ISO 8601 order).
    package var weekdayFromMonday: Int {
        let days = daysSinceEpoch + 3  // 1970-01-01 was a Thursday
        return Int(((days % 7) + 7) % 7)
    }

    /// Whether `year` has a February 29.
    package static func isLeapYear(_ year: Int64) -> Bool {
        year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
    }

    /// The days of `month` in `year`.
    package static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: isLeapYear(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Orders dates from earlier to later.
    package static func < (lhs: CivilDate, rhs: CivilDate) -> Bool {
        (lhs.year, lhs.month, lhs.day) < (rhs.year, rhs.month, rhs.day)
    }
}
