// The scheduler rows' peers and their ceiling: APScheduler and huey on SQLite
// (`Peers/scheduler_peer.py`, in a Python environment of their own that `run` makes), and
// the same state changes by the smallest C program (`Peers/sqlite_limit.c`, compiled here);
// the fleet rows' peers on PostgreSQL (`Peers/fleet_peer.py`: procrastinate, PgQueuer, Oban,
// APScheduler).

import Foundation

/// Runs a peer's scenario in a process of its own and reads its figure.
public struct SchedulerPeers: Sendable {
    /// The Python of the peers' environment (APScheduler, huey, procrastinate, PgQueuer and,
    /// where its Python is 3.12 or later, Oban installed).
    public let python: String
    /// The folder of `scheduler_peer.py` and `sqlite_limit.c`.
    public let folder: String
    /// A folder on disk for the peers' databases.
    public let scratch: String

    /// Peers run with `python`, their scripts in `folder`, their databases under `scratch`.
    public init(python: String, folder: String, scratch: String) {
        self.python = python
        self.folder = folder
        self.scratch = scratch
    }

    /// `peer`'s `scenario` with `numbers` (see `scheduler_peer.py`): its figure; the samples
    /// behind it, if it prints them, recorded as `samplesOf`'s.
    public func figure(_ peer: String, _ scenario: String, _ numbers: [Int], samplesOf metric: String? = nil) throws
        -> Double
    {
        try Self.value(
            of: python,
            [folder + "/scheduler_peer.py", peer, scenario, try freshFolder(peer)] + numbers.map(String.init),
            what: "\(peer) \(scenario)", samplesOf: metric.map { ($0, peer) })
    }

    /// A fleet peer's `scenario` with `numbers` (see `fleet_peer.py`), on the PostgreSQL server
    /// the `PG*` variables name: its figure; the samples behind it recorded as `samplesOf`'s.
    public func fleetFigure(_ peer: String, _ scenario: String, _ numbers: [Double], samplesOf metric: String? = nil)
        throws -> Double
    {
        try Self.value(
            of: python,
            [folder + "/fleet_peer.py", peer, scenario, try freshFolder("fleet-" + peer)]
                + numbers.map { $0 == $0.rounded() ? String(Int($0)) : String($0) },
            what: "\(peer) \(scenario)", samplesOf: metric.map { ($0, peer) })
    }

    /// Whether the peers' Python has `module` (Oban for Python needs 3.12), or why not.
    public func missing(_ module: String) -> String? {
        do {
            _ = try programOutput(python, ["-c", "import \(module)"], what: "import \(module)")
            return nil
        } catch {
            let version =
                (try? programOutput(python, ["--version"], what: "python"))?
                .trimmingCharacters(in: .whitespacesAndNewlines) ?? "?"
            return "\(module) is not installed in the peers' Python (\(version))"
        }
    }

    /// `peer` at rest with `pending` requests due in an hour: its threads' wake-ups per second.
    public func idleWakeups(_ peer: String, pending: Int, seconds: Double) throws -> Double {
        let process = try MeasuredProcess(
            python, [folder + "/scheduler_peer.py", peer, "idle", try freshFolder(peer), String(pending)])
        defer { _ = try? process.terminate(timeout: 10) }
        _ = try process.waitForReady(timeout: 600)
        usleep(settleMicroseconds)  // as IdleWakeups: after the start settles
        return process.wakeupsPerSecond(seconds: seconds).rate
    }

    /// The C program's `scenario` (`submit`, `batched`, `runs`) over `count` requests.
    public func limit(_ scenario: String, _ count: Int) throws -> Double {
        let program = scratch + "/sqlite_limit"
        if !FileManager.default.isExecutableFile(atPath: program) {
            _ = try programOutput(
                "/usr/bin/cc", ["-O2", "-o", program, folder + "/sqlite_limit.c", "-lsqlite3"], what: "cc")
        }
        return try Self.value(of: program, [try freshFolder("limit"), scenario, String(count)], what: "sqlite_limit")
    }

    private func freshFolder(_ name: String) throws -> String {
        let path = scratch + "/peer-\(name)"
        try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// The `value` of the JSON object the program prints last; its `samples`, if any,
    /// recorded as `samplesOf`'s (metric, implementation).
    static func value(
        of program: String, _ arguments: [String], what: String, samplesOf: (String, String)? = nil
    ) throws -> Double {
        let text = try programOutput(program, arguments, what: what)
        guard let last = text.split(separator: "\n").last,
            let object = try? JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any],
            let value = object["value"] as? Double
        else { throw ScenarioError("\(what): no figure in \(text.suffix(400))") }
        if let (metric, implementation) = samplesOf, let samples = object["samples"] as? [Double] {
            Distributions.record(metric, implementation, samples)
        }
        return value
    }
}
