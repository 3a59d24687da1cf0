import ArgumentParser
import OvertimeControl
import OvertimeControlProtocol
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

@main
struct OvertimeCtl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "overtimectl",
        abstract: "Inspect and steer an Overtime daemon through its control socket.",
        discussion: """
            The socket: --socket, else $OVERTIME_CONTROL_SOCKET, else $RUNTIME_DIRECTORY/control.sock.
            Exit status: 0 done; 1 the daemon answered an error; 64 bad arguments; 69 no daemon at
            the socket; 71 no socket could be made (out of descriptors); 76 the answer is not the
            protocol's (or longer than 64 MiB); 77 permission denied (run as the daemon's user or root).
            """,
        version: "overtimectl 0.2.0",
        subcommands: [
            Status.self, Tasks.self, Background.self, Foreground.self, Terminate.self, Reload.self, MemoryWarning.self,
            Expire.self,
            Schedule.self, History.self, Work.self, Run.self, Retry.self, Cancel.self, Actions.self, Metrics.self,
            Call.self,
        ])

    /// The connection's options are taken before the command too (`overtimectl --socket
    /// PATH status`, as operators write it): moved after the command's name.
    static func main() {
        var arguments = Array(CommandLine.arguments.dropFirst())
        var leading: [String] = []
        while let first = arguments.first {
            if ["--socket", "-s"].contains(first), arguments.count >= 2 {
                leading += arguments.prefix(2)
                arguments.removeFirst(2)
            } else if first.hasPrefix("--socket=") || first == "--json" {
                leading.append(arguments.removeFirst())
            } else {
                break
            }
        }
        if !leading.isEmpty, let command = arguments.first, !command.hasPrefix("-") {
            arguments.insert(contentsOf: leading, at: 1)
        } else {
            arguments = leading + arguments
        }
        main(arguments)
    }
}

/// Where the daemon listens and how to print.
struct ConnectionOptions: ParsableArguments {
    @Option(
        name: .shortAndLong,
        help: "The daemon's control socket (default: $OVERTIME_CONTROL_SOCKET, else $RUNTIME_DIRECTORY/control.sock).")
    var socket: String?

    @Flag(help: "Print the daemon's JSON response as it came, for scripts.")
    var json = false

    /// Sends `request`, prints the daemon's JSON answer as it came when asked, and exits
    /// non-zero on any failure (with `--json`, failures print a JSON error too).
    func send(_ request: ControlRequest, waitForClose: Bool = false) throws -> ControlResponse {
        let environment = { (name: String) in getenv(name).map { String(cString: $0) } }
        guard
            let path = socket ?? environment("OVERTIME_CONTROL_SOCKET")
                ?? environment("RUNTIME_DIRECTORY").map({ $0 + "/control.sock" })
        else {
            fail("no socket: pass --socket PATH, or set OVERTIME_CONTROL_SOCKET or RUNTIME_DIRECTORY", status: 64)
        }
        let answer: (response: ControlResponse, line: String)
        do {
            answer = try ControlClient(path: path).send(request, waitForClose: waitForClose)
        } catch {
            fail("\(error)", status: error.exitStatus)
        }
        if json { print(answer.line) }
        guard answer.response.ok else {
            let error = answer.response.error ?? "the daemon refused"
            if !json { FileHandleOutput.standardError("overtimectl: \(error)") }
            throw ExitCode(error.hasPrefix("permission denied") ? 77 : 1)
        }
        return answer.response
    }

    /// Reports `message` (as JSON with `--json`) and exits with `status`.
    func fail(_ message: String, status: Int32) -> Never {
        if json {
            print(String(decoding: ControlProtocol.encode(.failure(message)), as: UTF8.self), terminator: "")
        } else {
            FileHandleOutput.standardError("overtimectl: \(message)")
        }
        OvertimeCtl.exit(withError: ExitCode(status))
    }
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the lifecycle state, open tasks and time left.")
    @OptionGroup var options: ConnectionOptions

    func run() throws {
        let response = try options.send(ControlRequest(command: "status"))
        guard !options.json else { return }
        guard let status = response.status else {
            options.fail("the daemon's answer holds no status: not the protocol's", status: 76)
        }
        print(
            TextTable.render(
                [
                    ["state", status.state],
                    ["pid", "\(status.pid)"],
                    ["open tasks", "\(status.openBackgroundTasks)"],
                    ["time left", Table.seconds(status.backgroundTimeRemaining)],
                    ["terminating", status.terminating ? "yes" : "no"],
                ] + status.parts.map(Self.row)))
    }

    /// A driver's part as a row: its name (before the first `: `) and what it says.
    static func row(_ part: String) -> [String] {
        let characters = Array(part)
        for index in characters.indices.dropLast() where characters[index] == ":" && characters[index + 1] == " " {
            return [String(characters[..<index]), String(characters[(index + 2)...])]
        }
        return ["", part]
    }
}

struct Tasks: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List open background tasks.")
    @OptionGroup var options: ConnectionOptions

    func run() throws {
        let response = try options.send(ControlRequest(command: "tasks"))
        guard !options.json else { return }
        let tasks = response.tasks ?? []
        guard !tasks.isEmpty else {
            print("no open background tasks")
            return
        }
        let rows = tasks.map {
            [
                $0.displayID, $0.name, Table.seconds($0.ageSeconds), Table.seconds($0.remainingSeconds),
                $0.expired ? "yes" : "no", $0.callSite,
            ]
        }
        print(TextTable.render([["ID", "NAME", "AGE", "LEFT", "EXPIRED", "BEGUN AT"]] + rows))
    }
}

/// A command that only asks and prints the daemon's acknowledgement.
protocol SimpleCommand: ParsableCommand {
    static var command: String { get }
    var options: ConnectionOptions { get }
}

extension SimpleCommand {
    func run() throws {
        let response = try options.send(ControlRequest(command: Self.command))
        if !options.json { print(response.message ?? "ok") }
    }
}

struct Background: SimpleCommand {
    static let configuration = CommandConfiguration(abstract: "Send the daemon to the background.")
    static let command = "background"
    @OptionGroup var options: ConnectionOptions
}

struct Foreground: SimpleCommand {
    static let configuration = CommandConfiguration(abstract: "Bring the daemon to the foreground.")
    static let command = "foreground"
    @OptionGroup var options: ConnectionOptions
}

struct Terminate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Terminate gracefully: open tasks get the budget (like SIGTERM).",
        discussion: """
            Asked again while terminating, more than the daemon's grace (1 s) after the first:
            every task expires now. --now does that at once.
            """)
    @OptionGroup var options: ConnectionOptions

    @Flag(help: "Expire every open task now instead of waiting for them.")
    var now = false

    @Flag(help: "Wait until the daemon has exited (like systemctl stop).")
    var wait = false

    func run() throws {
        let response = try options.send(ControlRequest(command: "terminate", now: now ? true : nil), waitForClose: wait)
        if !options.json { print(wait ? "terminated" : response.message ?? "ok") }
    }
}

struct Reload: SimpleCommand {
    static let configuration = CommandConfiguration(abstract: "Deliver a reload event.")
    static let command = "reload"
    @OptionGroup var options: ConnectionOptions
}

struct MemoryWarning: SimpleCommand {
    static let configuration = CommandConfiguration(
        commandName: "memory-warning",
        abstract: "Deliver a memory warning, as the kernel's memory pressure would (at most one per interval).")
    static let command = "memory-warning"
    @OptionGroup var options: ConnectionOptions
}

struct Expire: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run expiration handlers now (one task, or all); the task ends a lead time later.")
    @OptionGroup var options: ConnectionOptions

    @Argument(help: "The task's ID as `tasks` shows it (#r3, #0.1); all open tasks when omitted.")
    var id: String?

    func run() throws {
        var request = ControlRequest(command: "expire")
        if let id {
            guard let parsed = TaskIDText.rawValue(parsing: id) else {
                options.fail("'\(id)' is not a task ID (expected #r3, #0.1 or a raw number)", status: 64)
            }
            request.id = parsed
        }
        let response = try options.send(request)
        if !options.json { print(response.message ?? "ok") }
    }
}

struct Metrics: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Print the daemon's metrics in Prometheus' text format (for daemons that export them: log-uploader, periodic-report, tiny-daemon)."
    )
    @OptionGroup var options: ConnectionOptions

    func run() throws {
        let response = try options.send(ControlRequest(command: "metrics"))
        if !options.json { print(response.message ?? "", terminator: "") }
    }
}

struct Call: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send a command the program added to its control socket (log-uploader: redrive).")
    @OptionGroup var options: ConnectionOptions

    @Argument(help: "The command's name.")
    var name: String

    @Argument(help: "Its arguments.")
    var arguments: [String] = []

    func run() throws {
        let response = try options.send(ControlRequest(command: name, arguments: arguments.isEmpty ? nil : arguments))
        if !options.json { print(response.message ?? "ok") }
    }
}

/// A scheduler command: the daemon's scheduler answers with the text to print.
protocol SchedulerCommand: ParsableCommand {
    static var command: String { get }
    var options: ConnectionOptions { get }
    var arguments: [String] { get }
}

extension SchedulerCommand {
    func run() throws {
        let response = try options.send(ControlRequest(command: Self.command, arguments: arguments))
        if !options.json { print(response.message ?? "ok") }
    }
}

struct Schedule: SchedulerCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the scheduler's pending requests: next run, attempt, what each waits for.")
    static let command = "schedule"
    @OptionGroup var options: ConnectionOptions
    @Option(help: "Only the requests with this tag.") var tag: String?
    var arguments: [String] { tag.map { [$0] } ?? [] }
}

struct History: SchedulerCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a request's runs, newest first: start, end, result, why it stopped.")
    static let command = "history"
    @OptionGroup var options: ConnectionOptions
    @Argument(help: "The request's identifier.") var identifier: String
    @Option(help: "At most this many attempts.") var limit = 20
    var arguments: [String] { [identifier, "\(limit)"] }
}

struct Work: SchedulerCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Show where a request stands: enqueued, blocked (on what), running, succeeded, failed or cancelled; its attempt, next run and newest attempt."
    )
    static let command = "work"
    @OptionGroup var options: ConnectionOptions
    @Argument(help: "The request's identifier.") var identifier: String
    var arguments: [String] { [identifier] }
}

struct Retry: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Submit again a request that failed for good (or, with --failed, every one, by tag or prefix): due now, its attempts counted afresh."
    )
    @OptionGroup var options: ConnectionOptions
    @OptionGroup var who: ActingUser
    @Argument(help: "The request's identifier.") var identifier: String?
    @Flag(help: "Every request that failed for good instead (those with --tag, beginning with --prefix).")
    var failed = false
    @Option(help: "With --failed: only the requests with this tag.") var tag: String?
    @Option(help: "With --failed: only the requests whose identifiers begin with this.") var prefix: String?

    func validate() throws {
        guard (identifier == nil) == failed else { throw ValidationError("give an identifier or --failed, not both") }
        guard failed || (tag == nil && prefix == nil) else {
            throw ValidationError("--tag and --prefix go with --failed")
        }
    }

    func run() throws {
        let request =
            failed
            ? ControlRequest(
                command: "retry-failed",
                arguments: [tag.map { "tag=\($0)" }, prefix.map { "prefix=\($0)" }].compactMap { $0 } + [who.argument])
            : ControlRequest(command: "retry", arguments: [identifier ?? "", who.argument])
        let response = try options.send(request)
        if !options.json { print(response.message ?? "ok") }
    }
}

struct Run: TagOrIdentifierCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Start a run of a request now (or of every pending request with a tag), whatever its plan and requirements say."
    )
    static let command = "run"
    @OptionGroup var options: ConnectionOptions
    @OptionGroup var who: ActingUser
    @Argument(help: "The request's identifier.") var identifier: String?
    @Option(help: "Every pending request with this tag instead.") var tag: String?
}

struct Cancel: TagOrIdentifierCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Cancel a request, or every pending request with a tag: no run starts for it any more (a run in progress is told to stop); it stays as cancelled in `work` and its history."
    )
    static let command = "cancel"
    @OptionGroup var options: ConnectionOptions
    @OptionGroup var who: ActingUser
    @Argument(help: "The request's identifier.") var identifier: String?
    @Option(help: "Every pending request with this tag instead.") var tag: String?
}

/// A command on one request or on every pending request with a tag: `COMMAND ID` or
/// `COMMAND-tag TAG`, recorded as done by ``ActingUser``.
protocol TagOrIdentifierCommand: ParsableCommand {
    static var command: String { get }
    var options: ConnectionOptions { get }
    var who: ActingUser { get }
    var identifier: String? { get }
    var tag: String? { get }
}

extension TagOrIdentifierCommand {
    func validate() throws {
        guard (identifier == nil) != (tag == nil) else {
            throw ValidationError("give an identifier or --tag TAG, not both")
        }
    }

    func run() throws {
        let request =
            tag.map { ControlRequest(command: Self.command + "-tag", arguments: [$0, who.argument]) }
            ?? ControlRequest(command: Self.command, arguments: [identifier ?? "", who.argument])
        let response = try options.send(request)
        if !options.json { print(response.message ?? "ok") }
    }
}

struct Actions: SchedulerCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "List what operators did (run, retry, cancel, and their bulk forms), newest first: who, what, to what.")
    static let command = "actions"
    @OptionGroup var options: ConnectionOptions
    @Option(help: "At most this many actions.") var limit = 20
    var arguments: [String] { ["\(limit)"] }
}

/// Who an action is recorded as done by: `--by`, else the user overtimectl runs as.
struct ActingUser: ParsableArguments {
    @Option(help: "Who the daemon records as having done it (default: the user running overtimectl).")
    var by: String?

    var argument: String { "by=\(by ?? Self.currentUser)" }

    /// The name of the user this process runs as, or its user ID when it has none.
    static var currentUser: String {
        guard let entry = getpwuid(getuid()), let name = entry.pointee.pw_name else { return "uid \(getuid())" }
        return String(cString: name)
    }
}

/// How overtimectl shows times.
enum Table {
    static func seconds(_ value: Double?) -> String {
        guard let value else { return "unlimited" }
        return "\(Double(Int((value * 10).rounded())) / 10) s"
    }
}

/// Writes a line to standard error.
enum FileHandleOutput {
    static func standardError(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }
}
