/// Work handed to the loop thread from any thread.
///
/// One queue, appended under one lock, gives FIFO order per calling thread (and, more
/// strongly, in happens-before order across threads). The loop is woken only when the
/// queue goes from empty to non-empty: one `uv_async_send` per batch, however many
/// items the batch holds.

import OvertimeSupport

final class InboundQueue: Sendable {
    private struct State {
        var items: [InboundWork] = []
        var closed = false
    }

    private let state = Locked(State())
    private let loop: EventLoop

    init(loop: EventLoop) {
        self.loop = loop
    }

    /// Appends `item`; returns `false` (and drops nothing silently: the caller handles
    /// it) once the loop has shut down.
    func enqueue(_ item: InboundWork) -> Bool {
        let wasEmpty: Bool? = state.withLock { state in
            if state.closed { return nil }
            let wasEmpty = state.items.isEmpty
            state.items.append(item)
            return wasEmpty
        }
        guard let wasEmpty else { return false }
        if wasEmpty { loop.wake() }
        return true
    }

    /// Moves every queued item into `buffer` (which must be empty), keeping capacity.
    func takeAll(into buffer: inout [InboundWork]) {
        state.withLock { state in
            swap(&state.items, &buffer)
        }
    }

    /// Refuses further items and returns what was still queued.
    func close() -> [InboundWork] {
        state.withLock { state in
            state.closed = true
            defer { state.items = [] }
            return state.items
        }
    }
}

/// One unit of work for the loop thread.
enum InboundWork: Sendable {
    /// A grant begun off the loop; its ID was already returned to the caller.
    case begin(QueuedBegin)
    /// `endBackgroundTask` called off the loop.
    case end(BackgroundTaskID, CallSite)
    /// A lifecycle request, and who made it (for the logs).
    case lifecycle(LifecycleRequest, source: String)
    /// A job of the loop's executor (an actor or task isolated to the loop).
    case job(UnownedJob)
    /// Anything rarer: a closure run on the loop.
    case run(@Sendable () -> Void)
}
