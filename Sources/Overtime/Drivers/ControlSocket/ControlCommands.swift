import FoundationEssentials

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// What each control-socket command does, on the loop thread.
extension RuntimeCore {
    func handleControlLine(_ line: [UInt8]) -> ControlResponse {
        let request: ControlRequest
        do {
            request = try JSONDecoder().decode(ControlRequest.self, from: Data(line))
        } catch {
            return .failure("malformed request: expected one JSON object like {\"command\":\"status\"}")
        }
        switch request.command {
        case "status":
            return ControlResponse(ok: true, status: controlStatus())
        case "tasks":
            return ControlResponse(ok: true, tasks: openTasks().map(ControlTask.init))
        case "background":
            perform(.background, from: "control socket")
        case "foreground":
            perform(.foreground, from: "control socket")
        case "terminate":
            perform(.terminate, from: "control socket")
            if request.now == true {
                logger.notice("control socket: terminate now: expiring every background task")
                forceExpire(nil)
            }
        case "reload":
            perform(.reload, from: "control socket")
        case "expire":
            if let raw = request.id {
                let id = BackgroundTaskID(rawValue: raw)
                guard grants.slot(for: id) != nil else { return .failure("no open background task \(id)") }
                forceExpire(id)
            } else {
                forceExpire(nil)
            }
        default:
            let extra = extraControlCommands.withLock { $0 }
            if let handler = extra[request.command] {
                switch handler() {
                case .success(let message): return ControlResponse(ok: true, message: message)
                case .failure(let error): return .failure("\(request.command): \(error.message)")
                }
            }
            let known = ControlProtocol.commands + extra.keys.sorted()
            return .failure("unknown command '\(request.command)'; known: \(known.joined(separator: ", "))")
        }
        return ControlResponse(ok: true, message: "\(request.command) accepted")
    }

    private func controlStatus() -> ControlStatus {
        var remaining: Double?
        switch lifecycle.state {
        case .active, .inactive: remaining = nil
        case .background: remaining = deadlines.budget.map { max($0.deadline - now, .zero).secondsValue } ?? 0
        case .suspended, .terminated: remaining = 0
        }
        return ControlStatus(
            state: "\(lifecycle.state)", pid: getpid(), openBackgroundTasks: grants.openCount,
            backgroundTimeRemaining: remaining, terminating: lifecycle.isTerminating)
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
    /// Built-in commands cannot be replaced: `false` is returned for those.
    @discardableResult
    public func addControlCommand(
        _ name: String, handler: @escaping @Sendable () -> Result<String, ControlCommandError>
    ) -> Bool {
        guard !ControlProtocol.commands.contains(name) else { return false }
        core.extraControlCommands.withLock { $0[name] = handler }
        return true
    }
}
