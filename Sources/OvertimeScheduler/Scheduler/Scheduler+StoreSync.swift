// Putting the store's written batches on disk: one fsync on the sync queue for every batch
// written before it began, then the grants of the runs whose ends it covered end.

import Overtime

extension Scheduler {
    /// Queues one sync of the store for however many batches are written before it runs.
    func syncSoon() {
        once(\.syncQueued, on: syncQueue) { $0.sync() }
    }

    /// On the sync queue: one `fsync` for every batch written so far, then the grants of
    /// the runs whose ends it put on disk end. A failed sync is tried again a second later
    /// (on the runtime's clock); the grants stay open meanwhile.
    private func sync() {
        let covered = state.withLock { state in
            state.syncQueued = false
            return state.abandoned ? nil : state.written
        }
        guard let covered else { return }
        do {
            try store.sync()
        } catch {
            logger.error("cannot put the schedule on disk: \(error)")
            _ = runtime.schedule(after: .seconds(1)) { [weak self] in self?.syncSoon() }
            return
        }
        queue.async { [self] in
            let grants = state.withLock { state -> [BackgroundTaskID] in
                var grants: [BackgroundTaskID] = []
                state.awaitingDisk.removeAll { run in
                    guard run.batch <= covered else { return false }
                    if !run.grantEnded { grants.append(run.grant) }
                    return true
                }
                return grants
            }
            for grant in grants { runtime.endBackgroundTask(grant) }
        }
    }
}
