// The uploader's wait between retries, which a lifecycle change cuts short.

import Overtime

/// A sleep that ``wake()`` ends early (and task cancellation too). A wake while nobody
/// sleeps makes the next sleep return at once, so a wake is never lost between checks.
final class BackoffSleep: Sendable {
    private struct State {
        var sleeper: (id: UInt64, continuation: CheckedContinuation<Bool, Never>)?
        var nextID: UInt64 = 0
        var pendingWake = false
    }

    private let state = Locked(State())

    /// Sleeps for `duration`; returns `true` when woken (or cancelled) before it passed.
    func sleep(for duration: Duration) async -> Bool {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let id: UInt64? = state.withLock { state in
                    if state.pendingWake || Task.isCancelled {
                        state.pendingWake = false
                        return nil
                    }
                    state.nextID += 1
                    state.sleeper = (state.nextID, continuation)
                    return state.nextID
                }
                guard let id else { return continuation.resume(returning: true) }
                Task {
                    try? await Task.sleep(for: duration)
                    self.resume(id: id, early: false)
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
        let continuation: CheckedContinuation<Bool, Never>? = state.withLock { state in
            guard let sleeper = state.sleeper, sleeper.id == id else { return nil }  // a stale timer
            state.sleeper = nil
            return sleeper.continuation
        }
        continuation?.resume(returning: early)
    }
}
