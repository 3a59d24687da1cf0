// Putting the store's written batches on disk: one fsync on the sync queue for every batch
// written before it began, then the grants of the runs whose ends it covered end.

import Overtime
import Synchronization

extension Scheduler {
    /// On the queue, after a commit: asks the sync queue to put it on disk. Asks made while
    /// an `fsync` runs share the next one (each `fsync` covers every batch written before
    /// it began), so a thousand commits cost a few `fsync`s, not a thousand.
    func syncSoon() {
        guard !state.value.abandoned else { return }
        guard !syncQueued.exchange(true, ordering: .acquiringAndReleasing) else { return }
        syncQueue.async { [self] in sync() }
    }

    /// On the sync queue: one `fsync` for every batch written so far, unless an earlier one
    /// covered them; the queue hears ``synced(_:)`` or, failing, ``syncFailed()``.
    private func sync() {
        syncQueued.store(false, ordering: .releasing)
        let covered = writtenBatches.load(ordering: .acquiring)
        guard covered > syncedBatches.value else { return }
        do {
            try store.sync()
        } catch {
            logger.error("cannot put the schedule on disk: \(error)")
            queue.async { [self] in syncFailed() }
            return
        }
        syncedBatches.value = covered
        queue.async { [self] in synced(covered) }
    }

    /// On the queue: every batch up to `covered` is on disk, so the grants of the runs
    /// whose ends they hold end.
    private func synced(_ covered: Int) {
        var grants: [BackgroundTaskID] = []
        state.value.awaitingDisk.removeAll { run in
            guard run.batch <= covered else { return false }
            if !run.grantEnded { grants.append(run.grant) }
            return true
        }
        for grant in grants { runtime.endBackgroundTask(grant) }
    }

    /// On the queue: the sync failed; it is tried again a second later (on the runtime's
    /// clock), the grants open meanwhile.
    private func syncFailed() {
        _ = runtime.schedule(after: .seconds(1)) { [weak self] in
            guard let self else { return }
            queue.async { self.syncSoon() }
        }
    }
}
