// The ranges every duration a scheduler takes must fall in, and why.

import Overtime

/// The ranges a request's durations (and a scheduler's) must fall in. A value outside is
/// refused at submission with ``SchedulerError/Code/invalidRequest`` naming the field and
/// its range; nothing is clamped silently.
public enum ScheduleLimits {
    /// The most bytes a request's input, and a run's output, hold: 64 KiB. The history keeps
    /// every attempt's output, so it stays small (WorkManager's limit is 10 KB); larger
    /// results belong in a file the output names.
    public static let maximumDataBytes = 65_536

    /// Checks data of `count` bytes for `field` (`input`, `output`).
    static func check(dataOf count: Int, field: String, identifier: String) throws(SchedulerError) {
        guard count > maximumDataBytes else { return }
        throw SchedulerError(
            code: .dataTooLarge,
            message: "'\(identifier)': its \(field) is \(count) bytes; at most \(maximumDataBytes) are kept",
            field: field)
    }

    /// The most prerequisites a request has (``ScheduledTaskRequest/prerequisites``): each
    /// hands its output on, and they stay with the request until it runs.
    public static let maximumPrerequisites = 16

    /// The most tags a request has.
    public static let maximumTags = 16
    /// The longest tag, in UTF-8 bytes.
    public static let maximumTagLength = 64

    /// Checks `tag`: 1 to ``maximumTagLength`` bytes, no comma (the stores' separator),
    /// no control character.
    static func check(tag: String, identifier: String?) throws(SchedulerError) {
        let bytes = tag.utf8
        guard !bytes.isEmpty, bytes.count <= maximumTagLength,
            !bytes.contains(where: { $0 == UInt8(ascii: ",") || $0 < 0x20 || $0 == 0x7F })
        else {
            let owner = identifier.map { "'\($0)': " } ?? ""
            throw SchedulerError(
                code: .invalidRequest,
                message:
                    "\(owner)the tag '\(tag.prefix(80))' must be 1 to \(maximumTagLength) bytes without commas or control characters",
                field: "tags")
        }
    }

    /// The shortest repetition interval: 100 ms. Every run is a grant and a durable
    /// commit of its plan and history; below this the bookkeeping outweighs any work, and
    /// a shared store would take thousands of writes a second from one request. (Where
    /// WorkManager's floor of 15 minutes protects a phone's battery, a daemon may poll
    /// faster; systemd timers default to a minute's accuracy for the same reason.)
    public static let minimumInterval: Duration = .milliseconds(100)

    /// The longest duration any field takes: 100 years. Plans are wall-clock nanoseconds
    /// since 1970 in 64 bits (they reach 2262): a longer interval, delay or grant could
    /// overflow a plan and run at once instead of never.
    public static let maximumDuration: Duration = .seconds(100 * 365 * 86_400)

    /// The most attempts a retry policy allows.
    public static let maximumAttempts = 1_000_000

    /// The longest identifier (or handler prefix), in UTF-8 bytes: 1,024. Every store
    /// indexes identifiers (PostgreSQL's B-tree refuses a key over about 2.7 KB), and a
    /// status line or history names them whole.
    public static let maximumIdentifierBytes = 1024

    /// Checks that `identifier` (`field`: an identifier or a prefix) can be stored and
    /// shown by every store: not empty, at most ``maximumIdentifierBytes``, and no control
    /// character (a NUL ends a C string; a newline splits a line of `overtimectl`'s output).
    static func check(identifier: String, field: String = "identifier") throws(SchedulerError) {
        let bytes = identifier.utf8.count
        let problem: String? =
            if bytes == 0 {
                "must not be empty"
            } else if bytes > maximumIdentifierBytes {
                "must be at most \(maximumIdentifierBytes) bytes of UTF-8, got \(bytes)"
            } else if let control = identifier.unicodeScalars.first(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                "must not contain control characters, got U+\(String(control.value, radix: 16, uppercase: true).leftPadded(to: 4))"
            } else {
                nil
            }
        guard let problem else { return }
        let shown = bytes > 64 ? String(identifier.prefix(32)) + "…" : identifier
        throw SchedulerError(
            code: .invalidRequest,
            message:
                "\(field) '\(shown.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? "?" : String($0) }.joined())' \(problem)",
            field: field)
    }

    /// Checks `value` against `range`; the error names `field` and the range.
    static func check(
        _ field: String, _ value: Duration, in range: ClosedRange<Duration>, identifier: String? = nil
    ) throws(SchedulerError) {
        guard range.contains(value) else {
            let subject = identifier.map { "'\($0)': " } ?? ""
            throw SchedulerError(
                code: .invalidRequest,
                message:
                    "\(subject)\(field) must be between \(describe(range.lowerBound)) and \(describe(range.upperBound)), got \(describe(value))",
                field: field)
        }
    }

    private static func describe(_ duration: Duration) -> String {
        duration == maximumDuration ? "100 years" : "\(duration)"
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: max(0, width - count)) + self
    }
}
