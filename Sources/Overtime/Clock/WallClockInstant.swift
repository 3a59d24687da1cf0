/// A wall-clock time: nanoseconds since 1970-01-01 00:00:00 UTC (the Unix epoch).
///
/// For what is persisted or shown as a date (record timestamps, the scheduler's planned
/// times). Never wait on it: it steps when the system clock is set; wait on
/// ``MonotonicInstant``s.
public struct WallClockInstant: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Nanoseconds since the Unix epoch (negative before it).
    public var nanosecondsSinceEpoch: Int64

    /// The time `nanosecondsSinceEpoch` after the Unix epoch.
    public init(nanosecondsSinceEpoch: Int64) {
        self.nanosecondsSinceEpoch = nanosecondsSinceEpoch
    }

    /// The time `seconds` after the Unix epoch.
    public init(secondsSinceEpoch seconds: Int64) {
        self.nanosecondsSinceEpoch = seconds &* 1_000_000_000
    }

    /// Orders times from earlier to later.
    public static func < (lhs: WallClockInstant, rhs: WallClockInstant) -> Bool {
        lhs.nanosecondsSinceEpoch < rhs.nanosecondsSinceEpoch
    }

    /// The time `duration` later (earlier for a negative one); saturates.
    public static func + (lhs: WallClockInstant, rhs: Duration) -> WallClockInstant {
        let (sum, overflow) = lhs.nanosecondsSinceEpoch.addingReportingOverflow(rhs.saturatingNanoseconds)
        return WallClockInstant(nanosecondsSinceEpoch: overflow ? (rhs < .zero ? .min : .max) : sum)
    }

    /// The time `duration` earlier; saturates.
    public static func - (lhs: WallClockInstant, rhs: Duration) -> WallClockInstant {
        lhs + (.zero - rhs)
    }

    /// The time from `rhs` to `lhs` (negative when `lhs` is earlier).
    public static func - (lhs: WallClockInstant, rhs: WallClockInstant) -> Duration {
        .nanoseconds(lhs.nanosecondsSinceEpoch) - .nanoseconds(rhs.nanosecondsSinceEpoch)
    }

    /// Whole seconds since the epoch, rounded down.
    public var secondsSinceEpoch: Int64 {
        let (quotient, remainder) = nanosecondsSinceEpoch.quotientAndRemainder(dividingBy: 1_000_000_000)
        return remainder < 0 ? quotient - 1 : quotient
    }

    /// RFC 3339 in UTC with microseconds, e.g. `2026-11-22T05:20:04.123456Z`.
    public var description: String {
        let seconds = secondsSinceEpoch
        let micros = (nanosecondsSinceEpoch - seconds * 1_000_000_000) / 1000
        let (days, secondOfDay) = seconds.quotientAndRemainder(dividingBy: 86_400)
        let (day, second) = secondOfDay < 0 ? (days - 1, secondOfDay + 86_400) : (days, secondOfDay)
        let date = CivilDate(daysSinceEpoch: day)
        func pad(_ value: Int64, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(date.year, 4))-\(pad(date.month, 2))-\(pad(date.day, 2))T\(pad(second / 3600, 2)):"
            + "\(pad(second / 60 % 60, 2)):\(pad(second % 60, 2)).\(pad(micros, 6))Z"
    }
}

extension Duration {
    /// Whole nanoseconds, signed, saturating at the ends of `Int64`.
    package var saturatingNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (secondsPart, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (sum, overflow2) = secondsPart.addingReportingOverflow(attoseconds / 1_000_000_000)
        return overflow2 ? (seconds < 0 ? .min : .max) : sum
    }
}
