import BenchmarkScenarios
import Foundation

/// Which implementations each metric has, and how each is measured at these sizes.
struct Scenarios {
    let sizes: Sizes
    let nginx: String?
    let scratch: String
    let notes = Unprotected<[String]>([])
    /// Lateness samples by implementation, measured once for both percentile metrics.
    let latenessSamples = Unprotected<[String: [Int64]]>([:])

    typealias Row = (String, () throws -> Double)

    func rows(for metric: String) -> [Row] {
        let s = sizes
        switch metric {
        case "grant_begin_end_pairs_per_sec":
            return [
                ("overtime", { try GrantPairs.overtime(open: s.openGrants, seconds: s.pairSeconds) }),
                ("libuv_timer", { GrantPairs.libuvTimer(open: s.openGrants, seconds: s.pairSeconds) }),
                ("nio_scheduled", { try GrantPairs.nioScheduled(open: s.openGrants, seconds: s.pairSeconds) }),
                ("dispatch_after", { GrantPairs.dispatchAfter(open: s.openGrants, seconds: s.pairSeconds) }),
                ("task_sleep", { GrantPairs.taskSleep(open: s.openGrants, seconds: s.pairSeconds) }),
                ("libuv_timer_reused", { GrantPairs.libuvTimerReused(open: s.openGrants, seconds: s.pairSeconds) }),
            ]
        case "grant_begin_end_cross_thread_pairs_per_sec":
            return [
                ("overtime", { try GrantPairs.overtimeCrossThread(open: s.openGrants, pairs: s.crossThreadPairs) })
            ]
        case "expiration_lateness_p99_us", "expiration_lateness_p50_us":
            // One measurement per implementation serves both percentiles.
            let fraction = metric == "expiration_lateness_p99_us" ? 0.99 : 0.5
            let (count, spread) = (s.latenessGrants, s.latenessSpreadSeconds)
            let implementations: [(String, () throws -> [Int64])] = [
                ("overtime", { try ExpirationLateness.overtime(count: count, spreadSeconds: spread) }),
                ("nio_scheduled", { try ExpirationLateness.nioScheduled(count: count, spreadSeconds: spread) }),
                ("dispatch_after", { ExpirationLateness.dispatchAfter(count: count, spreadSeconds: spread) }),
            ]
            return implementations.map { name, measure in
                (
                    name,
                    {
                        let samples = try latenessSamples.value[name] ?? measure()
                        latenessSamples.value[name] = samples
                        return Double(percentile(samples, fraction)) / 1_000
                    }
                )
            }
        case "bytes_per_open_grant":
            return OpenGrantMemory.implementations.map { implementation in
                (implementation, { try measureMemoryInChild(implementation, count: s.memoryGrants) })
            }
        case "idle_wakeups_per_sec":
            return [
                ("overtime", { try IdleWakeups.overtime(grants: s.idleGrants, seconds: s.idleSeconds) }),
                ("nio_scheduled", { try IdleWakeups.nioScheduled(grants: s.idleGrants, seconds: s.idleSeconds) }),
            ]
        case "transition_1000_observers_p99_us":
            return [
                ("overtime", { try ObserverTransition.overtime(observers: s.observers, roundTrips: s.transitions) })
            ]
        case "spool_ingest_lines_per_sec":
            return [
                ("overtime_append", { try SpoolIngest.append(lines: s.spoolLines, scratch: scratch) }),
                (
                    "overtime_log_handler",
                    {
                        let (rate, dropped) = try SpoolIngest.logHandler(lines: s.spoolLines, scratch: scratch)
                        if dropped > 0 {
                            notes.value.append(
                                "spool_ingest_lines_per_sec / overtime_log_handler: \(dropped) of \(s.spoolLines) "
                                    + "lines dropped by the handler's full queue (not counted)")
                        }
                        return rate
                    }
                ),
            ]
        case "upload_lines_per_sec":
            guard let nginx else {
                notes.value.append("upload_lines_per_sec not measured: no --nginx URL")
                return []
            }
            return [
                ("overtime", { try UploadThroughput.overtime(baseURL: nginx, lines: s.uploadLines, scratch: scratch) }),
                ("ceiling", { try UploadThroughput.ceiling(baseURL: nginx, lines: s.uploadLines, scratch: scratch) }),
            ]
        default:
            return []
        }
    }

    /// Runs this executable again to measure one implementation's memory alone.
    func measureMemoryInChild(_ implementation: String, count: Int) throws -> Double {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ProcessInfo.processInfo.arguments[0])
        process.arguments = ["--child-memory", implementation, "--count", "\(count)"]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0,
            let value = Double(output.trimmingCharacters(in: .whitespacesAndNewlines))
        else {
            throw ScenarioError("child exited \(process.terminationStatus): \(output)")
        }
        return value
    }
}
