// A running handler's progress, written to the store for inspectors.

import Overtime
import OvertimeSupport

extension Scheduler {
    /// On the queue: writes the progress run `runID` of `identifier` reported last, now or
    /// at the time ``ProgressRecording`` gives; nothing once the run has ended (an inspector
    /// shows progress only beside the attempt in progress that reported it).
    func recordProgress(_ identifier: String, runID: Int64) async {
        guard let run = state.value.running[identifier], run.task.runID == runID, run.ending == nil else { return }
        let now = runtime.clock.now
        let at = ProgressRecording.writeTime(lastWritten: run.progressWrittenAt, now: now)
        guard at <= now else {
            runtime.schedule(at: at) { [weak self] in
                self?.queue.task { [weak self] in await self?.recordProgress(identifier, runID: runID) }
            }
            return
        }
        guard let progress = run.task.takeProgressToRecord() else { return }
        state.value.running[identifier]?.progressWrittenAt = now
        do throws(ScheduleStoreError) {
            try await store.recordProgress(identifier, runID: runID, progress, at: wallClockNow)
        } catch {
            // Progress is shown, not kept: the run goes on, and its end is what the store must take.
            logger.debug("cannot record the progress of '\(identifier)' in the schedule store: \(error)")
        }
    }
}
