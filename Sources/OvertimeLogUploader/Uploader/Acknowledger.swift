import Overtime
import OvertimeSupport

/// Acknowledges stored segments to the spool off the upload path, coalescing: while one
/// checkpoint is being made durable (two fsyncs), segments stored meanwhile gather and
/// the next checkpoint write covers them all. Uploads never wait for the disk.
///
/// Safe because a segment is acknowledged only once the collector stored it: a crash
/// before its checkpoint is durable means it is sent again, under the same name.
final class Acknowledger: Sendable {
    private let spool: Spool
    private let onAcknowledged: @Sendable ([SealedSegment]) -> Void
    private let state = Locked(State())
    /// The uploader's acknowledgement queue: serial, shared by its drains one after another.
    private let queue: SerialWorkQueue

    private struct State {
        var waiting: [SealedSegment] = []
        var writing = false
        var failure: SpoolError?
    }

    /// Acknowledges to `spool` on `queue`; `onAcknowledged` hears of each batch once it is
    /// durable.
    init(spool: Spool, queue: SerialWorkQueue, onAcknowledged: @escaping @Sendable ([SealedSegment]) -> Void) {
        self.spool = spool
        self.queue = queue
        self.onAcknowledged = onAcknowledged
    }

    /// Queues `segment` (stored by the collector) for the next checkpoint write.
    func submit(_ segment: SealedSegment) {
        let start = state.withLock { state in
            state.waiting.append(segment)
            defer { state.writing = true }
            return !state.writing
        }
        if start { queue.async { self.writeCheckpoints() } }
    }

    /// The first checkpoint write that failed, if any (its segments stay and are sent again).
    var failure: SpoolError? { state.withLock { $0.failure } }

    /// Waits until every submitted segment is acknowledged (or failed); the failure, if any.
    func finish() async -> SpoolError? {
        await withCheckedContinuation { continuation in
            // The queue is serial and every write was queued by an earlier `submit`, so this
            // runs after the last one.
            queue.async { continuation.resume(returning: self.state.withLock { $0.failure }) }
        }
    }

    private func writeCheckpoints() {
        while true {
            let batch: [SealedSegment] = state.withLock { state in
                // After a failure nothing more is acknowledged: those segments are sent again.
                if state.failure != nil { state.waiting = [] }
                if state.waiting.isEmpty { state.writing = false }
                defer { state.waiting = [] }
                return state.waiting
            }
            guard !batch.isEmpty else { return }
            do throws(SpoolError) {
                try spool.acknowledge(batch)
                onAcknowledged(batch)
            } catch {
                state.withLock { $0.failure = error }
            }
        }
    }
}
