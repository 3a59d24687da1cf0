import Foundation
import Overtime
import OvertimeScheduler
import PostgresTestServer
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A fleet of four workers on a real PostgreSQL 15, killed with SIGKILL fifty times while
/// a thousand one-shots fall due: a suite of its own, so that it runs beside the one-at-a-time
/// fleet tests (``FleetTests``) rather than after them.
@Suite("A fleet of worker processes killed fifty times", .blockingFleet)
struct FleetKillTests {
    @Test func fourWorkersKilledFiftyTimesRunEachOneShotOnceAndNothingInTwoPlaces() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let observer = try FleetTests.observer(server)
        let fleet = try Fleet(server: server, count: 4, environment: ["OVERTIME_FLEET_WORK_MS": "40"], named: true)
        defer { fleet.removeFolder() }
        let seed =
            UInt64(ProcessInfo.processInfo.environment["OVERTIME_TEST_SEED"] ?? "") ?? UInt64.random(in: 1...1_000_000)
        var random = SplitMix(seed: seed)
        let start = Fleet.realNow() + 1_000_000_000
        try observer.submit(
            contentsOf: FleetTests.oneShots(1000, from: start, spacing: .milliseconds(40)) + FleetTests.ticks(10))
        // Fifty kills, 0.3 to 1.1 s apart, while the one-shots fall due over 40 s. Most hit a
        // worker drawn at random, whatever it is doing; every fifth of the first half hits one
        // with a run in progress, waiting for one if need be: on a loaded machine (two `yes`,
        // the main package's tests beside) not one of fifty random kills hit a run, and the
        // kill of a run is what this test is for. Only the first half: by the last kills the
        // one-shots may all have run and the ticks wait out retry delays, so that no worker
        // runs anything for seconds (CI, kill 45 of 50 found none in 10 s).
        let killsBegan = Fleet.monotonicNow()
        var kills: [[Int64]] = Array(repeating: [], count: 4)  // each worker's, in ms after the first
        for kill in 1...50 {
            usleep(useconds_t(300_000 + random.next() % 800_000))
            var index = Int(random.next() % 4)
            if kill % 5 == 0, kill <= 25 {
                _ = FleetTests.waitFor(10) { try Self.workerRunning(fleet) != nil }
                index = try Self.workerRunning(fleet) ?? index
            }
            kills[index].append((Fleet.monotonicNow() - killsBegan) / 1_000_000)
            try fleet.killAndRestart(index)
        }
        let drained = FleetTests.waitFor(90) { try observer.pendingRequestCount() == 10 }
        let runsWhenDrained = try Self.tickRuns(fleet)
        // The ticks run on until each has run ten times (checked below). A kill that lands
        // after a run began and before its end is written costs the run an attempt; a run
        // that three kills cost three attempts waits its retry delays (10 s, then 20 s) past
        // the last kill: busy run 144 killed the workers of tick.7's run 160 to 290 ms after
        // each of its three ends, and the tick had run once when the kills stopped.
        _ = FleetTests.waitFor(90) { try Self.tickRuns(fleet).allSatisfy { $0 >= 10 } }
        fleet.stop()
        #expect(drained, "the one-shots ran within 90 s of the last kill (seed \(seed))\n\(fleet.output())")
        let log = try FleetLog(path: fleet.logPath, killedAt: fleet.killedAt)
        let overlaps = log.overlaps()
        let overlapped = overlaps.compactMap { $0.split(separator: ":").first.map(String.init) }
        let said = fleet.output().split(separator: "\n").filter { line in overlapped.contains { line.contains($0) } }
        #expect(
            overlaps.isEmpty, "seed \(seed): \(overlaps.prefix(10))\n\(said.prefix(40).joined(separator: "\n"))")
        let problems = try FleetTests.completedOnce(observer, count: 1000)
        #expect(problems.isEmpty, "seed \(seed): \(problems.prefix(10))")
        #expect(
            FleetTests.oncePerPlannedTime(log).isEmpty, "seed \(seed): \(FleetTests.oncePerPlannedTime(log).prefix(10))"
        )
        // The periodic requests went on through the kills: about one run a second each,
        // less what the kills cost. A dead worker's claim holds its request up to 3 s; a run
        // interrupted twice counts as failed and waits its retry delay (10 s, then 20 s). On
        // a loaded machine a run lasts long enough for several kills to land in one tick's
        // runs, and a tick can lose the test's 40 s: each had until ten runs or 90 s after
        // the one-shots ran.
        for index in 0..<10 {
            let executions = log.executions.filter { $0.identifier == "tick.\(index)" }
            let runs = Set(executions.map(\.runID)).count
            // On failure, each execution: run, attempt, how it ended, start (ms after the first).
            let first = executions.map(\.startedReal).min() ?? 0
            let story = executions.sorted { $0.startedReal < $1.startedReal }.map {
                "\($0.runID)/\($0.attempt) \($0.outcome ?? "open") +\(($0.startedReal - first) / 1_000_000)"
            }
            // A tick short of ten runs when the one-shots had run owes it to the kills: some
            // attempt of it was taken over, its worker dead (never a tick left idle).
            if runsWhenDrained[index] < 10 {
                let takenOver = try server.psql(
                    "SELECT count(*) FROM overtime.history WHERE identifier = 'tick.\(index)' AND result = 'interrupted'"
                )
                #expect(
                    (Int(takenOver.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) > 0,
                    "tick.\(index) had run fewer than ten times when the one-shots had run, and no attempt of it was taken over: \(story)"
                )
            }
            if runs < 10 {
                // Where each attempt ran and ended, what the workers said of it, and the kills.
                // A batch that could not be recorded names none of its runs: its error is here.
                let output = fleet.output().split(separator: "\n")
                let said =
                    output.filter { $0.contains("tick.\(index)") }.prefix(20)
                    + output.filter { $0.contains(" error ") }.prefix(20)
                // What the database holds of its attempts: whether an end was ever recorded.
                let recorded =
                    (try? server.psql(
                        "SELECT run_id, attempt, result, instance, started_at, ended_at, stop_reason"
                            + " FROM overtime.history WHERE identifier = 'tick.\(index)' ORDER BY run_id, attempt"))
                    ?? "(not read)"
                Issue.record(
                    """
                    tick.\(index) ran \(runs) times (seed \(seed)): \(story.joined(separator: ", "))
                    \(log.describe(["tick.\(index)"]))
                    kills (ms after \(killsBegan) ns, by worker): \(kills)
                    \(said.joined(separator: "\n"))
                    history in the database:
                    \(recorded)
                    """)
            }
        }
        // Each worker's own request: one row per name however often its process was
        // replaced, run on through the kills (a restarted process takes it on), each of its
        // planned times once (checked above).
        let owners = try server.psql(
            "SELECT string_agg(owner, ',' ORDER BY owner) FROM overtime.requests WHERE identifier = 'local.tick'")
        #expect(owners.trimmingCharacters(in: .whitespacesAndNewlines) == "worker-0,worker-1,worker-2,worker-3")
        for index in 0..<4 {
            let identifier = "local.tick@worker-\(index)"
            let executions = log.executions.filter { $0.identifier == identifier }
            let runs = Set(executions.map(\.runID)).count
            // On failure, each execution (run, attempt, how it ended, start in ms after the
            // kills began) and the kills of its worker.
            let story = executions.sorted { $0.started < $1.started }.map {
                "\($0.runID)/\($0.attempt) \($0.outcome ?? "open") +\(($0.started - killsBegan) / 1_000_000)"
            }
            // Only while its worker lives: each kill of that worker costs its restart and the
            // dead process's claim (up to 3 s); a run a kill or a stall of the machine ended
            // twice waits its retry delay (10 s, then 20 s), as the ticks do; a worker killed
            // a dozen times loses most of 40 s.
            #expect(
                runs >= 3,
                "\(identifier) ran \(runs) times (seed \(seed)): \(story.joined(separator: ", ")); killed at \(kills[index])"
            )
        }
        #expect(fleet.killedAt.count == 50)
        #expect(log.executions.contains { $0.outcome == "killed" }, "some kills hit runs in progress")
        observer.runtime.requestTermination()
    }

    /// How many runs of each `tick.N` the log shows, by N.
    private static func tickRuns(_ fleet: Fleet) throws -> [Int] {
        let executions = try FleetLog(path: fleet.logPath, killedAt: fleet.killedAt).executions
        return (0..<10).map { index in Set(executions.filter { $0.identifier == "tick.\(index)" }.map(\.runID)).count }
    }

    /// The index of a worker whose log shows a run it began and has not ended, if any.
    private static func workerRunning(_ fleet: Fleet) throws -> Int? {
        let open = Set(
            try FleetLog(path: fleet.logPath, killedAt: fleet.killedAt).executions.filter { $0.outcome == nil }
                .map(\.pid))
        return fleet.workers.firstIndex { open.contains($0.processIdentifier) }
    }
}
