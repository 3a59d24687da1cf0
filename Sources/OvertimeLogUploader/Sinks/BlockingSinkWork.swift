// The bridge from a sink's async `store` to blocking I/O on a queue of its own.

import Overtime
import OvertimeSupport

/// Runs `work` on `queue` and waits for it without blocking the caller's thread. `work`
/// gets a check that turns true once the waiting task is cancelled (the grant expired);
/// `onCancel` runs then too, from any thread, to unblock what `work` waits on (shut a
/// socket down, raise librelp's stop flag).
package func runBlockingSinkWork(
    on queue: SerialWorkQueue,
    _ work: @escaping @Sendable (_ isCancelled: @escaping @Sendable () -> Bool) -> Result<Void, SinkError>,
    onCancel: @escaping @Sendable () -> Void = {}
) async throws(SinkError) {
    let cancelled = Locked(false)
    let isCancelled: @Sendable () -> Bool = { cancelled.withLock { $0 } }
    let outcome: Result<Void, SinkError> = await withTaskCancellationHandler {
        await withCheckedContinuation { continuation in
            queue.async {
                continuation.resume(returning: isCancelled() ? .failure(.cancelled) : work(isCancelled))
            }
        }
    } onCancel: {
        cancelled.withLock { $0 = true }
        onCancel()
    }
    try outcome.get()
}
