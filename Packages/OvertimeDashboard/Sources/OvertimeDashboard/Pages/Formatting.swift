// How times, durations, bytes and links are written on the pages: UTC with the distance
// from now, so that a reader in any zone reads the same page.

import Foundation
import Overtime

enum Formatting {
    /// `2026-11-27 00:16:37Z`.
    static func time(_ instant: WallClockInstant) -> String {
        var seconds = time_t(instant.nanosecondsSinceEpoch / 1_000_000_000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday)) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
    }

    /// `date` as an instant, to the second; a date beyond the instants' range (1677 to 2262,
    /// nanoseconds in 64 bits), which an address or a damaged log may name, as its first or
    /// last.
    static func instant(_ date: Date) -> WallClockInstant {
        let seconds = date.timeIntervalSince1970.rounded(.down)
        let beyond = WallClockInstant(nanosecondsSinceEpoch: seconds < 0 ? .min : .max)
        guard let whole = Int64(exactly: seconds) else { return beyond }
        let (nanoseconds, overflow) = whole.multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? beyond : WallClockInstant(nanosecondsSinceEpoch: nanoseconds)
    }

    /// The characters that change the direction text is shown in (U+202E shows
    /// `invoice-\u{202E}gnp.exe` as `invoice-exe.png`): none is in a template, so each in a page
    /// came from the schedule, and is shown as its code point instead (`[U+202E]`).
    static func showingDirectionControls(_ html: String) -> String {
        func isControl(_ scalar: Unicode.Scalar) -> Bool {
            switch scalar.value {
            case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
            default: false
            }
        }
        guard html.unicodeScalars.contains(where: isControl) else { return html }
        var shown = String.UnicodeScalarView()
        for scalar in html.unicodeScalars {
            if isControl(scalar) {
                let hex = String(scalar.value, radix: 16, uppercase: true)
                let padded = String(repeating: "0", count: max(0, 4 - hex.count)) + hex
                shown.append(contentsOf: "[U+\(padded)]".unicodeScalars)
            } else {
                shown.append(scalar)
            }
        }
        return String(shown)
    }

    /// `in 3 min`, `2 h ago`, `now`.
    static func relative(_ instant: WallClockInstant, from now: WallClockInstant) -> String {
        let difference = instant - now
        if abs(difference.components.seconds) < 1 { return "now" }
        let text = duration(difference < .zero ? .zero - difference : difference)
        return difference < .zero ? "\(text) ago" : "in \(text)"
    }

    /// `850 ms`, `12 s`, `3 min 5 s`, `2 h 10 min`, `3 d 4 h`.
    static func duration(_ duration: Duration) -> String {
        let milliseconds = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        if milliseconds < 1000 { return "\(milliseconds) ms" }
        let seconds = milliseconds / 1000
        if seconds < 60 { return "\(seconds) s" }
        if seconds < 3600 { return "\(seconds / 60) min" + (seconds % 60 == 0 ? "" : " \(seconds % 60) s") }
        if seconds < 86_400 {
            return "\(seconds / 3600) h" + (seconds % 3600 / 60 == 0 ? "" : " \(seconds % 3600 / 60) min")
        }
        return "\(seconds / 86_400) d" + (seconds % 86_400 / 3600 == 0 ? "" : " \(seconds % 86_400 / 3600) h")
    }

    /// An attempt's output or a request's input: the text when it is UTF-8 (shown escaped,
    /// as text), else its size.
    static func bytes(_ bytes: [UInt8]?) -> String? {
        guard let bytes, !bytes.isEmpty else { return nil }
        if let text = String(validating: bytes, as: UTF8.self) {
            return text.count > 2000 ? String(text.prefix(2000)) + "…" : text
        }
        return "\(bytes.count) bytes (not text)"
    }

    /// `value` as a query parameter's value: every byte but unreserved ones escaped.
    /// A count with its thousands apart (`12,345`), as the pages write numbers.
    static func count(_ number: Int) -> String {
        let digits = Array(String(number.magnitude))
        var grouped = ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { grouped.append(",") }
            grouped.append(digit)
        }
        return (number < 0 ? "-" : "") + grouped
    }

    static func query(_ value: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }
}
