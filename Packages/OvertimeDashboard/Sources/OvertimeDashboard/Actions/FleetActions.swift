// What the dashboard's buttons do to a fleet's schedule: runs, cancels and retries through
// one instance's control socket (its scheduler acts on the shared schedule), retiring an
// instance in the database itself (no instance owns another's retirement).

import OvertimePostgres
import OvertimeScheduler

/// Actions on a fleet's schedule. Run now, cancel and retry are sent to the control socket
/// of one of the fleet's instances, which acts for the fleet; without one they are refused
/// with the reason. Retiring an instance removes its own requests from the database
/// (`PostgresScheduleConfiguration.retireInstance(_:)`), refused while it still runs.
public struct FleetActions: ScheduleActions {
    let database: PostgresScheduleConfiguration
    let instance: ControlSocketActions?

    /// Actions on the fleet in `database`, through the instance listening at `controlSocket`.
    public init(database: PostgresScheduleConfiguration, controlSocket: String?) {
        self.database = database
        instance = controlSocket.map { ControlSocketActions(controlSocket: $0) }
    }

    /// Sends `run ID` to the instance.
    public func runNow(_ identifier: String, by user: String) async throws(ScheduleActionError) -> String {
        try await throughInstance().runNow(identifier, by: user)
    }

    /// Sends `cancel ID` to the instance.
    public func cancel(_ identifier: String, by user: String) async throws(ScheduleActionError) -> String {
        try await throughInstance().cancel(identifier, by: user)
    }

    /// Sends `retry ID` to the instance.
    public func retry(_ identifier: String, by user: String) async throws(ScheduleActionError) -> String {
        try await throughInstance().retry(identifier, by: user)
    }

    /// Sends `run-tag TAG` to the instance.
    public func runNow(tag: String, by user: String) async throws(ScheduleActionError) -> String {
        try await throughInstance().runNow(tag: tag, by: user)
    }

    /// Sends `cancel-tag TAG` to the instance.
    public func cancel(tag: String, by user: String) async throws(ScheduleActionError) -> String {
        try await throughInstance().cancel(tag: tag, by: user)
    }

    /// Sends `retry-failed` to the instance.
    public func retryFailed(tag: String?, prefix: String?, by user: String) async throws(ScheduleActionError)
        -> String
    {
        try await throughInstance().retryFailed(tag: tag, prefix: prefix, by: user)
    }

    /// Removes the instance's own requests; says how many.
    public func retireInstance(_ name: String, by user: String) async throws(ScheduleActionError) -> String {
        do throws(ScheduleStoreError) {
            let removed = try await database.retireInstance(name)
            return "retired instance '\(name)': \(removed) request\(removed == 1 ? "" : "s") of its own removed"
        } catch {
            throw ScheduleActionError(error.message)
        }
    }

    /// Whether the instance the actions go through answers; without one, `nil` (retiring
    /// needs only the database, whose absence every page reports anyway).
    public func ownerNotAnswering() async -> String? {
        guard let instance, let silence = await instance.silence() else { return nil }
        return "The instance at \(instance.client.path) does not answer (\(silence)): runs, cancels and retries go"
            + " through it."
    }

    private func throughInstance() throws(ScheduleActionError) -> ControlSocketActions {
        guard let instance else {
            throw ScheduleActionError(
                "runs, cancels and retries go through one of the fleet's instances: start the dashboard with"
                    + " --control-socket of one")
        }
        return instance
    }
}
