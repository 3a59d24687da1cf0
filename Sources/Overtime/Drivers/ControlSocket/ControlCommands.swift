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
        case "simulate-launch":
            return .failure("simulate-launch: this runtime has no scheduler")
        default:
            return .failure(
                "unknown command '\(request.command)'; known: \(ControlProtocol.commands.joined(separator: ", "))")
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
