/// One request on the control socket: a JSON object on one line.
///
/// `{"command":"status"}`, `{"command":"tasks"}`, `{"command":"background"}`,
/// `{"command":"foreground"}`, `{"command":"terminate"}`, `{"command":"reload"}`,
/// `{"command":"memory-warning"}`,
/// `{"command":"expire"}` (all) or `{"command":"expire","id":9223372036854775809}`, and
/// any command the program added (`Runtime.addControlCommand(_:handler:)`), with its
/// arguments: `{"command":"history","arguments":["com.example.refresh"]}`.
package struct ControlRequest: Sendable, Equatable {
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
package struct ControlResponse: Sendable, Equatable {
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
package struct ControlStatus: Sendable, Equatable {
    package var state: String
    package var pid: Int32
    package var openBackgroundTasks: Int
    /// Seconds left before the background deadline; `nil` when unlimited (foreground).
    package var backgroundTimeRemaining: Double?
    package var terminating: Bool
    /// What the program's drivers add, each `name: what it says` (`next run: …`,
    /// `logind: delay lock held …`).
    package var parts: [String]

    package init(
        state: String, pid: Int32, openBackgroundTasks: Int, backgroundTimeRemaining: Double?, terminating: Bool,
        parts: [String] = []
    ) {
        self.state = state
        self.pid = pid
        self.openBackgroundTasks = openBackgroundTasks
        self.backgroundTimeRemaining = backgroundTimeRemaining
        self.terminating = terminating
        self.parts = parts
    }
}

/// An open grant as `tasks` lists it.
package struct ControlTask: Sendable, Equatable {
    package var id: UInt64
    package var displayID: String
    package var name: String
    package var callSite: String
    package var ageSeconds: Double
    /// `nil` when no deadline applies.
    package var remainingSeconds: Double?
    package var expired: Bool

    package init(
        id: UInt64, displayID: String, name: String, callSite: String, ageSeconds: Double,
        remainingSeconds: Double?, expired: Bool
    ) {
        self.id = id
        self.displayID = displayID
        self.name = name
        self.callSite = callSite
        self.ageSeconds = ageSeconds
        self.remainingSeconds = remainingSeconds
        self.expired = expired
    }
}

/// The commands and the largest request the server reads.
package enum ControlProtocol {
    package static let maximumRequestBytes = 64 * 1024
    package static let commands = [
        "status", "tasks", "background", "foreground", "terminate", "reload", "memory-warning", "expire",
    ]

    /// A response as one line: compact JSON, members sorted, then a newline.
    package static func encode(_ response: ControlResponse) -> [UInt8] {
        response.json.serialized + [UInt8(ascii: "\n")]
    }

    /// A request as one line.
    package static func encode(_ request: ControlRequest) -> [UInt8] {
        request.json.serialized + [UInt8(ascii: "\n")]
    }
}

// MARK: As JSON

extension ControlRequest {
    /// The request a JSON text holds; unknown members are ignored.
    package init(json bytes: [UInt8]) throws(JSONError) {
        let members = try JSONValue(parsing: bytes).members("a request")
        self.init(
            command: try members.required("command", \.stringValue, "a string"),
            id: try members.optional("id", { $0.integer(UInt64.self) }, "a task ID (a whole number from 0)"),
            now: try members.optional("now", \.boolValue, "true or false"),
            arguments: try members.optional("arguments", { $0.array(of: \.stringValue) }, "an array of strings"))
    }

    /// The request as JSON, absent members left out.
    package var json: JSONValue {
        var members: [String: JSONValue] = ["command": .string(command)]
        if let id { members["id"] = JSONValue(id) }
        if let now { members["now"] = .bool(now) }
        if let arguments { members["arguments"] = .array(arguments.map(JSONValue.string)) }
        return .object(members)
    }
}

extension ControlResponse {
    /// The response a JSON text holds; unknown members are ignored.
    package init(json bytes: [UInt8]) throws(JSONError) {
        let members = try JSONValue(parsing: bytes).members("a response")
        var status: ControlStatus?
        if let value = members["status"], value != .null { status = try ControlStatus(json: value) }
        self.init(
            ok: try members.required("ok", \.boolValue, "true or false"),
            error: try members.optional("error", \.stringValue, "a string"),
            status: status,
            tasks: try members.optional("tasks", { $0.array(of: { try? ControlTask(json: $0) }) }, "an array of tasks"),
            message: try members.optional("message", \.stringValue, "a string"))
    }

    /// The response as JSON, absent members left out.
    package var json: JSONValue {
        var members: [String: JSONValue] = ["ok": .bool(ok)]
        if let error { members["error"] = .string(error) }
        if let status { members["status"] = status.json }
        if let tasks { members["tasks"] = .array(tasks.map(\.json)) }
        if let message { members["message"] = .string(message) }
        return .object(members)
    }
}

extension ControlStatus {
    /// The status a response's `status` member holds.
    init(json: JSONValue) throws(JSONError) {
        let members = try json.members("'status'")
        self.init(
            state: try members.required("state", \.stringValue, "a string"),
            pid: try members.required("pid", { $0.integer(Int32.self) }, "a process ID"),
            openBackgroundTasks: try members.required("openBackgroundTasks", { $0.integer(Int.self) }, "a count"),
            backgroundTimeRemaining: try members.optional("backgroundTimeRemaining", \.doubleValue, "a number"),
            terminating: try members.required("terminating", \.boolValue, "true or false"),
            parts: try members.optional("parts", Self.texts, "a list of strings") ?? [])
    }

    private static func texts(_ value: JSONValue) -> [String]? {
        guard case .array(let elements) = value else { return nil }
        let texts = elements.compactMap(\.stringValue)
        return texts.count == elements.count ? texts : nil
    }

    /// The status as JSON, absent members left out.
    var json: JSONValue {
        var members: [String: JSONValue] = [
            "state": .string(state), "pid": JSONValue(pid), "openBackgroundTasks": JSONValue(openBackgroundTasks),
            "terminating": .bool(terminating),
        ]
        if let backgroundTimeRemaining { members["backgroundTimeRemaining"] = JSONValue(backgroundTimeRemaining) }
        if !parts.isEmpty { members["parts"] = .array(parts.map(JSONValue.string)) }
        return .object(members)
    }
}

extension ControlTask {
    /// The task an element of a response's `tasks` member holds.
    init(json: JSONValue) throws(JSONError) {
        let members = try json.members("a task")
        self.init(
            id: try members.required("id", { $0.integer(UInt64.self) }, "a task ID"),
            displayID: try members.required("displayID", \.stringValue, "a string"),
            name: try members.required("name", \.stringValue, "a string"),
            callSite: try members.required("callSite", \.stringValue, "a string"),
            ageSeconds: try members.required("ageSeconds", \.doubleValue, "a number"),
            remainingSeconds: try members.optional("remainingSeconds", \.doubleValue, "a number"),
            expired: try members.required("expired", \.boolValue, "true or false"))
    }

    /// The task as JSON, absent members left out.
    var json: JSONValue {
        var members: [String: JSONValue] = [
            "id": JSONValue(id), "displayID": .string(displayID), "name": .string(name), "callSite": .string(callSite),
            "ageSeconds": JSONValue(ageSeconds), "expired": .bool(expired),
        ]
        if let remainingSeconds { members["remainingSeconds"] = JSONValue(remainingSeconds) }
        return .object(members)
    }
}
