import OvertimeControlProtocol
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The control socket's commands: the built-in ones and those the program added. What
/// each does runs on the loop thread, through the driver seam; an added command may answer
/// later, from any thread (its work done where it belongs, never waited for on the loop).
final class ControlCommands: Sendable {
    /// An added command: its arguments, and where its answer goes (once, from any thread).
    typealias Handler =
        @Sendable ([String], _ reply: @escaping @Sendable (Result<String, ControlCommandError>) -> Void) ->
        Void

    /// Commands the program added (registered from any thread).
    private let added = Locked<[String: Handler]>([:])

    /// Adds `name`; `false` for a built-in name.
    func add(_ name: String, handler: @escaping Handler) -> Bool {
        guard !ControlProtocol.commands.contains(name) else { return false }
        added.withLock { $0[name] = handler }
        return true
    }

    /// The response to one request line, or `nil` when an added command answers later:
    /// then `later` is called once with it, on whatever thread the command replied.
    func handle(
        _ line: [UInt8], context: DriverContext, later: @escaping @Sendable (ControlResponse) -> Void
    ) -> ControlResponse? {
        let request: ControlRequest
        do {
            request = try ControlRequest(json: line)
        } catch {
            return .failure("malformed request (\(error)): expected one JSON object like {\"command\":\"status\"}")
        }
        let source = "control socket"
        switch request.command {
        case "status":
            return ControlResponse(ok: true, status: status(context.snapshot, parts: context.statusParts))
        case "tasks":
            return ControlResponse(ok: true, tasks: context.openTasks().map(ControlTask.init))
        case "background":
            context.request(.background, from: source)
        case "foreground":
            context.request(.foreground, from: source)
        case "terminate":
            context.request(request.now == true ? .terminateNow : .terminate, from: source)
        case "reload":
            context.request(.reload, from: source)
        case "memory-warning":
            return ControlResponse(ok: true, message: context.memoryWarningNow(from: source))
        case "expire":
            if let raw = request.id {
                let id = BackgroundTaskID(rawValue: raw)
                guard context.request(.expire(id), from: source) else {
                    return .failure("no open background task \(id)")
                }
            } else {
                context.request(.expireAll, from: source)
            }
        default:
            let added = added.withLock { $0 }
            if let handler = added[request.command] {
                let command = request.command
                let replied = Locked(false)
                handler(request.arguments ?? []) { result in
                    // A second reply is a mistake of the command's; the client has its answer.
                    let first = replied.withLock { replied in
                        defer { replied = true }
                        return !replied
                    }
                    guard first else { return }
                    switch result {
                    case .success(let message): later(ControlResponse(ok: true, message: message))
                    case .failure(let error): later(.failure("\(command): \(error.message)"))
                    }
                }
                return nil
            }
            let known = ControlProtocol.commands + added.keys.sorted()
            return .failure("unknown command '\(request.command)'; known: \(known.joined(separator: ", "))")
        }
        return ControlResponse(ok: true, message: "\(request.command) accepted")
    }

    private func status(_ snapshot: RuntimeSnapshot, parts: [String]) -> ControlStatus {
        ControlStatus(
            state: "\(snapshot.state)", pid: getpid(), openBackgroundTasks: snapshot.openBackgroundTasks,
            backgroundTimeRemaining: snapshot.backgroundTimeRemaining?.secondsValue,
            terminating: snapshot.isTerminating, parts: parts)
    }
}

extension ControlTask {
    init(_ info: BackgroundTaskInfo) {
        self.init(
            id: info.id.rawValue, displayID: info.id.description, name: info.name,
            callSite: info.callSite.description, ageSeconds: info.age.secondsValue,
            remainingSeconds: info.remaining == Runtime.unlimitedTime ? nil : info.remaining.secondsValue,
            expired: info.isExpired)
    }
}

/// Why a command added with ``Runtime/addControlCommand(_:handler:)`` failed: the text
/// the client prints.
public struct ControlCommandError: Error, Sendable {
    /// What went wrong, one sentence.
    public var message: String

    /// An error with `message`.
    public init(_ message: String) {
        self.message = message
    }
}

extension Runtime {
    /// Adds `name` to the control socket's commands (`overtimectl NAME` sends it). The
    /// handler runs on the loop thread, so it must be quick; its message is the reply.
    /// Built-in commands cannot be replaced: `false` is returned for those. Work that
    /// reads or writes files or talks to a server belongs in
    /// ``addControlCommand(_:replying:)``, which answers later.
    @discardableResult
    public func addControlCommand(
        _ name: String, handler: @escaping @Sendable () -> Result<String, ControlCommandError>
    ) -> Bool {
        controlCommands.add(name) { _, reply in reply(handler()) }
    }

    /// Adds `name` to the control socket's commands, with arguments: `overtimectl call NAME
    /// A B` hands `["A", "B"]` to `handler` (on the loop thread, so it must be quick; its
    /// message is the reply). Built-in commands cannot be replaced: `false` is returned.
    @discardableResult
    public func addControlCommand(
        _ name: String, arguments handler: @escaping @Sendable ([String]) -> Result<String, ControlCommandError>
    ) -> Bool {
        controlCommands.add(name) { arguments, reply in reply(handler(arguments)) }
    }

    /// Adds `name` to the control socket's commands, answered later: `handler` gets the
    /// arguments on the loop thread and returns at once; it hands the work to a queue of
    /// its own and calls `reply` once when done, from any thread. The loop goes on
    /// meanwhile (other clients, timers, the watchdog), and the client's later requests are
    /// answered in order after this one. Built-in commands cannot be replaced: `false` is
    /// returned.
    ///
    /// ```swift
    /// runtime.addControlCommand("compact") { _, reply in
    ///     work.async { reply(Result { try store.compact() }.map { "compacted" }.mapError { ControlCommandError("\($0)") }) }
    /// }
    /// ```
    @discardableResult
    public func addControlCommand(
        _ name: String,
        replying handler:
            @escaping @Sendable (
                _ arguments: [String], _ reply: @escaping @Sendable (Result<String, ControlCommandError>) -> Void
            ) -> Void
    ) -> Bool {
        controlCommands.add(name, handler: handler)
    }
}
