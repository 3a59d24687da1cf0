// What BGTaskScheduler's debugger commands do (`_simulateLaunchForTaskWithIdentifier`,
// `_simulateExpirationForTaskWithIdentifier`), as calls a test makes.

import OvertimeScheduler

extension Scheduler {
    /// Launches a run of `identifier` now, whatever its plan and requirements say
    /// (`Scheduler.runNow(_:)`).
    ///
    /// - Returns: the run's ID.
    @discardableResult
    public func simulateLaunch(for identifier: String) throws(SchedulerError) -> Int64 {
        try runNow(identifier)
    }

    /// Expires the run of `identifier` in progress, as if its time were up: its task's
    /// expiration handler runs now, and the run ends as expired once completed (or is
    /// terminated a lead time later if it never is).
    ///
    /// - Throws: ``SchedulerError/Code/unknownIdentifier`` when no run of it is in progress.
    public func simulateExpiration(for identifier: String) throws(SchedulerError) {
        guard expireRun(identifier) else {
            throw SchedulerError(code: .unknownIdentifier, message: "no run of '\(identifier)' is in progress")
        }
    }
}
