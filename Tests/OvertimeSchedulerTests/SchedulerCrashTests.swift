import Foundation
import OvertimeTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Scheduler crash safety: a real daemon killed with -9 a hundred times", .timeLimit(.minutes(4)))
struct SchedulerCrashTests {
    private struct Attempt: Hashable {
        let identifier: String
        let runID: Int64
        let attempt: Int
        let result: String
    }

    /// The identifiers of the requests and every attempt, as the `sqlite3` shell reads them.
    private static func read(_ store: String) throws -> (identifiers: [String], attempts: [Attempt]) {
        let identifiers = try sqliteShell(store, "SELECT identifier FROM requests ORDER BY identifier").map { $0[0] }
        let rows = try sqliteShell(
            store, "SELECT identifier, run_id, attempt, result FROM history ORDER BY run_id, attempt")
        let attempts = rows.map {
            Attempt(identifier: $0[0], runID: Int64($0[1]) ?? -1, attempt: Int($0[2]) ?? -1, result: $0[3])
        }
        return (identifiers, attempts)
    }

    @Test func requestsSurviveCompletedRunsNeverRepeatAndInterruptedRunsAreRetriedOnce() async throws {
        try await onOwnThread {
            let folder = TemporaryDirectory("scheduler-crash")
            defer { folder.remove() }
            var generator = SplitMix64(seed: 0x5C4ED)
            for _ in 0..<100 {
                let child = try RunningChild(["scheduler-crash", folder.path])
                #expect(child.waitForLine { $0 == "READY" } != nil)
                usleep(UInt32(50_000 + generator.next() % 250_000))  // mid-run, mid-write, anywhere
                child.send(SIGKILL)
                _ = child.waitForExit()
            }
            // Once more without a kill: what the last kill interrupted is retried, the one-shots
            // finish; then a graceful stop.
            let last = try RunningChild(["scheduler-crash", folder.path])
            #expect(last.waitForLine { $0 == "READY" } != nil)
            usleep(1_500_000)
            last.send(SIGTERM)
            #expect(last.waitForExit(timeout: .seconds(30)) == 0)

            let (identifiers, attempts) = try Self.read(folder.path + "/schedule.db")
            #expect(
                identifiers == ["once-1", "once-2", "once-3", "once-4", "once-5", "tick"],
                "every request is still there")
            let runs = Dictionary(grouping: attempts, by: \.runID)
            #expect(runs.count >= 10, "runs started between the kills")
            var interruptedAndRetried = 0
            for (runID, run) in runs {
                let ordered = run.sorted { $0.attempt < $1.attempt }
                #expect(
                    ordered.map(\.attempt) == Array(1...ordered.count), "run \(runID): attempts in order, none lost")
                if let success = ordered.firstIndex(where: { $0.result == "succeeded" }) {
                    #expect(success == ordered.count - 1, "run \(runID): a completed run is never run again")
                }
                for (index, attempt) in ordered.enumerated() where attempt.result == "interrupted" {
                    let secondInARow = index > 0 && ordered[index - 1].result == "interrupted"
                    if !secondInARow {
                        #expect(index + 1 < ordered.count, "run \(runID) attempt \(attempt.attempt): retried")
                        interruptedAndRetried += 1
                    }
                }
            }
            print(
                "scheduler crash test: 100 kills, \(runs.count) runs, \(attempts.count) attempts,"
                    + " \(interruptedAndRetried) interrupted and retried")
            #expect(interruptedAndRetried > 0, "kills landed during runs")
            for index in 1...5 {
                let completed = attempts.filter { $0.identifier == "once-\(index)" && $0.result == "succeeded" }
                #expect(completed.count == 1, "once-\(index) completed exactly once")
            }
            // Every completion recorded had its effect written first.
            let effects = try String(contentsOfFile: folder.path + "/effects.log", encoding: .utf8)
                .split(separator: "\n").map(String.init)
            let done = Set(effects.filter { $0.hasPrefix("DONE ") })
            for attempt in attempts where attempt.result == "succeeded" {
                #expect(done.contains("DONE \(attempt.identifier) \(attempt.runID) \(attempt.attempt)"))
            }
        }
    }
}
