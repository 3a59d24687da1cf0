// Putting the store's written batches on disk: one fsync on the sync queue for every batch
// written before it began, then the grants of the runs whose ends it covered end.

import Overtime

extension Scheduler {
    /// On the queue: puts every batch written so far on disk, with the sync under way if
    /// none runs, else with one more after it (batches written meanwhile share it).
    func syncSoon() {
        state.value.syncWanted = true
        guard !state.value.syncInFlight else { return }
        startSync()
    }

    /// Hands the sync queue what to cover; it answers with ``synced(_:)`` or, failing,
    /// ``syncFailed()``. The queue keeps deciding meanwhile.
    private func startSync() {
        guard !state.value.abandoned else { return }
        let covered = state.value.written
        state.value.syncWanted = false
        state.value.syncInFlight = true
        syncQueue.async { [self] in
            do {
                try store.sync()
            } catch {
                logger.error("cannot put the schedule on disk: \(error)")
                queue.async { [self] in syncFailed() }
                return
            }
            queue.async { [self] in synced(covered) }
        }
    }

    /// Every batch up to `covered` is on disk: the grants of the runs whose ends they hold end.
    private func synced(_ covered: Int) {
        state.value.syncInFlight = false
        var grants: [BackgroundTaskID] = []
        state.value.awaitingDisk.removeAll { run in
            guard run.batch <= covered else { return false }
            if !run.grantEnded { grants.append(run.grant) }
            return true
        }
        for grant in grants { runtime.endBackgroundTask(grant) }
        if state.value.syncWanted { startSync() }
    }

    /// The sync failed: tried again a second later (on the runtime's clock); the grants
    /// stay open meanwhile.
    private func syncFailed() {
        state.value.syncInFlight = false
        _ = runtime.schedule(after: .seconds(1)) { [weak self] in
            guard let self else { return }
            queue.async { self.syncSoon() }
        }
    }
}
