import BenchmarkScenarios
import Foundation

/// Which implementations each metric has, and how each is measured at these sizes.
struct Scenarios {
    let sizes: Sizes
    let nginx: String?
    let scratch: String
    let notes = Unprotected<[String]>([])
    /// Lateness p50 and p99 by implementation, measured once for both metrics.
    let latenessPercentiles = Unprotected<[String: [Double]]>([:])

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
            // One measurement per implementation, in a process of its own (a timer's tail is
            // what other work in the process disturbs most), serves both percentiles.
            let isP99 = metric == "expiration_lateness_p99_us"
            return ExpirationLateness.implementations.map { implementation in
                (
                    implementation,
                    {
                        let percentiles =
                            try latenessPercentiles.value[implementation]
                            ?? measureInChild(
                                [
                                    "--child-lateness", implementation, "--count", "\(s.latenessGrants)", "--spread",
                                    "\(s.latenessSpreadSeconds)",
                                ], values: 2)
                        latenessPercentiles.value[implementation] = percentiles
                        return isP99 ? percentiles[1] : percentiles[0]
                    }
                )
            }
        case "bytes_per_open_grant":
            return OpenGrantMemory.implementations.map { implementation in
                (
                    implementation,
                    {
                        try measureInChild(
                            ["--child-memory", implementation, "--count", "\(s.memoryGrants)"], values: 1)[0]
                    }
                )
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
        case "scheduler_submit_per_sec":
            let z = s.scheduler
            return [
                ("overtime_single", { try SchedulerScenarios.submitSingle(count: z.singleSubmits, scratch: scratch) }),
                (
                    "overtime_batched",
                    { try SchedulerScenarios.submitBatched(count: z.batchedSubmits, batch: 1_000, scratch: scratch) }
                ),
            ]
        case "scheduler_runs_per_sec":
            let z = s.scheduler
            notes.value.append(
                "scheduler_runs_per_sec measured with \(z.runs) requests due at once, at most 1,000 running at once")
            return [("overtime", { try SchedulerScenarios.runs(count: z.runs, concurrent: 1_000, scratch: scratch) })]
        case "scheduler_lateness_p99_us":
            let z = s.scheduler
            notes.value.append(
                "scheduler_lateness_p99_us measured with \(z.latencyPending) pending, \(z.latencyDue) due over 5 s")
            return [
                (
                    "overtime",
                    {
                        try SchedulerScenarios.lateness(
                            pending: z.latencyPending, due: z.latencyDue, spread: 5, scratch: scratch)
                    }
                )
            ]
        case "scheduler_idle_wakeups_per_sec":
            return [
                (
                    "overtime",
                    {
                        try SchedulerScenarios.idleWakeups(
                            count: s.scheduler.idleRequests, seconds: s.idleSeconds, scratch: scratch)
                    }
                )
            ]
        case "scheduler_resident_mb":
            notes.value.append("scheduler_resident_mb measured with \(s.scheduler.memoryPending) pending")
            return [
                (
                    "overtime",
                    { try SchedulerScenarios.residentMegabytes(count: s.scheduler.memoryPending, scratch: scratch) }
                )
            ]
        default:
            return []
        }
    }

    /// Runs this executable again with `arguments`, to measure one implementation alone;
    /// returns the `values` numbers it prints.
    func measureInChild(_ arguments: [String], values: Int) throws -> [Double] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ProcessInfo.processInfo.arguments[0])
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let numbers = output.split(whereSeparator: \.isWhitespace).compactMap { Double($0) }
        guard process.terminationStatus == 0, numbers.count == values else {
            throw ScenarioError("child exited \(process.terminationStatus): \(output)")
        }
        return numbers
    }
}
