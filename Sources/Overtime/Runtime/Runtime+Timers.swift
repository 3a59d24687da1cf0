import OvertimeSupport
import Synchronization

/// A closure scheduled on a runtime's loop with ``Runtime/schedule(at:fileID:line:_:onCancel:)``.
/// Cancel it from any thread; a cancelled timer never runs.
public final class LoopTimer: Sendable {
    /// When it is due, on the runtime's clock.
    public let deadline: MonotonicInstant
    let callSite: CallSite
    private let body: @Sendable () -> Void
    private let onCancel: (@Sendable () -> Void)?
    private let settled = Atomic<Bool>(false)
    private let cancelledFlag = Atomic<Bool>(false)
    private let remove: @Sendable () -> Void

    init(
        deadline: MonotonicInstant, callSite: CallSite, body: @escaping @Sendable () -> Void,
        onCancel: (@Sendable () -> Void)?, remove: @escaping @Sendable () -> Void
    ) {
        self.deadline = deadline
        self.callSite = callSite
        self.body = body
        self.onCancel = onCancel
        self.remove = remove
    }

    /// Whether ``cancel()`` was called (or the runtime shut down) before it ran.
    public var isCancelled: Bool { cancelledFlag.load(ordering: .acquiring) }

    /// Cancels the timer unless it already ran. Safe from any thread, any number of times.
    public func cancel() {
        guard take() else { return }
        cancelledFlag.store(true, ordering: .releasing)
        onCancel?()
        remove()
    }

    /// On the loop: runs the body unless cancelled.
    func fire() {
        guard take() else { return }
        body()
    }

    /// Whether this call is the one that decides between running and cancelling.
    private func take() -> Bool {
        !settled.exchange(true, ordering: .acquiringAndReleasing)
    }
}

/// Timers and sleeping on the runtime's clock: with `ManualClock`, they fire when the
/// test advances time.
extension Runtime {
    /// Runs `body` on the loop thread at `deadline`, on the runtime's clock (at once if it
    /// has passed).
    ///
    /// A timer cancelled before it ran, or still pending when the runtime terminates,
    /// never runs `body`; it calls `onCancel` instead (on the cancelling thread, or on the
    /// loop at shutdown).
    @discardableResult
    public func schedule(
        at deadline: MonotonicInstant, fileID: StaticString = #fileID, line: UInt = #line,
        _ body: @escaping @Sendable () -> Void, onCancel: (@Sendable () -> Void)? = nil
    ) -> LoopTimer {
        schedule(at: deadline, callSite: CallSite(fileID: fileID, line: line), body: body, onCancel: onCancel)
    }

    /// Runs `body` on the loop thread after `delay`, on the runtime's clock (see
    /// ``schedule(at:fileID:line:_:onCancel:)``).
    @discardableResult
    public func schedule(
        after delay: Duration, fileID: StaticString = #fileID, line: UInt = #line,
        _ body: @escaping @Sendable () -> Void, onCancel: (@Sendable () -> Void)? = nil
    ) -> LoopTimer {
        schedule(
            at: clock.now + delay, callSite: CallSite(fileID: fileID, line: line), body: body, onCancel: onCancel)
    }

    /// Suspends until `deadline` on the runtime's clock.
    ///
    /// - Throws: `CancellationError` when the task is cancelled or the runtime terminates first.
    public func sleep(until deadline: MonotonicInstant, fileID: StaticString = #fileID, line: UInt = #line)
        async throws(CancellationError)
    {
        let callSite = CallSite(fileID: fileID, line: line)
        let timerBox = Locked<LoopTimer?>(nil)
        let completed: Bool = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let timer = schedule(
                    at: deadline, callSite: callSite, body: { continuation.resume(returning: true) },
                    onCancel: { continuation.resume(returning: false) })
                timerBox.withLock { $0 = timer }
                if Task.isCancelled { timer.cancel() }
            }
        } onCancel: {
            timerBox.withLock { $0 }?.cancel()
        }
        if !completed { throw CancellationError() }
    }

    /// Suspends for `duration` on the runtime's clock.
    ///
    /// - Throws: `CancellationError` when the task is cancelled or the runtime terminates first.
    public func sleep(for duration: Duration, fileID: StaticString = #fileID, line: UInt = #line)
        async throws(CancellationError)
    {
        try await sleep(until: clock.now + duration, fileID: fileID, line: line)
    }

    func schedule(
        at deadline: MonotonicInstant, callSite: CallSite, body: @escaping @Sendable () -> Void,
        onCancel: (@Sendable () -> Void)?
    ) -> LoopTimer {
        let core = self.core
        let queue = self.queue
        let timer = LoopTimer(
            deadline: deadline, callSite: callSite, body: body, onCancel: onCancel,
            remove: { _ = queue.enqueue(.run { core.timersChanged() }) })
        if !onLoop({ core in core.add(timer) }) {
            timer.cancel()  // the runtime has shut down
        }
        return timer
    }
}
