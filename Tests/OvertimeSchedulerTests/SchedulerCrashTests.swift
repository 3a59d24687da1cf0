import Foundation
import OvertimeTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite(
    "Scheduler crash safety: a real daemon killed with -9 again and again", .timeLimit(.minutes(4)),
    .notUnderThreadSanitizer(
        "durability across kill -9: children killed mid-work, whose race reports no one reads; the same daemon's threads are checked where it exits by itself"
    ))
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

    @Test(.startsProcesses) func requestsSurviveCompletedRunsNeverRepeatAndInterruptedRunsAreRetriedOnce() async throws
    {
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
            // A handler runs once its start is durable: no run ID and attempt starts twice (a
            // run given up after two interruptions does not lend its ID to the next run).
            let starts = effects.filter { $0.hasPrefix("START ") }
            #expect(Set(starts).count == starts.count, "an attempt started twice")
            for attempt in attempts where attempt.result == "succeeded" {
                #expect(done.contains("DONE \(attempt.identifier) \(attempt.runID) \(attempt.attempt)"))
            }
        }
    }

    /// Chains of three links with outputs, the daemon killed with -9 fifty times at random
    /// moments: every link of every chain runs to success exactly once (one run ID; a run
    /// a kill interrupted retried under it), only after its prerequisite's success is
    /// recorded, with that prerequisite's output; outputs are intact to the chain's end.
    @Test(.startsProcesses) func everyLinkOfAChainRunsOnceToSuccessAfterItsPrerequisiteWithItsOutputAcross50Kills()
        async throws
    {
        try await onOwnThread {
            let folder = TemporaryDirectory("scheduler-chain")
            defer { folder.remove() }
            var generator = SplitMix64(seed: 0xC4A1)
            for _ in 0..<50 {
                let child = try RunningChild(["scheduler-chain", folder.path])
                #expect(child.waitForLine { $0 == "READY" } != nil)
                usleep(UInt32(30_000 + generator.next() % 300_000))
                child.send(SIGKILL)
                _ = child.waitForExit()
            }
            // Once more without a kill and without new chains, until what was submitted has
            // finished (a link interrupted twice in a row waits for its retry's backoff).
            let store = folder.path + "/schedule.db"
            let last = try RunningChild(["scheduler-chain", folder.path, "finish"])
            #expect(last.waitForLine { $0 == "READY" } != nil)
            var pending = -1
            for _ in 0..<1200 {
                guard pending != 0 else { break }
                usleep(100_000)
                pending =
                    (try? sqliteShell(store, "SELECT count(*) FROM requests WHERE finished = 0"))?
                    .first?.first.flatMap { Int($0) } ?? -1
            }
            #expect(pending == 0, "every chain submitted finished")
            last.send(SIGTERM)
            #expect(last.waitForExit(timeout: .seconds(30)) == 0)

            let rows = try sqliteShell(
                store,
                "SELECT identifier, run_id, attempt, result, CAST(output AS TEXT) FROM history ORDER BY run_id, attempt"
            )
            let effects = try String(contentsOfFile: folder.path + "/effects.log", encoding: .utf8)
                .split(separator: "\n").map(String.init)
            let chains = Set(rows.map { $0[0].split(separator: ".")[0] })
            var complete = 0
            var interrupted = 0
            for chain in chains.sorted() {
                let output: (String) -> String? = { link in
                    rows.first { $0[0] == "\(chain).\(link)" && $0[3] == "succeeded" }?[4]
                }
                for (link, prerequisite) in [("a", nil), ("b", "a"), ("c", "b")] as [(String, String?)] {
                    let identifier = "\(chain).\(link)"
                    let attempts = rows.filter { $0[0] == identifier }
                    interrupted += attempts.filter { $0[3] == "interrupted" }.count
                    #expect(Set(attempts.map { $0[1] }).count <= 1, "\(identifier): one run, however often interrupted")
                    #expect(attempts.filter { $0[3] == "succeeded" }.count <= 1, "\(identifier): one success at most")
                    #expect(attempts.allSatisfy { $0[3] == "succeeded" || $0[3] == "interrupted" }, "\(attempts)")
                    if let success = attempts.firstIndex(where: { $0[3] == "succeeded" }) {
                        #expect(success == attempts.count - 1, "\(identifier): never run again once it succeeded")
                    }
                    let starts = effects.enumerated().filter { $0.element.hasPrefix("START \(identifier) ") }
                    guard let prerequisite else { continue }
                    let before = "\(chain).\(prerequisite)"
                    let done = effects.firstIndex { $0.hasPrefix("DONE \(before) ") }
                    for start in starts {
                        #expect(
                            done.map { $0 < start.offset } == true, "\(identifier) started after \(before) was done")
                        #expect(
                            start.element.hasSuffix(" " + (output(prerequisite) ?? "?")),
                            "\(identifier) was handed \(before)'s output: \(start.element)")
                    }
                }
                if let final = output("c") {
                    #expect(final == "\(chain).a|\(chain).b|\(chain).c", "the outputs intact to the end")
                    complete += 1
                }
            }
            print("scheduler chain crash test: 50 kills, \(complete) chains complete, \(interrupted) links interrupted")
            #expect(complete >= 1 && complete == chains.count, "every chain complete")
            #expect(interrupted > 0, "kills landed during runs")
        }
    }
}
