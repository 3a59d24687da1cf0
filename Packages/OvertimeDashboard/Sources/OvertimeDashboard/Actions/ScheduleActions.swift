// What the dashboard's buttons do, through the one owner of the schedule: a daemon's
// control socket (a SQLite schedule belongs to the daemon that holds it).

import NIOPosix
import OvertimeControl

/// Changes a dashboard asks of a schedule's owner. Each call returns what the owner said,
/// within a few seconds; no thread of the dashboard's server waits for it.
public protocol ScheduleActions: Sendable {
    /// Starts a run of `identifier` now, whatever its plan and requirements say.
    func runNow(_ identifier: String, by user: String) async throws(ScheduleActionError) -> String
    /// Cancels `identifier`: no run starts for it any more; a run in progress is told to stop.
    func cancel(_ identifier: String, by user: String) async throws(ScheduleActionError) -> String
    /// Submits again `identifier`, which failed for good: due now, its attempts counted afresh.
    func retry(_ identifier: String, by user: String) async throws(ScheduleActionError) -> String
    /// Removes the own requests of fleet instance `name`, retired for good (no process runs
    /// under it); its history stays.
    func retireInstance(_ name: String, by user: String) async throws(ScheduleActionError) -> String
    /// Starts a run now of every pending request tagged `tag` (those running or waiting on a
    /// prerequisite are passed over).
    func runNow(tag: String, by user: String) async throws(ScheduleActionError) -> String
    /// Cancels every pending request tagged `tag`.
    func cancel(tag: String, by user: String) async throws(ScheduleActionError) -> String
    /// Submits again every request that failed for good, of those tagged `tag` and whose
    /// identifiers begin with `prefix` when given.
    func retryFailed(tag: String?, prefix: String?, by user: String) async throws(ScheduleActionError) -> String
    /// Why the schedule's owner does not answer now (no daemon at its socket, one that does
    /// not reply), or `nil` when it answers. Every page says so while it does not: the
    /// schedule shown is then as last stored, and nothing changes it.
    func ownerNotAnswering() async -> String?
}

extension ScheduleActions {
    /// Actions of a program's own: taken to answer (pages show no warning).
    public func ownerNotAnswering() async -> String? { nil }

    /// A schedule one daemon owns has no instances to retire.
    public func retireInstance(_ name: String, by user: String) async throws(ScheduleActionError) -> String {
        throw ScheduleActionError("this schedule is one daemon's: there is no fleet instance to retire")
    }

    /// Actions of a program's own that act on one request at a time: refused.
    public func runNow(tag: String, by user: String) async throws(ScheduleActionError) -> String {
        throw ScheduleActionError("these actions act on one request at a time")
    }

    /// Actions of a program's own that act on one request at a time: refused.
    public func cancel(tag: String, by user: String) async throws(ScheduleActionError) -> String {
        throw ScheduleActionError("these actions act on one request at a time")
    }

    /// Actions of a program's own that act on one request at a time: refused.
    public func retryFailed(tag: String?, prefix: String?, by user: String) async throws(ScheduleActionError)
        -> String
    {
        throw ScheduleActionError("these actions act on one request at a time")
    }
}

/// Why an action was not done: the owner refused it, or could not be reached.
public struct ScheduleActionError: Error, Sendable, CustomStringConvertible {
    /// What the owner said, or why it could not be asked.
    public let message: String
    /// An action error saying `message`.
    public init(_ message: String) { self.message = message }
    /// The message.
    public var description: String { message }
}

/// Actions through a daemon's control socket: what `overtimectl run`, `overtimectl retry`
/// and `overtimectl cancel` send.
public struct ControlSocketActions: ScheduleActions {
    let client: ControlSocketClient

    /// The daemon listening at `path`.
    public init(controlSocket path: String) {
        client = ControlSocketClient(path: path, timeout: .seconds(10))
    }

    /// Sends `run ID`: the daemon starts a run now and says its run ID.
    public func runNow(_ identifier: String, by user: String) async throws(ScheduleActionError) -> String {
        try await call("run", [identifier], by: user)
    }

    /// Sends `cancel ID`: the daemon cancels the request.
    public func cancel(_ identifier: String, by user: String) async throws(ScheduleActionError) -> String {
        try await call("cancel", [identifier], by: user)
    }

    /// Sends `retry ID`: the daemon submits the request that failed for good again.
    public func retry(_ identifier: String, by user: String) async throws(ScheduleActionError) -> String {
        try await call("retry", [identifier], by: user)
    }

    /// Sends `run-tag TAG`: the daemon starts a run of each pending request tagged `tag`.
    public func runNow(tag: String, by user: String) async throws(ScheduleActionError) -> String {
        try await call("run-tag", [tag], by: user)
    }

    /// Sends `cancel-tag TAG`: the daemon cancels every pending request tagged `tag`.
    public func cancel(tag: String, by user: String) async throws(ScheduleActionError) -> String {
        try await call("cancel-tag", [tag], by: user)
    }

    /// Sends `retry-failed`: the daemon submits again each request that failed for good
    /// among those selected.
    public func retryFailed(tag: String?, prefix: String?, by user: String) async throws(ScheduleActionError)
        -> String
    {
        try await call(
            "retry-failed", [tag.map { "tag=\($0)" }, prefix.map { "prefix=\($0)" }].compactMap { $0 }, by: user)
    }

    /// Asks the daemon its `status`, waiting a second at most: a missing socket or a refused
    /// connection is known at once, a daemon that accepts and never replies after the second.
    public func ownerNotAnswering() async -> String? {
        await silence().map {
            "The daemon at \(client.path) does not answer (\($0)): nothing of this schedule runs, and it is"
                + " shown as it was last stored."
        }
    }

    /// Why the daemon does not answer its `status`, or `nil`.
    func silence() async -> String? {
        let probe = ControlSocketClient(path: client.path, timeout: .seconds(1))
        let answer: String?
        do {
            answer = try await NIOThreadPool.singleton.runIfActive { () -> String? in
                do throws(ControlSocketError) {
                    _ = try probe.call("status")
                    return nil
                } catch {
                    return error.isRefusal ? nil : error.message  // it answered, if only to refuse
                }
            }
        } catch {
            answer = "it could not be asked: \(error)"
        }
        return answer
    }

    /// Sends `command arguments by=USER` from a thread of NIO's pool: the control socket's
    /// client blocks until the daemon answers (at most its timeout), and no thread of the
    /// server or of Swift's concurrency pool waits for it. The daemon records the user as
    /// who did it.
    private func call(_ command: String, _ arguments: [String], by user: String) async throws(ScheduleActionError)
        -> String
    {
        let arguments = arguments + ["by=\(Self.recordedName(user))"]
        let result: Result<String, ScheduleActionError>
        do {
            result = try await NIOThreadPool.singleton.runIfActive { [client] in
                do throws(ControlSocketError) {
                    return .success(try client.call(command, arguments))
                } catch {
                    return .failure(ScheduleActionError(error.message))
                }
            }
        } catch {
            result = .failure(ScheduleActionError("the control socket could not be asked: \(error)"))
        }
        return try result.get()
    }

    /// How the daemon records a dashboard's user: `NAME (dashboard)`, the name cut to what
    /// the daemon takes and its control characters (which it refuses) shown as `?`.
    static func recordedName(_ user: String) -> String {
        var name = String(decoding: user.utf8.prefix(200), as: UTF8.self)
        name = String(
            String.UnicodeScalarView(
                name.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F || $0 == "\u{FFFD}" ? "?" : $0 }))
        return "\(name) (dashboard)"
    }
}
