// A real daemon (the fixture: a schedule in every state, its control socket) and a real
// `overtime-dashboard` beside it, each its own process, in a folder of their own.

import Foundation
import Overtime
import OvertimeControl
import OvertimePostgres
import OvertimeScheduler
import PostgresTestServer

#if canImport(Glibc)
    import Glibc
#endif

/// The fixture daemon and a dashboard of its schedule; or, on a fleet's PostgreSQL, the
/// fixture as instance `alpha` beside a member `beta` (see ``killMember()``).
final class DashboardUnderTest: @unchecked Sendable {  // changed only while it starts
    let folder: String
    /// The fleet's database server, when the schedule is a fleet's.
    let fleet: PostgresServer?
    let token = "alice-" + String(UInt64.random(in: 1 << 60...UInt64.max), radix: 16)
    let otherToken = "bob-" + String(UInt64.random(in: 1 << 60...UInt64.max), radix: 16)
    /// What the dashboard's `--store` is given: the SQLite file, or the fleet's URL.
    var store: String {
        fleet.map { "postgres://postgres@127.0.0.1:\($0.port)/postgres" } ?? folder + "/schedule.db"
    }
    var database: ScheduleDatabase {
        get throws {
            fleet == nil ? .sqlite(path: store) : .postgres(try PostgresScheduleConfiguration(url: store))
        }
    }
    var socket: String { folder + "/control.sock" }
    var credentials: String { folder + "/credentials" }
    var actionLog: String { folder + "/actions.log" }
    private(set) var daemon: Process?
    private(set) var member: Process?
    private(set) var dashboard: Process?
    private(set) var port = 0
    var url: String { "http://127.0.0.1:\(port)\(mountPath)" }
    private(set) var mountPath = ""

    /// Starts the daemon, and the dashboard with `arguments` added (`--read-only`, …).
    init(dashboardArguments arguments: [String] = [], mountPath: String = "", fleet: Bool = false) throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("dashboard-\(UUID().uuidString)").path
        self.fleet = fleet ? try PostgresServer() : nil
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(
            atPath: credentials, contents: Data("# who may sign in\nalice:\(token)\nbob:\(otherToken)\n".utf8),
            attributes: [.posixPermissions: 0o600])
        if fleet {
            member = try Self.spawn(
                "dashboard-fixture-daemon", ["--postgres", store, "--name", "beta", "--member-only"],
                output: folder + "/member.out")
            guard Self.waitForLine(in: folder + "/member.out", { $0 == "READY" }) != nil else {
                throw Failure("the member did not start: \(Self.read(folder + "/member.out"))")
            }
        }
        let schedule = fleet ? ["--postgres", store, "--name", "alpha"] : ["--store", store]
        if !fleet {
            let (status, output) = try Self.run("dashboard-fixture-daemon", schedule + ["--seed-orphan"])
            guard status == 0 else { throw Failure("the orphan was not seeded: \(output)") }
        }
        daemon = try Self.spawn(
            "dashboard-fixture-daemon", schedule + ["--control-socket", socket], output: folder + "/daemon.out")
        guard Self.waitForLine(in: folder + "/daemon.out", { $0 == "READY" }) != nil else {
            throw Failure("the daemon did not start: \(Self.read(folder + "/daemon.out"))")
        }
        self.mountPath = mountPath
        try startDashboard(
            [
                "--store", store, "--control-socket", socket, "--credentials", credentials, "--listen", "0",
                "--action-log", actionLog,
            ] + (mountPath.isEmpty ? [] : ["--mount-path", mountPath]) + arguments)
    }

    /// Kills the dashboard and starts it again with the arguments it had.
    func restartDashboard() throws {
        try startDashboard(dashboardArguments)
    }

    private(set) var dashboardArguments: [String] = []
    /// The dashboard's own output (its log).
    private(set) var dashboardOutput = ""

    func startDashboard(_ arguments: [String]) throws {
        // One dashboard at a time: one started before is killed, never left running.
        if let dashboard, dashboard.isRunning {
            kill(dashboard.processIdentifier, SIGKILL)
            dashboard.waitUntilExit()
        }
        dashboardArguments = arguments
        let output = folder + "/dashboard-\(UUID().uuidString).out"
        dashboard = try Self.spawn("overtime-dashboard", arguments, output: output)
        dashboardOutput = output
        guard
            let line = Self.waitForLine(in: output, { $0.hasPrefix("dashboard at http://127.0.0.1:") }),
            let port = Int(line.dropFirst("dashboard at http://127.0.0.1:".count).prefix { $0.isNumber })
        else {
            throw Failure("the dashboard did not start: \(Self.read(output))")
        }
        self.port = port
    }

    /// The daemon's answer to a control command.
    func control(_ command: String, _ arguments: [String] = []) throws -> String {
        try ControlSocketClient(path: socket).call(command, arguments)
    }

    /// The schedule as an inspector reads it: what the tests check actions against.
    func inspected(_ identifier: String) async throws -> InspectedRequest? {
        let inspector = try await database.inspector()
        defer { inspector.close() }
        return try await inspector.request(identifier, now: SystemClock().wallClockNow)
    }

    func history(_ identifier: String) async throws -> [RunRecord] {
        let inspector = try await database.inspector()
        defer { inspector.close() }
        var itsOwn = HistoryQuery(limit: 100)
        itsOwn.identifier = identifier
        return try await inspector.history(itsOwn)
    }

    /// The fleet's instances, as an inspector reads them.
    func instances() async throws -> [InspectedInstance] {
        let inspector = try await database.inspector()
        defer { inspector.close() }
        return try await inspector.instances(now: SystemClock().wallClockNow)
    }

    /// Kills the fleet's member `beta` (kill -9: a machine that died) and waits until the
    /// database no longer lists a connection of it.
    func killMember() async throws {
        guard let member else { return }
        kill(member.processIdentifier, SIGKILL)
        member.waitUntilExit()
        for _ in 0..<500 {
            if try await instances().first(where: { $0.name == "beta" })?.connections == 0 { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw Failure("beta is still connected: \(try await instances())")
    }

    func stop() {
        // Children of the test runner's threads start with signals blocked: SIGKILL reaches them.
        for process in [dashboard, daemon, member].compactMap({ $0 }) where process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        fleet?.stop()
        try? FileManager.default.removeItem(atPath: folder)
    }

    // MARK: Processes

    static func executable(_ name: String) -> URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent(name)
    }

    static func spawn(_ name: String, _ arguments: [String], output: String) throws -> Process {
        let process = Process()
        process.executableURL = executable(name)
        process.arguments = arguments
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        return process
    }

    /// Runs `name` to its end: its exit status and everything it printed.
    static func run(_ name: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("run-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        let process = try spawn(name, arguments, output: output)
        let deadline = Date().addingTimeInterval(30)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
        }
        process.waitUntilExit()
        return (process.terminationStatus, read(output))
    }

    static func read(_ path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }

    static func waitForLine(in path: String, timeout: TimeInterval = 60, _ match: (String) -> Bool) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let line = read(path).split(separator: "\n").map(String.init).first(where: match) { return line }
            usleep(20_000)
        }
        return nil
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
