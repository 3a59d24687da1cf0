// One field of a calendar expression (years, months, days, hours, minutes, seconds) and
// the values it matches.

/// The values of one field: items `start`, `start..stop`, `start/repeat` or
/// `start..stop/repeat`; no items: any value (`*`).
struct CalendarComponent: Sendable, Hashable {
    struct Item: Sendable, Hashable {
        var start: Int64
        /// The last value a range or a repetition reaches; `nil`: up to the field's maximum.
        var stop: Int64?
        /// The step from `start` on; 0: `start` alone.
        var step: Int64
    }

    /// Empty: any value.
    var items: [Item] = []

    /// Any value.
    static let any = CalendarComponent()

    /// Exactly `values`.
    static func values(_ values: Int64...) -> CalendarComponent {
        CalendarComponent(items: values.map { Item(start: $0, stop: nil, step: 0) })
    }

    /// The smallest value matched that is at least `value`. It may pass the field's last
    /// value (`maximum`) only through a repetition without an end (`0/7`), which systemd
    /// carries into the next unit: the caller carries it (minute 63 is 3 past the next hour).
    /// `nil`: nothing at or after `value` up to `maximum`.
    func next(atOrAfter value: Int64, maximum: Int64) -> Int64? {
        if items.isEmpty { return value <= maximum ? value : nil }
        var best: Int64?
        for item in items {
            var candidate: Int64?
            if item.start >= value {
                candidate = item.start
            } else if item.step > 0 {
                let steps = (value - item.start + item.step - 1) / item.step
                candidate = item.start + steps * item.step
            }
            if let candidate, candidate <= item.stop ?? .max {
                best = min(best ?? candidate, candidate)
            }
        }
        return best
    }

    /// This component of days counted from the end of a month of `length` days (`~1` is
    /// the last day), as days from its start.
    func fromEndOfMonth(length: Int64) -> CalendarComponent {
        CalendarComponent(
            items: items.map { item in
                let start = length - item.start + 1
                guard let stop = item.stop else { return Item(start: start, stop: nil, step: item.step) }
                let other = length - stop + 1
                return Item(start: min(start, other), stop: max(start, other), step: item.step)
            })
    }
}
