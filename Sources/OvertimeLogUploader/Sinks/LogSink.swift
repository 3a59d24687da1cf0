/// Where sealed segments go: a collector that stores each under its stable name.
///
/// A sink must be idempotent: storing the same segment twice leaves one copy, because a
/// crash between the collector's acknowledgement and the checkpoint sends it again.
/// It must honour task cancellation (the uploader cancels on expiration) by aborting
/// the transfer in flight and throwing ``SinkError/cancelled``.
///
/// ``LogUploader`` calls a program's sink on a thread of its own, never the runtime's
/// loop, so its ``store(_:)`` may do blocking I/O; the uploader waits for the outcome
/// without holding the loop. (The built-in sinks that never block are called on the loop.)
public protocol LogSink: Sendable, CustomStringConvertible {
    /// Stores `segment` (its bytes, read with ``SealedSegment/readBytes()``, byte for byte)
    /// under `segment.name`.
    func store(_ segment: SealedSegment) async throws(SinkError)

    /// How many ``store(_:)`` calls it takes at once; the uploader starts at most this
    /// many (and at most ``UploaderConfiguration/maximumUploadsInFlight``).
    var concurrentStores: Int { get }
}

/// A sink whose ``LogSink/store(_:)`` never blocks the thread it is called on (its
/// blocking work, if any, runs on a queue of its own): the uploader calls it on the
/// runtime's loop, saving two thread hops per segment. Other sinks — a program's own —
/// are called on the uploader's file queue, where blocking is fine.
package protocol NonBlockingLogSink: LogSink {}

extension LogSink {
    /// One store at a time, unless the sink says otherwise.
    public var concurrentStores: Int { 1 }
}
