import Overtime

// systemd's `OnCalendar=` grammar (systemd.time(7)), parsed into calendar components:
// `[weekdays] [[year-]month-day] [hour:minute[:second]] [time zone]`, or a shorthand.

/// A parsed calendar expression, without its time zone.
struct CalendarExpression: Sendable, Hashable {
    /// Bit 0 Monday to bit 6 Sunday; all bits: any weekday.
    var weekdays: UInt8 = 0x7F
    var years = CalendarComponent.any
    var months = CalendarComponent.any
    var days = CalendarComponent.any
    /// `days` counts from the end of the month (`~`).
    var daysFromEnd = false
    var hours = CalendarComponent.values(0)
    var minutes = CalendarComponent.values(0)
    /// Microseconds within the minute.
    var seconds = CalendarComponent.values(0)

    /// An expression that matches nothing.
    static let never: CalendarExpression = {
        var never = CalendarExpression()
        never.years = .values(.max)
        return never
    }()

    static let earliestYear: Int64 = 1970
    static let latestYear: Int64 = 2199

    /// Splits `text` into the expression and its time zone name (the last word, when it
    /// is not the first and starts with a letter), and parses the expression.
    static func parse(_ text: String) throws(CalendarScheduleError) -> (CalendarExpression, zone: String?) {
        var words = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard !words.isEmpty else { throw invalid(text, "it is empty") }
        var zone: String?
        if words.count > 1, let first = words.last?.unicodeScalars.first, first.properties.isAlphabetic {
            zone = words.removeLast()
        }
        if words.count == 1, let shorthand = shorthand(words[0].lowercased()) { return (shorthand, zone) }
        // `@SECONDS`: one instant, as seconds since 1970, always in UTC (as systemd has it).
        if words.count == 1, words[0].hasPrefix("@") {
            return (try instant(words[0], in: text), "UTC")
        }
        var expression = CalendarExpression()
        var rest = words[...]
        if let first = rest.first, first.unicodeScalars.first?.properties.isAlphabetic == true {
            expression.weekdays = try weekdays(first, in: text)
            rest = rest.dropFirst()
        }
        var sawDate = false
        var sawTime = false
        for word in rest {
            if word.contains(":") {
                guard !sawTime else { throw invalid(text, "it has two times of day") }
                try expression.parseTime(word, in: text)
                sawTime = true
            } else {
                guard !sawDate, !sawTime else { throw invalid(text, "'\(word)' is not where a date goes") }
                try expression.parseDate(word, in: text)
                sawDate = true
            }
        }
        return (expression, zone)
    }

    /// `@SECONDS` as the one date and time it names in UTC.
    private static func instant(_ word: String, in text: String) throws(CalendarScheduleError) -> CalendarExpression {
        let digits = word.dropFirst()
        guard !digits.isEmpty, digits.count <= 12, digits.allSatisfy({ $0.isASCII && $0.isNumber }),
            let seconds = Int64(digits)
        else { throw invalid(text, "'\(word)' is not @ and a number of seconds since 1970") }
        let days = seconds / 86_400
        let date = CivilDate(daysSinceEpoch: days)
        guard (earliestYear...latestYear).contains(date.year) else {
            throw invalid(text, "'\(word)' is not between \(earliestYear) and \(latestYear)")
        }
        let second = seconds % 86_400
        var expression = CalendarExpression()
        expression.years = .values(date.year)
        expression.months = .values(date.month)
        expression.days = .values(date.day)
        expression.hours = .values(second / 3600)
        expression.minutes = .values(second % 3600 / 60)
        expression.seconds = .values(second % 60 * 1_000_000)
        return expression
    }

    private static func shorthand(_ word: String) -> CalendarExpression? {
        var expression = CalendarExpression()
        switch word {
        case "minutely":
            expression.hours = .any
            expression.minutes = .any
        case "hourly": expression.hours = .any
        case "daily": break
        case "weekly": expression.weekdays = 1
        case "monthly": expression.days = .values(1)
        case "yearly", "annually":
            expression.months = .values(1)
            expression.days = .values(1)
        case "quarterly":
            expression.months = .values(1, 4, 7, 10)
            expression.days = .values(1)
        case "semiannually", "semi-annually", "biannually", "bi-annually":
            expression.months = .values(1, 7)
            expression.days = .values(1)
        default: return nil
        }
        return expression
    }

    private static let weekdayNames = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]

    private static func weekday(_ name: Substring, in text: String) throws(CalendarScheduleError) -> Int {
        let lowered = name.lowercased()
        for (index, full) in weekdayNames.enumerated() where lowered == full || lowered == full.prefix(3) {
            return index
        }
        throw invalid(text, "'\(name)' is not a weekday (Mon … Sun)")
    }

    private static func weekdays(_ word: String, in text: String) throws(CalendarScheduleError) -> UInt8 {
        var bits: UInt8 = 0
        let items = word.split(separator: ",", omittingEmptySubsequences: false)
        for (index, item) in items.enumerated() {
            if item.isEmpty, index == items.count - 1, index > 0 { break }  // "Mon," as systemd allows
            let bounds = splitRange(item)
            let start = try weekday(bounds.start, in: text)
            let stop = try bounds.stop.map { (name) throws(CalendarScheduleError) in try weekday(name, in: text) }
            if let stop, stop < start { throw invalid(text, "the weekdays '\(item)' run backwards") }
            for day in start...(stop ?? start) { bits |= 1 << day }
        }
        return bits
    }

    /// `a..b` or `a-b` (weekdays only) into its ends.
    private static func splitRange(_ item: Substring) -> (start: Substring, stop: Substring?) {
        if let range = item.firstRange(of: "..") { return (item[..<range.lowerBound], item[range.upperBound...]) }
        if let dash = item.firstIndex(of: "-") { return (item[..<dash], item[item.index(after: dash)...]) }
        return (item, nil)
    }

    private mutating func parseDate(_ word: String, in text: String) throws(CalendarScheduleError) {
        var parts: [Substring] = []
        var fromEnd = false
        var start = word.startIndex
        for index in word.indices where word[index] == "-" || word[index] == "~" {
            // `a..b` never holds a `-`; a `~` only stands before the day.
            parts.append(word[start..<index])
            if word[index] == "~" { fromEnd = true }
            start = word.index(after: index)
            if fromEnd, word[start...].contains(where: { $0 == "-" || $0 == "~" }) {
                throw Self.invalid(text, "'~' counts the day from the month's end and only stands before the day")
            }
        }
        parts.append(word[start...])
        guard parts.count == 2 || parts.count == 3 else {
            throw Self.invalid(text, "'\(word)' is not a date (year-month-day or month-day)")
        }
        if parts.count == 3 {
            years = try Self.component(parts[0], field: "year", in: text)
            years.items = years.items.map { item in
                var item = item
                if item.start < 70 { item.start += 2000 } else if item.start < 100 { item.start += 1900 }
                if let stop = item.stop, stop < 100 { item.stop = stop < 70 ? stop + 2000 : stop + 1900 }
                return item
            }
            try Self.validate(&years, range: Self.earliestYear...Self.latestYear, field: "year", in: text)
        }
        months = try Self.component(parts[parts.count - 2], field: "month", in: text)
        try Self.validate(&months, range: 1...12, field: "month", in: text)
        days = try Self.component(parts[parts.count - 1], field: "day", in: text)
        try Self.validate(&days, range: 1...31, field: "day", fromEnd: fromEnd, in: text)
        daysFromEnd = fromEnd
    }

    private mutating func parseTime(_ word: String, in text: String) throws(CalendarScheduleError) {
        let parts = word.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2 || parts.count == 3 else {
            throw Self.invalid(text, "'\(word)' is not a time of day (hour:minute[:second])")
        }
        hours = try Self.component(parts[0], field: "hour", in: text)
        try Self.validate(&hours, range: 0...23, field: "hour", in: text)
        minutes = try Self.component(parts[1], field: "minute", in: text)
        try Self.validate(&minutes, range: 0...59, field: "minute", in: text)
        seconds =
            parts.count == 3 ? try Self.component(parts[2], field: "second", in: text, microseconds: true) : .values(0)
        try Self.validate(&seconds, range: 0...59_999_999, field: "second", in: text)
    }

    /// A field: `*`, or items separated by commas.
    private static func component(
        _ text: Substring, field: String, in expression: String, microseconds: Bool = false
    ) throws(CalendarScheduleError) -> CalendarComponent {
        if text == "*" {
            // Any second is every whole second from 0 on, a repetition without an end (systemd's).
            return microseconds ? CalendarComponent(items: [.init(start: 0, stop: nil, step: 1_000_000)]) : .any
        }
        var items: [CalendarComponent.Item] = []
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            var body = item
            var step: Int64 = 0
            if let slash = item.firstIndex(of: "/") {
                body = item[..<slash]
                step = try number(item[item.index(after: slash)...], field: field, in: expression, microseconds)
                guard step > 0 else { throw invalid(expression, "the \(field) step in '\(item)' is zero") }
            }
            var stop: Int64?
            var startText = body
            if let dots = body.firstRange(of: "..") {
                startText = body[..<dots.lowerBound]
                stop = try number(body[dots.upperBound...], field: field, in: expression, microseconds)
            }
            let start = try number(startText, field: field, in: expression, microseconds)
            if stop != nil, step == 0 {
                step = microseconds ? 1_000_000 : 1
                if microseconds, let stop, start + step > stop {
                    throw invalid(expression, "the second range '\(item)' holds no whole second after its start")
                }
            }
            items.append(CalendarComponent.Item(start: start, stop: stop, step: step))
        }
        return CalendarComponent(items: items)
    }

    /// Checks `component` as systemd does: values in `range` (a day counted from the end of
    /// the month at most 28), a step no longer than the range, and one that can be taken
    /// at least once (from the end of the month: backwards).
    private static func validate(
        _ component: inout CalendarComponent, range: ClosedRange<Int64>, field: String, fromEnd: Bool = false,
        in expression: String
    ) throws(CalendarScheduleError) {
        let last = fromEnd ? range.upperBound - 3 : range.upperBound
        for index in component.items.indices {
            var item = component.items[index]
            if let stop = item.stop, stop > item.start, item.step > 0 {
                item.stop = stop - (stop - item.start) % item.step
            }
            if let stop = item.stop, stop == item.start || (stop > item.start && item.start + item.step > stop) {
                (item.stop, item.step) = (nil, 0)
            }
            component.items[index] = item
            let valid: Bool
            if !(range.lowerBound...last).contains(item.start) || item.step > last - range.lowerBound {
                valid = false
            } else if let stop = item.stop {
                valid = (range.lowerBound...last).contains(stop) && item.start + item.step <= stop
            } else if fromEnd {
                valid = item.start - item.step >= range.lowerBound
            } else {
                valid = item.start + item.step <= last
            }
            guard valid else {
                let shown = microseconds(field) ? "" : " (\(range.lowerBound)…\(last))"
                throw invalid(expression, "the \(field) '\(describe(item, field))' is out of range\(shown)")
            }
        }
    }

    private static func microseconds(_ field: String) -> Bool { field == "second" }

    private static func describe(_ item: CalendarComponent.Item, _ field: String) -> String {
        let unit: Int64 = microseconds(field) ? 1_000_000 : 1
        var text = "\(item.start / unit)"
        if let stop = item.stop { text += "..\(stop / unit)" }
        if item.step > 0 { text += "/\(item.step / unit)" }
        return text
    }

    /// A decimal number (leading zeros allowed: `02026`); for seconds, with decimals, in
    /// microseconds — rounded to the nearest, as systemd rounds (`00.9999999` is 1 s).
    private static func number(
        _ text: Substring, field: String, in expression: String, _ microseconds: Bool
    ) throws(CalendarScheduleError) -> Int64 {
        var whole = text
        var fraction: Substring = ""
        if microseconds, let dot = text.firstIndex(of: ".") {
            whole = text[..<dot]
            fraction = text[text.index(after: dot)...]
        }
        let significant = whole.drop { $0 == "0" }
        guard !whole.isEmpty, whole.count <= 12, significant.count <= 4,
            whole.allSatisfy({ $0.isASCII && $0.isNumber }), fraction.count <= 18,
            fraction.allSatisfy({ $0.isASCII && $0.isNumber }), let value = Int64(whole)
        else { throw invalid(expression, "'\(text)' is not a \(field) (a number)") }
        guard microseconds else { return value }
        let kept = fraction.prefix(6)
        let padded = kept + String(repeating: "0", count: 6 - kept.count)
        let roundsUp = fraction.dropFirst(6).first.map { $0 >= "5" } ?? false
        return value * 1_000_000 + (Int64(padded) ?? 0) + (roundsUp ? 1 : 0)
    }

    static func invalid(_ text: String, _ reason: String) -> CalendarScheduleError {
        CalendarScheduleError(.invalidExpression, "'\(text)' is not a calendar expression: \(reason)")
    }
}
