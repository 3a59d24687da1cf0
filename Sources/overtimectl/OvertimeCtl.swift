import ArgumentParser
import FoundationEssentials
import Overtime

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
            Exit status: 0 done; 1 the daemon answered an error; 69 no daemon at the socket;
            77 permission denied (run as the daemon's user or root).
            """,
        subcommands: [
            Status.self, Tasks.self, Background.self, Foreground.self, Terminate.self, Reload.self, Expire.self,
            Call.self, SimulateLaunch.self,
        ])
}

/// Where the daemon listens and how to print.
struct ConnectionOptions: ParsableArguments {
    @Option(name: .shortAndLong, help: "The daemon's control socket (default: $OVERTIME_CONTROL_SOCKET).")
    var socket: String?

    @Flag(help: "Print the daemon's JSON response as it came, for scripts.")
    var json = false

    /// Sends `request`, prints a JSON answer when asked, and exits non-zero on any failure.
    func send(_ request: ControlRequest) throws -> ControlResponse {
        guard let path = socket ?? getenv("OVERTIME_CONTROL_SOCKET").map({ String(cString: $0) }) else {
            throw ValidationError("no socket: pass --socket PATH or set OVERTIME_CONTROL_SOCKET")
        }
        let response: ControlResponse
        do {
            response = try ControlClient(path: path).send(request)
        } catch {
            FileHandleOutput.standardError("overtimectl: \(error)")
            throw ExitCode(error.exitStatus)
        }
        if json {
            print(String(decoding: ControlProtocol.encode(response), as: UTF8.self), terminator: "")
        }
        guard response.ok else {
            if !json { FileHandleOutput.standardError("overtimectl: \(response.error ?? "the daemon refused")") }
            throw ExitCode(1)
        }
        return response
    }
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the lifecycle state, open tasks and time left.")
    @OptionGroup var options: ConnectionOptions

    func run() throws {
        let response = try options.send(ControlRequest(command: "status"))
        guard !options.json, let status = response.status else { return }
        print(
            Table.render(rows: [
                ["state", status.state],
                ["pid", "\(status.pid)"],
                ["open tasks", "\(status.openBackgroundTasks)"],
                ["time left", Table.seconds(status.backgroundTimeRemaining)],
                ["terminating", status.terminating ? "yes" : "no"],
            ]))
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
        print(Table.render(rows: [["ID", "NAME", "AGE", "LEFT", "EXPIRED", "BEGUN AT"]] + rows))
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

struct Terminate: SimpleCommand {
    static let configuration = CommandConfiguration(
        abstract: "Terminate gracefully; again while terminating: expire every task now.")
    static let command = "terminate"
    @OptionGroup var options: ConnectionOptions
}

struct Reload: SimpleCommand {
    static let configuration = CommandConfiguration(abstract: "Deliver a reload event.")
    static let command = "reload"
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
            guard let parsed = BackgroundTaskID(parsing: id) else {
                throw ValidationError("'\(id)' is not a task ID (expected #r3, #0.1 or a raw number)")
            }
            request.id = parsed.rawValue
        }
        let response = try options.send(request)
        if !options.json { print(response.message ?? "ok") }
    }
}

struct Call: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send a command the program added to its control socket (log-uploader: redrive).")
    @OptionGroup var options: ConnectionOptions

    @Argument(help: "The command's name.")
    var name: String

    func run() throws {
        let response = try options.send(ControlRequest(command: name))
        if !options.json { print(response.message ?? "ok") }
    }
}

struct SimulateLaunch: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate-launch", abstract: "Launch a scheduled task now, as the scheduler would.")
    @OptionGroup var options: ConnectionOptions

    @Argument(help: "The task identifier registered with the scheduler.")
    var identifier: String

    func run() throws {
        let response = try options.send(ControlRequest(command: "simulate-launch", identifier: identifier))
        if !options.json { print(response.message ?? "ok") }
    }
}

/// Plain aligned columns.
enum Table {
    static func render(rows: [[String]]) -> String {
        let widths = (0..<(rows.map(\.count).max() ?? 0)).map { column in
            rows.map { column < $0.count ? $0[column].count : 0 }.max() ?? 0
        }
        return rows.map { row in
            row.enumerated().map { index, cell in
                index == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[index] + 2 - cell.count)
            }.joined()
        }.joined(separator: "\n")
    }

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
