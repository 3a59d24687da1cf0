// A calendar schedule: the times an `OnCalendar=` expression names, in a time zone.

import Overtime

/// The times a calendar expression names, in systemd's `OnCalendar=` grammar
/// (systemd.time(7)), in a named time zone from the system's tz database. The same
/// expression plans the same times as `systemd-analyze calendar`.
///
/// ```swift
/// let nightly = try CalendarSchedule("*-*-* 02:30 Europe/Berlin")
/// let weekdays = try CalendarSchedule("Mon..Fri 08:00")      // the system's time zone
/// let lastMonday = try CalendarSchedule("Mon *-05~07/1 09:00 UTC")
/// ```
///
/// Daylight saving time: a local time that does not exist on a day (02:30 when the clock
/// springs from 02:00 to 03:00) names no time that day, and one that happens twice (when
/// the clock falls back) names its first occurrence — as systemd does. Times are planned
/// to the microsecond, from 1970 to 2199.
///
/// ### Where Overtime differs from systemd 252 on purpose
///
/// systemd's search converts each local time it tries with mktime(3), handing it the
/// daylight saving flag of the time it started from. Near a change of daylight saving time
/// that flag is sometimes the wrong one, and systemd then moves a time by an hour or skips
/// it. Overtime reads each local time's offset from the zone's rules instead, so an
/// expression names the same times whatever instant the search starts from:
///
/// - A day counted from the month's end on the day the clock falls back: from 02:10 on
///   25 October 2026, `*-10~07 02:30 Europe/Berlin` is the first 02:30 (summer time) for
///   Overtime, as `*-10-25 02:30 Europe/Berlin` is for both; systemd gives the second.
/// - Chatham's spring day: on 27 September 2026 the clock goes from 02:45 to 03:45, so
///   03:45 exists, the first instant of summer time. `*-*-* 03:45 Pacific/Chatham` runs
///   then for Overtime; systemd skips the day.
/// - Dublin's spring day: Ireland's winter time is the tz database's daylight saving time
///   (a negative one), so the flag systemd carries is inverted there. After
///   `*-03~03 00:30 Europe/Dublin` (29 March) runs on 29 March 2026, half an hour before
///   that year's change, its next time is 29 March 2027 for Overtime; systemd skips the
///   years in which the day falls after the change and plans 2030.
public struct CalendarSchedule: Sendable, Hashable, CustomStringConvertible {
    /// The parsed schedule, behind one reference: a request holding a calendar stays as
    /// small to copy as one holding an interval.
    final class Storage: Sendable {
        let expression: String
        let timeZone: String
        let fields: CalendarExpression
        let zone: TimeZoneRules

        init(expression: String, fields: CalendarExpression, zone: TimeZoneRules, timeZone: String? = nil) {
            self.expression = expression
            self.fields = fields
            self.zone = zone
            self.timeZone = timeZone ?? zone.name
        }
    }

    let storage: Storage

    /// The expression as given, without surrounding spaces.
    public var expression: String { storage.expression }
    /// The time zone: its name in the tz database (`Europe/Berlin`), `UTC`, or the
    /// system's zone (`$TZ`, else `/etc/localtime`) when the expression names none.
    public var timeZone: String { storage.timeZone }
    var fields: CalendarExpression { storage.fields }
    var zone: TimeZoneRules { storage.zone }

    /// The schedule `expression` states, such as `*-*-* 02:30 Europe/Berlin`, `daily`,
    /// `Mon..Fri *-*-* 08:00:00` or `*:0/15`. Throws a ``CalendarScheduleError`` that names
    /// what is wrong: the grammar, a value out of range, a time zone the tz database does
    /// not have.
    public init(_ expression: String) throws(CalendarScheduleError) {
        let trimmed = String(expression.drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
        guard trimmed.utf8.count <= 512 else {
            throw CalendarExpression.invalid(String(trimmed.prefix(40)) + "…", "it is longer than 512 bytes")
        }
        let (fields, zoneName) = try CalendarExpression.parse(trimmed)
        let zone = try zoneName.map { (name) throws(CalendarScheduleError) in try TimeZoneRules.named(name) }
        storage = Storage(expression: trimmed, fields: fields, zone: zone ?? TimeZoneRules.local())
    }

    /// A schedule a store wrote, read back. One that no longer parses (its time zone has
    /// left the tz database) names no times: its request waits, visibly, until submitted again.
    init(storedExpression: String) {
        if let parsed = try? CalendarSchedule(storedExpression) {
            self = parsed
        } else {
            storage = Storage(expression: storedExpression, fields: .never, zone: .utc, timeZone: "unknown")
        }
    }

    /// The expression.
    public var description: String { expression }

    /// The first time the expression names after `instant` (strictly later), or `nil` when
    /// it names none (before 2200).
    public func nextTime(after instant: WallClockInstant) -> WallClockInstant? {
        let startMicroseconds = instant.nanosecondsSinceEpoch.flooredDivision(by: 1000) + 1
        let startSeconds = startMicroseconds.flooredDivision(by: 1_000_000)
        let local = startSeconds + Int64(zone.offset(at: startSeconds))
        var cursor = CalendarCursor(
            localSeconds: local, microseconds: startMicroseconds - startSeconds * 1_000_000)
        while let candidate = cursor.nextMatch(of: fields, in: zone) {
            // A skipped local time has no instant; a repeated one counts where it first
            // happens after `instant`.
            let fraction = candidate.second % 1_000_000
            if let seconds = zone.instants(atLocal: candidate.localSeconds).first(where: {
                $0 * 1_000_000 + fraction >= startMicroseconds
            }) {
                return WallClockInstant(nanosecondsSinceEpoch: (seconds * 1_000_000 + fraction) * 1000)
            }
            cursor = candidate
            cursor.second += 1
            cursor.normalize()
        }
        return nil
    }

    /// The last time the expression names before `instant` (strictly earlier), or `nil`
    /// when it names none since 1970.
    public func previousTime(before instant: WallClockInstant) -> WallClockInstant? {
        // Look back over a window that doubles until it holds a time, then walk forward.
        var window = Duration.seconds(1)
        let earliest = WallClockInstant(secondsSinceEpoch: 0)
        while true {
            let from = max(instant - window, earliest)
            if var last = nextTime(after: from - .nanoseconds(1)), last < instant {
                while let later = nextTime(after: last), later < instant { last = later }
                return last
            }
            if from == earliest { return nil }
            window = window * 2
        }
    }

    /// Schedules are equal when their expressions and time zones are.
    public static func == (lhs: CalendarSchedule, rhs: CalendarSchedule) -> Bool {
        lhs.expression == rhs.expression && lhs.timeZone == rhs.timeZone
    }

    /// Hashes the expression and the time zone.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(expression)
        hasher.combine(timeZone)
    }
}

/// Why a calendar expression was refused. A struct over a private enum, so that codes can
/// be added without breaking code that switches over them.
public struct CalendarScheduleError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        enum Kind: String, Hashable {
            case invalidExpression, unknownTimeZone
        }

        let kind: Kind

        /// The expression does not follow the grammar, or a value is out of range.
        public static let invalidExpression = Code(kind: .invalidExpression)
        /// The time zone is not a name, or the tz database does not have it (or its file
        /// is damaged).
        public static let unknownTimeZone = Code(kind: .unknownTimeZone)

        /// The code's name.
        public var description: String { kind.rawValue }
    }

    /// What kind of failure.
    public let code: Code
    /// One sentence naming the expression and what is wrong with it.
    public let message: String

    init(_ kind: Code.Kind, _ message: String) {
        code = Code(kind: kind)
        self.message = message
    }

    /// The message.
    public var description: String { message }
}
