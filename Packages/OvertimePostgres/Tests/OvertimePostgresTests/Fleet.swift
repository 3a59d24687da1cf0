// Worker processes of a test fleet (`overtime-fleet-worker`), killed and restarted as an
// operator's machines die, and the log their runs write, read back to check.

import Foundation
import Overtime
@_spi(ScheduleStore) import OvertimeScheduler
import PostgresTestServer

#if canImport(Glibc)
    import Glibc
#endif

/// Workers sharing one PostgreSQL schedule, each a process of its own.
final class Fleet {
    let server: PostgresServer
    let folder: String
    let logPath: String
    private let environment: [String: String]
    private(set) var workers: [Process] = []
    /// When each killed worker died (`CLOCK_MONOTONIC`): its open runs ended then.
    private(set) var killedAt: [Int32: Int64] = [:]
    /// Each worker has an instance name of its own, `worker-INDEX`, kept across restarts
    /// (and runs its per-instance `local.tick`).
    private let named: Bool

    /// Starts `count` workers; `environment` adds to (or overrides) what every worker gets.
    init(server: PostgresServer, count: Int, environment: [String: String] = [:], named: Bool = false) throws {
        self.server = server
        self.named = named
        folder =
            FileManager.default.temporaryDirectory.appendingPathComponent("overtime-fleet-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        logPath = folder + "/runs.log"
        var environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        environment["PGHOST"] = "127.0.0.1"
        environment["PGPORT"] = "\(server.port)"
        environment["PGUSER"] = "postgres"
        environment["OVERTIME_FLEET_LOG"] = logPath
        self.environment = environment
        for index in 0..<count { workers.append(try spawn(index, extra: [:])) }
    }

    /// The worker program: `OVERTIME_FLEET_WORKER` when set, else the one built beside the
    /// tests. scripts/test runs the ThreadSanitizer tests with the plain build's workers:
    /// instrumented, four workers took half the suite's processor time (79 core-seconds of
    /// the fifty kills, 39 plain) and starved the database past its 5 s deadlines, for race
    /// reports no one read (a worker is killed, or stopped by a signal). The schedulers the
    /// tests run in their own process stay instrumented.
    static var workerExecutable: URL {
        if let path = ProcessInfo.processInfo.environment["OVERTIME_FLEET_WORKER"], !path.isEmpty {
            return URL(fileURLWithPath: path)
        }
        return URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("overtime-fleet-worker")
    }

    /// A test that ends early (an error thrown before its `stop()`) leaves no worker running:
    /// one would go on trying a database that is gone, loading the tests after it (four
    /// instrumented workers of a failed test were found still running minutes later). Not
    /// waited for: Foundation reaps them, and `waitUntilExit()` here never returned.
    deinit {
        for worker in workers where worker.isRunning { kill(worker.processIdentifier, SIGKILL) }
    }

    /// Starts worker `index` with `extra` variables.
    func spawn(_ index: Int, extra: [String: String]) throws -> Process {
        let process = Process()
        process.executableURL = Self.workerExecutable
        process.environment = environment.merging(extra) { $1 }
        if named { process.environment?["OVERTIME_FLEET_NAME"] = "worker-\(index)" }
        let output = folder + "/worker-\(index).out"
        if !FileManager.default.fileExists(atPath: output) {
            _ = FileManager.default.createFile(atPath: output, contents: nil)
        }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        handle.seekToEndOfFile()
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        return process
    }

    /// Starts one more worker, with `extra` variables; returns its index.
    @discardableResult
    func add(extra: [String: String] = [:]) throws -> Int {
        workers.append(try spawn(workers.count, extra: extra))
        return workers.count - 1
    }

    /// Sends `signal` to worker `index` (SIGSTOP, SIGCONT: a machine or container frozen).
    func signal(_ index: Int, _ signal: Int32) {
        kill(workers[index].processIdentifier, signal)
    }

    /// Replaces worker `index` with one started with `extra` variables.
    func replace(_ index: Int, extra: [String: String]) throws {
        workers[index] = try spawn(index, extra: extra)
    }

    /// Kills worker `index` with SIGKILL, waits for its end, and starts another in its place.
    func killAndRestart(_ index: Int) throws {
        killForGood(index)
        workers[index] = try spawn(index, extra: [:])
    }

    /// Kills worker `index` with SIGKILL and waits for its end: a machine that died.
    ///
    /// Its death is dated when `kill` returns: from then on none of its threads runs
    /// another instruction of its own (each leaves the kernel only to die). Not when the
    /// wait returns, which a loaded test process saw seconds later.
    func killForGood(_ index: Int) {
        let process = workers[index]
        kill(process.processIdentifier, SIGKILL)
        killedAt[process.processIdentifier] = Self.monotonicNow()
        process.waitUntilExit()
    }

    /// SIGTERM to every worker (continued first, if stopped), waited for.
    func stop() {
        for worker in workers where worker.isRunning {
            kill(worker.processIdentifier, SIGCONT)
            kill(worker.processIdentifier, SIGTERM)
        }
        for worker in workers { worker.waitUntilExit() }
    }

    /// What every worker printed (for a failure's message).
    func output() -> String {
        (try? FileManager.default.contentsOfDirectory(atPath: folder))?.filter { $0.hasSuffix(".out") }.sorted()
            .map { "\($0):\n" + ((try? String(contentsOfFile: folder + "/" + $0, encoding: .utf8)) ?? "") }
            .joined(separator: "\n") ?? ""
    }

    func removeFolder() { try? FileManager.default.removeItem(atPath: folder) }

    static func monotonicNow() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }

    static func realNow() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }
}

/// The fleet's run log, read back: one execution per `start` line, ended by its `end`
/// line or by the death of its process.
struct FleetLog {
    struct Execution {
        let identifier: String
        let runID: Int64
        let attempt: Int
        let due: Int64
        let startedReal: Int64
        let started: Int64
        let pid: Int32
        /// `CLOCK_MONOTONIC` at its end, or at its process's death; `nil`: neither.
        var ended: Int64?
        /// "ok", "expired", "killed", or `nil` while open.
        var outcome: String?
    }

    var executions: [Execution] = []

    init(path: String, killedAt: [Int32: Int64]) throws {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        var open: [String: Int] = [:]
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ").map(String.init)
            switch fields.first {
            case "start" where fields.count == 8:
                let key = "\(fields[1]) \(fields[2]) \(fields[3]) \(fields[7])"
                open[key] = executions.count
                executions.append(
                    Execution(
                        identifier: fields[1], runID: Int64(fields[2])!, attempt: Int(fields[3])!,
                        due: Int64(fields[4])!, startedReal: Int64(fields[5])!, started: Int64(fields[6])!,
                        pid: Int32(fields[7])!, ended: nil, outcome: nil))
            case "end" where fields.count == 8:
                let key = "\(fields[1]) \(fields[2]) \(fields[3]) \(fields[6])"
                guard let index = open.removeValue(forKey: key) else { continue }
                executions[index].ended = Int64(fields[5])!
                executions[index].outcome = fields[7]
            default:
                continue
            }
        }
        for index in open.values {
            if let death = killedAt[executions[index].pid] {
                executions[index].ended = death
                executions[index].outcome = "killed"
            }
        }
    }

    /// Executions of one identifier that overlapped in time (two places at once).
    func overlaps() -> [String] {
        var found: [String] = []
        for (identifier, runs) in Dictionary(grouping: executions, by: \.identifier) {
            let sorted = runs.sorted { $0.started < $1.started }
            for (earlier, later) in zip(sorted, sorted.dropFirst()) {
                if let end = earlier.ended, end <= later.started { continue }
                let ended = earlier.ended.map { "\(($0 - earlier.started) / 1_000_000) ms after its start" } ?? "never"
                found.append(
                    "\(identifier): run \(earlier.runID)/\(earlier.attempt) in \(earlier.pid) "
                        + "(\(earlier.outcome ?? "never ended"), ended \(ended)) overlaps run "
                        + "\(later.runID)/\(later.attempt) in \(later.pid), started "
                        + "\((later.started - earlier.started) / 1_000_000) ms after it")
            }
        }
        return found
    }

    /// The executions of `identifiers`, one a line (for a failure's message).
    func describe(_ identifiers: some Sequence<String>) -> String {
        let wanted = Set(identifiers)
        return executions.filter { wanted.contains($0.identifier) }.map { execution in
            "\(execution.identifier) run \(execution.runID)/\(execution.attempt) in \(execution.pid): started "
                + "\(execution.started), ended \(execution.ended.map(String.init) ?? "never") "
                + "(\(execution.outcome ?? "open"))"
        }.joined(separator: "\n")
    }

    /// Executions that ended as `outcome`, by identifier.
    func count(_ outcome: String) -> [String: Int] {
        executions.filter { $0.outcome == outcome }.reduce(into: [:]) { $0[$1.identifier, default: 0] += 1 }
    }
}
