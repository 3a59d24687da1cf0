import FoundationEssentials

/// One request on the control socket: a JSON object on one line.
///
/// `{"command":"status"}`, `{"command":"tasks"}`, `{"command":"background"}`,
/// `{"command":"foreground"}`, `{"command":"terminate"}`, `{"command":"reload"}`,
/// `{"command":"expire"}` (all) or `{"command":"expire","id":9223372036854775809}`, and
/// any command the program added (``Runtime/addControlCommand(_:handler:)``), with its
/// arguments: `{"command":"history","arguments":["com.example.refresh"]}`.
package struct ControlRequest: Codable, Sendable, Equatable {
    package var command: String
    package var id: UInt64?
    /// `terminate` only: expire every grant at once instead of waiting for them.
    package var now: Bool?
    /// A command the program added: what follows its name (`overtimectl history ID`).
    package var arguments: [String]?

    package init(command: String, id: UInt64? = nil, now: Bool? = nil, arguments: [String]? = nil) {
        self.command = command
        self.id = id
        self.now = now
        self.arguments = arguments
    }
}

/// One response: `{"ok":true,…}` or `{"ok":false,"error":"…"}`, on one line.
package struct ControlResponse: Codable, Sendable, Equatable {
    package var ok: Bool
    package var error: String?
    package var status: ControlStatus?
    package var tasks: [ControlTask]?
    package var message: String?

    package static func failure(_ error: String) -> ControlResponse {
        ControlResponse(ok: false, error: error)
    }

    package init(
        ok: Bool, error: String? = nil, status: ControlStatus? = nil, tasks: [ControlTask]? = nil,
        message: String? = nil
    ) {
        self.ok = ok
        self.error = error
        self.status = status
        self.tasks = tasks
        self.message = message
    }
}

/// The runtime's state as `status` reports it.
package struct ControlStatus: Codable, Sendable, Equatable {
    package var state: String
    package var pid: Int32
    package var openBackgroundTasks: Int
    /// Seconds left before the background deadline; `nil` when unlimited (foreground).
    package var backgroundTimeRemaining: Double?
    package var terminating: Bool
}

/// An open grant as `tasks` lists it.
package struct ControlTask: Codable, Sendable, Equatable {
    package var id: UInt64
    package var displayID: String
    package var name: String
    package var callSite: String
    package var ageSeconds: Double
    /// `nil` when no deadline applies.
    package var remainingSeconds: Double?
    package var expired: Bool
}

/// The commands and the largest request the server reads.
package enum ControlProtocol {
    package static let maximumRequestBytes = 64 * 1024
    package static let commands = [
        "status", "tasks", "background", "foreground", "terminate", "reload", "expire",
    ]

    package static func encode(_ response: ControlResponse) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var bytes = (try? Array(encoder.encode(response))) ?? Array(#"{"ok":false,"error":"encoding failed"}"#.utf8)
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }
}
