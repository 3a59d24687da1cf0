// The scheduler's requests by state, counted on its queue when metrics are collected.

import Overtime

extension Scheduler {
    /// Asks the queue to count the requests by state. The count is recorded when the
    /// queue gets to it: a collection shows the counts of the one before it (the loop,
    /// where collections may run, never waits for the store). One count at a time.
    func sampleRequestCounts() {
        guard !samplingRequests.exchange(true, ordering: .acquiringAndReleasing) else { return }
        queue.task { [self] in
            await recordRequestCounts()
            samplingRequests.store(false, ordering: .releasing)
        }
    }

    /// Records `overtime_scheduler_requests{state}`: enqueued and blocked from the store,
    /// running from this scheduler's runs. On the queue.
    private func recordRequestCounts() async {
        guard !state.value.abandoned, !runtimeShutDown.withLock({ $0 }) else { return }
        do {
            let counts = try await store.waitingCounts(at: wallClockNow)
            metrics.recordRequests(
                enqueued: counts.enqueued, blocked: counts.blocked, running: state.value.running.count)
        } catch {
            logger.debug("cannot count the requests for metrics: \(error)")
        }
    }
}
