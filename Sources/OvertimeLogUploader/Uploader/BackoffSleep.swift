// The uploader's wait between retries, on the runtime's clock, which a lifecycle change cuts short.

import Overtime
import OvertimeSupport

/// A sleep on a runtime's timer that ``wake()`` ends early (and task cancellation too).
/// A wake while nobody sleeps makes the next sleep return at once, so a wake is never
/// lost between checks.
final class BackoffSleep: Sendable {
    private struct State {
        var sleeper:
            (id: UInt64, until: MonotonicInstant, continuation: CheckedContinuation<Bool, Never>, timer: LoopTimer?)?
        var nextID: UInt64 = 0
        var pendingWake = false
    }

    private let runtime: Runtime
    private let state = Locked(State())

    init(runtime: Runtime) {
        self.runtime = runtime
    }

    /// Whether a sleep is under way with its timer handed to the runtime (so that, once
    /// the runtime has applied what is queued, the timer is the clock's to fire).
    var isSleeping: Bool { sleepsUntil != nil }

    /// When the sleep under way (its timer handed to the runtime) ends on the runtime's
    /// clock, or `nil`: a test driving virtual time advances exactly that far.
    var sleepsUntil: MonotonicInstant? { state.withLock { $0.sleeper?.timer != nil ? $0.sleeper?.until : nil } }

    /// Sleeps for `duration` on the runtime's clock; returns `true` when woken (or
    /// cancelled, or the runtime shut down) before it passed.
    func sleep(for duration: Duration) async -> Bool {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let id: UInt64? = state.withLock { state in
                    if state.pendingWake || Task.isCancelled {
                        state.pendingWake = false
                        return nil
                    }
                    state.nextID += 1
                    state.sleeper = (state.nextID, runtime.clock.now + duration, continuation, nil)
                    return state.nextID
                }
                guard let id else { return continuation.resume(returning: true) }
                let timer = runtime.schedule(after: duration) { [self] in
                    resume(id: id, early: false)
                } onCancel: { [self] in
                    resume(id: id, early: true)
                }
                state.withLock { state in
                    if state.sleeper?.id == id { state.sleeper?.timer = timer }
                }
            }
        } onCancel: {
            wake()
        }
    }

    /// Ends the current sleep now, or the next one as soon as it starts.
    func wake() {
        let sleeping = state.withLock { state in
            if state.sleeper == nil { state.pendingWake = true }
            return state.sleeper?.id
        }
        if let sleeping { resume(id: sleeping, early: true) }
    }

    private func resume(id: UInt64, early: Bool) {
        let sleeper = state.withLock {
            state -> (continuation: CheckedContinuation<Bool, Never>, timer: LoopTimer?)? in
            guard let sleeper = state.sleeper, sleeper.id == id else { return nil }  // a stale timer
            state.sleeper = nil
            return (sleeper.continuation, sleeper.timer)
        }
        guard let sleeper else { return }
        if early { sleeper.timer?.cancel() }
        sleeper.continuation.resume(returning: early)
    }
}
