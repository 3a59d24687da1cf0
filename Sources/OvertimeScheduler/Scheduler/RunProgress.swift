// How far a running handler says it has come.

/// What a running handler reports with ``ScheduledTask/setProgress(_:message:)``: a
/// fraction done and what it is doing, as WorkManager's `setProgress` and
/// `BGContinuedProcessingTask`'s progress show it. Seen in ``PendingRequest/progress`` and
/// `overtimectl schedule`, and by inspectors of the store (a dashboard's Running page, a
/// fleet's included) in ``RunningAttempt/progress``: the store records it at most once a
/// second per run, the latest report winning. Shown only while the run runs.
public struct RunProgress: Sendable, Hashable, CustomStringConvertible {
    /// Done so far, from 0 to 1.
    public let fraction: Double
    /// What the handler is doing, at most ``maximumMessageBytes`` of UTF-8; `nil` for none.
    public let message: String?

    /// The longest message kept (longer ones are cut at a character boundary).
    public static let maximumMessageBytes = 200

    /// `fraction` (clamped to 0…1) and `message` (cut to ``maximumMessageBytes``); `nil`
    /// when `fraction` is not a number.
    public init?(fraction: Double, message: String? = nil) {
        guard !fraction.isNaN else { return nil }
        self.fraction = min(max(fraction, 0), 1)
        self.message = message.map(Self.cut)
    }

    /// `42 %: uploading segment 3`, as `overtimectl schedule` shows it.
    public var description: String {
        let percent = Int((fraction * 100).rounded(.down))
        return message.map { "\(percent) %: \($0)" } ?? "\(percent) %"
    }

    private static func cut(_ text: String) -> String {
        guard text.utf8.count > maximumMessageBytes else { return text }
        var kept = ""
        for character in text {
            guard kept.utf8.count + character.utf8.count <= maximumMessageBytes else { break }
            kept.append(character)
        }
        return kept
    }
}
