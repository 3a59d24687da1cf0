/// Why a sink did not store a segment: a ``Code`` that decides what the uploader does,
/// and the collector's or the system's words.
public struct SinkError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What the uploader does about the failure. A struct over a private enum, so that
    /// codes can be added without breaking code that switches over them (handle the
    /// unknown with `default`).
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Kind: Hashable {
            case retryable, permanent, cancelled
        }

        private let kind: Kind

        /// Try again later (connection refused, 5xx, 429…).
        public static let retryable = Code(kind: .retryable)
        /// The collector refused this segment for good (a non-retryable 4xx): dead-letter it.
        public static let permanent = Code(kind: .permanent)
        /// The upload was aborted because its task was cancelled (the grant expired).
        public static let cancelled = Code(kind: .cancelled)

        /// `retryable`, `permanent` or `cancelled`.
        public var description: String {
            switch kind {
            case .retryable: "retryable"
            case .permanent: "permanent"
            case .cancelled: "cancelled"
            }
        }
    }

    /// What the uploader does about it.
    public let code: Code
    /// The cause, in words.
    public let reason: String
    /// How long the collector asked to wait before the next try, if it said.
    public let retryAfter: Duration?

    /// Try again later, after `retryAfter` if the collector said.
    public static func retryable(_ reason: String, retryAfter: Duration?) -> SinkError {
        SinkError(code: .retryable, reason: reason, retryAfter: retryAfter)
    }

    /// The collector refused this segment for good: dead-letter it.
    public static func permanent(_ reason: String) -> SinkError {
        SinkError(code: .permanent, reason: reason, retryAfter: nil)
    }

    /// The upload was aborted because its task was cancelled.
    public static let cancelled = SinkError(code: .cancelled, reason: "cancelled", retryAfter: nil)

    /// A sentence naming the cause.
    public var description: String {
        switch code {
        case .retryable: "retryable: \(reason)" + (retryAfter.map { " (retry after \($0))" } ?? "")
        case .permanent: "refused for good: \(reason)"
        default: reason
        }
    }
}
