import Dispatch
import OvertimeSupport

/// The Swift-concurrency and Foundation-shaped forms of a grant.
extension Runtime {
    /// Runs `body` inside a grant: begins it, ends it when `body` returns or throws.
    ///
    /// On expiration the body's task is cancelled. If the body is still running at the
    /// deadline, this call throws ``BackgroundTaskError/terminated(_:)`` then, without
    /// waiting for the body (which goes on, cancelled). Cancelling the calling task
    /// cancels the body.
    ///
    /// - Throws: ``BackgroundTaskError/refused(_:)`` when the grant is refused, the
    ///   terminated error, or what `body` throws.
    public func withBackgroundTask<T: Sendable>(
        name: String,
        maximumDuration: Duration? = nil,
        fileID: StaticString = #fileID,
        line: UInt = #line,
        _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let race = BodyRace<T>()
        let result = begin(
            name: name, maximumDuration: maximumDuration, callSite: CallSite(fileID: fileID, line: line),
            expirationHandler: { race.cancelBody() },
            endHandler: { reason, report in
                if reason == .terminated, let report { race.finish(.failure(BackgroundTaskError.terminated(report))) }
            })
        let id: BackgroundTaskID
        switch result {
        case .success(let granted): id = granted
        case .failure(let refusal): throw BackgroundTaskError.refused(refusal)
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                race.start(continuation) {
                    Task {
                        let outcome: Result<T, any Error>
                        do { outcome = .success(try await body()) } catch { outcome = .failure(error) }
                        // The grant ends before the caller resumes: code after the call
                        // finds it ended.
                        race.finish(outcome) { self.endBackgroundTask(id, fileID: fileID, line: line) }
                    }
                }
            }
        } onCancel: {
            race.cancelBody()
        }
    }

    /// Foundation's `ProcessInfo.performExpiringActivity(withReason:using:)`: calls
    /// `block(false)` on a background queue inside a grant, which ends when the block
    /// returns. If the grant expires meanwhile, `block(true)` is called concurrently
    /// so the first call can stop; if no grant can be had, `block(true)` is called alone.
    public func performExpiringActivity(reason: String, _ block: @escaping @Sendable (_ expired: Bool) -> Void) {
        let id = beginBackgroundTask(name: reason) {
            DispatchQueue.global().async { block(true) }
        }
        guard !id.isInvalid else {
            DispatchQueue.global().async { block(true) }
            return
        }
        DispatchQueue.global().async {
            block(false)
            self.endBackgroundTask(id)
        }
    }
}

/// The race between a body finishing and its grant being terminated: whichever comes
/// first resumes the caller, exactly once.
final class BodyRace<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, any Error>?
        var early: Result<T, any Error>?
        var task: Task<Void, Never>?
        var cancelRequested = false
        var finished = false
    }

    private let state = Locked(State())

    func start(_ continuation: CheckedContinuation<T, any Error>, makeTask: () -> Task<Void, Never>) {
        let early: Result<T, any Error>? = state.withLock { state in
            if let early = state.early { return early }
            state.continuation = continuation
            return nil
        }
        if let early {
            continuation.resume(with: early)
            return
        }
        let task = makeTask()
        let cancelNow = state.withLock { state in
            state.task = task
            return state.cancelRequested
        }
        if cancelNow { task.cancel() }
    }

    func cancelBody() {
        let task = state.withLock { state in
            state.cancelRequested = true
            return state.task
        }
        task?.cancel()
    }

    /// Resumes the caller with `outcome` if nothing did yet, calling `beforeResuming` first;
    /// returns whether it did.
    @discardableResult
    func finish(_ outcome: Result<T, any Error>, beforeResuming: () -> Void = {}) -> Bool {
        let continuation: CheckedContinuation<T, any Error>?? = state.withLock { state in
            if state.finished { return .none }
            state.finished = true
            if state.continuation == nil { state.early = outcome }
            defer { state.continuation = nil }
            return .some(state.continuation)
        }
        guard case .some(let resumable) = continuation else { return false }
        beforeResuming()
        resumable?.resume(with: outcome)
        return true
    }
}
