/// Where sealed segments go: a collector that stores each under its stable name.
///
/// A sink must be idempotent: storing the same segment twice leaves one copy, because a
/// crash between the collector's acknowledgement and the checkpoint sends it again.
/// It must honour task cancellation (the uploader cancels on expiration) by aborting
/// the transfer in flight and throwing ``SinkError/cancelled``.
public protocol LogSink: Sendable, CustomStringConvertible {
    /// Stores `segment` (the file at `segment.path`, byte for byte) under `segment.name`.
    func store(_ segment: SealedSegment) async throws(SinkError)
}

/// Why a sink did not store a segment.
public enum SinkError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Try again later (connection refused, 5xx, 429…), after `retryAfter` if the collector said.
    case retryable(String, retryAfter: Duration?)
    /// The collector refused this segment for good (a non-retryable 4xx): dead-letter it.
    case permanent(String)
    /// The upload was aborted because its task was cancelled (the grant expired).
    case cancelled

    /// A sentence naming the cause.
    public var description: String {
        switch self {
        case .retryable(let reason, let after):
            "retryable: \(reason)" + (after.map { " (retry after \($0))" } ?? "")
        case .permanent(let reason): "refused for good: \(reason)"
        case .cancelled: "cancelled"
        }
    }
}
