import BenchmarkScenarios
import Foundation

/// Which implementations each metric has, and how each is measured at these sizes.
struct Scenarios {
    let sizes: Sizes
    let nginx: String?
    let s3: UploadThroughput.S3Store?
    let scratch: String
    /// The folder of the shipped programs' static builds.
    let programs: String
    /// The floor program's static build: the smallest Swift daemon.
    let floor: String
    let notes = Unprotected<[String]>([])
    /// Each program measured once for every footprint row.
    let figures = Unprotected<[String: ProgramFigures]>([:])
    /// Lateness p50 and p99 by implementation, measured once for both metrics.
    let latenessPercentiles = Unprotected<[String: [Double]]>([:])
    /// The fleet rows, from one run of `overtime-fleet-bench`.
    let fleetFigures = Unprotected<[String: Double]?>(nil)
    /// The fleet peers' runs per second, each measured once for both throughput rows (they
    /// run at their defaults in both).
    let fleetPeerRates = Unprotected<[String: Double]>([:])
    /// The run's mode (the fleet program sizes itself by it).
    let mode: BenchmarkMode
    /// The dashboard's executable (`overtime-dashboard`), for its rows.
    let dashboard: String?
    /// The dashboard rows, measured once for both metrics.
    let dashboardFigures = Unprotected<DashboardPages.Figures?>(nil)
    /// The scheduler rows' peers (APScheduler, huey) and their SQLite ceiling.
    let peers: SchedulerPeers?
    /// Where the `_metrics` programs serve GET /metrics (loopback, free when the run began).
    let metricsPort = (try? MetricsScrape.freePort()) ?? 19_464

    typealias Row = (String, () throws -> Double)

    func rows(for metric: String) -> [Row] {
        let s = sizes
        switch metric {
        case "grant_begin_end_pairs_per_sec":
            return [
                ("overtime", { try GrantPairs.overtime(open: s.openGrants, .seconds(s.pairSeconds)) }),
                (
                    "overtime_bare",
                    { try GrantPairs.overtime(open: s.openGrants, .seconds(s.pairSeconds), bare: true) }
                ),
                ("libuv_timer", { GrantPairs.libuvTimer(open: s.openGrants, .seconds(s.pairSeconds)) }),
                ("nio_scheduled", { try GrantPairs.nioScheduled(open: s.openGrants, .seconds(s.pairSeconds)) }),
                ("dispatch_after", { GrantPairs.dispatchAfter(open: s.openGrants, .seconds(s.pairSeconds)) }),
                ("task_sleep", { GrantPairs.taskSleep(open: s.openGrants, seconds: s.pairSeconds) }),
                ("libuv_timer_reused", { GrantPairs.libuvTimerReused(open: s.openGrants, .seconds(s.pairSeconds)) }),
            ]
        case "grant_pair_instructions":
            return GrantPairs.countedImplementations.map { implementation in
                (
                    implementation,
                    {
                        try PairInstructions.count(implementation, executable: Self.selfPath, pairs: s.instructionPairs)
                    }
                )
            }
        case "grant_begin_end_cross_thread_pairs_per_sec":
            return [
                ("overtime", { try GrantPairs.overtimeCrossThread(open: s.openGrants, pairs: s.crossThreadPairs) })
            ]
        case "expiration_lateness_p99_us", "expiration_lateness_p50_us", "expiration_lateness_p999_us",
            "expiration_lateness_max_us", "expiration_lateness_steal_percent":
            // One measurement per implementation, in a process of its own (a timer's tail is
            // what other work in the process disturbs most), serves every row of it.
            let column = [
                "expiration_lateness_p50_us", "expiration_lateness_p99_us", "expiration_lateness_p999_us",
                "expiration_lateness_max_us", "expiration_lateness_steal_percent",
            ].firstIndex(of: metric)!
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
                                ], values: 5)
                        latenessPercentiles.value[implementation] = percentiles
                        return percentiles[column]
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
            let children: [Row] = IdleWakeups.implementations.map { implementation in
                (
                    implementation,
                    {
                        try IdleWakeups.measureChild(
                            executable: Self.selfPath, implementation: implementation, grants: s.idleGrants,
                            seconds: s.idleSeconds)
                    }
                )
            }
            return children + [
                ("log_uploader", { try program("log_uploader").wakeupsPerSecond }),
                ("log_uploader_metrics", { try program("log_uploader_metrics").wakeupsPerSecond }),
                ("tiny_daemon", { try program("tiny_daemon").wakeupsPerSecond }),
                ("tiny_daemon_metrics", { try program("tiny_daemon_metrics").wakeupsPerSecond }),
                ("tiny_daemon_logind", { try program("tiny_daemon_logind").wakeupsPerSecond }),
                ("service_lifecycle_peer", { try program("service_lifecycle_peer").wakeupsPerSecond }),
                (
                    "tiny_daemon_busy",
                    {
                        notes.value.append(
                            "idle_wakeups_per_sec / _busy: the program at rest on a busy machine: \(BusyMachine().description)"
                        )
                        return try program("tiny_daemon_busy").wakeupsPerSecond
                    }
                ),
                ("log_uploader_busy", { try program("log_uploader_busy").wakeupsPerSecond }),
            ]
        case "idle_bytes_written_per_hour":
            return ["log_uploader", "tiny_daemon"].map { name in (name, { try program(name).bytesWrittenPerHour }) }
        case "start_to_ready_ms":
            return [
                "tiny_daemon", "tiny_daemon_logind", "tiny_daemon_metrics", "log_uploader",
                "log_uploader_no_system_events", "log_uploader_metrics", "swift_floor",
            ]
            .map { name in
                (name, { try program(name).startToReadyMilliseconds })
            }
        case "sigterm_to_exit_ms":
            return ["tiny_daemon", "log_uploader", "service_lifecycle_peer", "swift_floor"].map { name in
                (name, { try program(name).sigtermToExitMilliseconds })
            }
        case "footprint_rss_mb":
            notes.value.append(
                "tiny_daemon_logind: tiny-daemon with a system bus (a private dbus-daemon, python-dbusmock's logind): "
                    + "its LogindMonitor connected and holding the delay lock")
            notes.value.append(
                "_metrics: the program with --metrics-listen on loopback (Prometheus' registry bootstrapped, "
                    + "GET /metrics served from its loop), nobody scraping")
            return [
                "log_uploader", "log_uploader_no_system_events", "log_uploader_metrics", "tiny_daemon",
                "tiny_daemon_logind", "tiny_daemon_metrics", "service_lifecycle_peer", "swift_floor",
            ].map { name in
                (name, { try program(name).residentMegabytes })
            } + [
                (
                    "log_uploader_after_lines",
                    {
                        notes.value.append(
                            "footprint_rss_mb / log_uploader_after_lines: after \(s.footprintLines) lines on stdin, "
                                + "a warm state folder as at rest; _first_start: the same in an empty folder")
                        let (executable, arguments) = try programCommand("log_uploader")
                        return try ProgramFootprint.residentAfterLines(
                            executable, arguments, lines: s.footprintLines, warm: true)
                    }
                ),
                (
                    "log_uploader_after_lines_first_start",
                    {
                        let (executable, arguments) = try programCommand("log_uploader")
                        return try ProgramFootprint.residentAfterLines(
                            executable, arguments, lines: s.footprintLines, warm: false)
                    }
                ),
            ]
        case "footprint_pss_mb", "footprint_anonymous_mb":
            let pss = metric == "footprint_pss_mb"
            return [
                "log_uploader", "log_uploader_no_system_events", "tiny_daemon", "tiny_daemon_logind",
                "service_lifecycle_peer", "swift_floor",
            ].map { name in
                (name, { pss ? try program(name).proportionalMegabytes : try program(name).anonymousMegabytes })
            }
        case "footprint_threads":
            return [
                "log_uploader", "log_uploader_metrics", "tiny_daemon", "tiny_daemon_logind", "tiny_daemon_metrics",
                "service_lifecycle_peer",
            ].map { name in
                (name, { Double(try program(name).threads) })
            }
        case "footprint_shared_libraries":
            return ["log_uploader", "tiny_daemon", "tiny_daemon_logind", "service_lifecycle_peer"].map { name in
                (name, { Double(try program(name).sharedLibraries) })
            }
        case "binary_size_mb":
            return ["log-uploader", "tiny-daemon", "overtimectl"].map { product in
                (
                    product.replacingOccurrences(of: "-", with: "_"),
                    { try ProgramFootprint.strippedMegabytes(programs + "/" + product) }
                )
            }
        case "metrics_scrape_ms":
            let scrapes = s.programStarts > 1 ? 500 : 20
            let measured = Unprotected<[Bool: MetricsScrape.Figures]>([:])
            let figures = { (busy: Bool) throws -> MetricsScrape.Figures in
                if let done = measured.value[busy] { return done }
                let (executable, arguments) = try programCommand("log_uploader_metrics")
                let done = try MetricsScrape.measure(
                    executable, arguments, port: metricsPort, scrapes: scrapes, busy: busy)
                measured.value[busy] = done
                notes.value.append(
                    "metrics_scrape_ms / log_uploader_\(busy ? "busy" : "idle"): \(scrapes) scrapes 20 ms apart, "
                        + "exposition \(done.bytes) bytes"
                        + (busy ? ", while about 50,000 lines a second came in on stdin" : ", at rest"))
                return done
            }
            return [
                ("log_uploader_idle_p50", { Double(percentile(try figures(false).microseconds, 0.5)) / 1000 }),
                ("log_uploader_busy_p50", { Double(percentile(try figures(true).microseconds, 0.5)) / 1000 }),
                ("log_uploader_busy_p99", { Double(percentile(try figures(true).microseconds, 0.99)) / 1000 }),
            ]
        case "dashboard_page_p99_ms", "dashboard_live_update_ms":
            let figures = { () throws -> DashboardPages.Figures in
                if let done = dashboardFigures.value { return done }
                guard let dashboard else {
                    throw ScenarioError("no --dashboard: Benchmarks/run builds overtime-dashboard")
                }
                let (history, pending, loads, changes) =
                    switch mode {
                    case .full: (1_000_000, 100_000, 500, 50)
                    case .quick: (200_000, 100_000, 200, 20)
                    case .smoke: (200, 50, 4, 2)
                    }
                let done = try DashboardPages.measure(
                    dashboard: dashboard, history: history, pending: pending, loads: loads, changes: changes,
                    scratch: scratch)
                dashboardFigures.value = done
                notes.value.append(done.shape)
                return done
            }
            let ms = { (values: [Int64], fraction: Double) in Double(percentile(values, fraction)) / 1000 }
            if metric == "dashboard_live_update_ms" {
                return [
                    ("p50", { ms(try figures().live, 0.5) }),
                    ("p99", { ms(try figures().live, 0.99) }),
                ]
            }
            let perOrder: [(String, () throws -> Double)] = DashboardPages.sortedOrderNames.map { order in
                ("sorted_\(order)_p99", { ms(try figures().sortedByOrder[order] ?? [], 0.99) })
            }
            let kinds: [(String, () throws -> Double)] = [
                ("requests_p50", { ms(try figures().requests, 0.5) }),
                ("requests_p99", { ms(try figures().requests, 0.99) }),
                ("history_p50", { ms(try figures().history, 0.5) }),
                ("history_p99", { ms(try figures().history, 0.99) }),
                ("failed_p50", { ms(try figures().failed, 0.5) }),
                ("failed_p99", { ms(try figures().failed, 0.99) }),
                ("history_few_p50", { ms(try figures().historyFew, 0.5) }),
                ("history_few_p99", { ms(try figures().historyFew, 0.99) }),
                ("overview_p50", { ms(try figures().overview, 0.5) }),
                ("overview_p99", { ms(try figures().overview, 0.99) }),
                ("overview_changed_p50", { ms(try figures().overviewChanged, 0.5) }),
                ("overview_changed_p99", { ms(try figures().overviewChanged, 0.99) }),
                ("search_p50", { ms(try figures().search, 0.5) }),
                ("search_p99", { ms(try figures().search, 0.99) }),
                ("sorted_p50", { ms(try figures().sorted, 0.5) }),
                ("sorted_p99", { ms(try figures().sorted, 0.99) }),
            ]
            return kinds + perOrder
        case "sleep_to_release_ms":
            let cycles = max(5, min(200, s.transitions / 100))
            let measured = Unprotected<(samples: [Int64], logindDelay: Double)?>(nil)
            let figures = {
                if let done = measured.value { return done }
                let done = try SleepRelease.measure(cycles: cycles)
                measured.value = done
                notes.value.append("sleep_to_release_ms: \(cycles) sleeps, each resumed before the next")
                return done
            }
            return [
                ("overtime_p50", { Double(percentile(try figures().samples, 0.5)) / 1e6 }),
                ("overtime_p99", { Double(percentile(try figures().samples, 0.99)) / 1e6 }),
                ("logind_delay", { try figures().logindDelay }),
            ]
        case "transition_1000_observers_p99_us":
            return [
                ("overtime", { try ObserverTransition.overtime(observers: s.observers, roundTrips: s.transitions) })
            ]
        case "spool_ingest_lines_per_sec":
            notes.value.append(
                "spool_ingest_lines_per_sec / overtime_log_handler: SpoolLogWriter with its flood guard lifted "
                    + "(linesPerSecond: Int.max), distinct messages; _defaults: its default guard of 100 lines a "
                    + "second (a burst as large), meant for a program's own log, the rest counted in one line")
            let handlerRates: [(String, Int?)] = [
                ("overtime_log_handler", Int.max), ("overtime_log_handler_defaults", nil),
            ]
            return [
                ("overtime_append", { try SpoolIngest.append(lines: s.spoolLines, scratch: scratch) })
            ]
                + handlerRates.map { name, rate in
                    (
                        name,
                        {
                            let (measured, dropped) = try SpoolIngest.logHandler(
                                lines: s.spoolLines, linesPerSecond: rate, scratch: scratch)
                            if dropped > 0 {
                                notes.value.append(
                                    "spool_ingest_lines_per_sec / \(name): \(dropped) of \(s.spoolLines) "
                                        + "lines dropped by the handler's full queue (not counted)")
                            }
                            return measured
                        }
                    )
                }
        case "huge_line_ingest_mb_per_sec":
            return [
                (
                    "log_uploader",
                    {
                        let (executable, arguments) = try programCommand("log_uploader")
                        return try HugeLine.megabytesPerSecond(
                            executable, arguments, bytes: s.hugeLineBytes, scratch: scratch)
                    }
                )
            ]
        case "upload_lines_per_sec":
            var rows: [Row] = []
            if let nginx {
                rows += [
                    (
                        "overtime",
                        { try UploadThroughput.overtime(baseURL: nginx, lines: s.uploadLines, scratch: scratch) }
                    ),
                    (
                        "ceiling",
                        { try UploadThroughput.ceiling(baseURL: nginx, lines: s.uploadLines, scratch: scratch) }
                    ),
                ]
            } else {
                notes.value.append("upload_lines_per_sec to nginx not measured: no --nginx URL")
            }
            if let s3 {
                rows += [
                    (
                        "s3_overtime",
                        { try UploadThroughput.overtimeS3(store: s3, lines: s.uploadLines, scratch: scratch) }
                    ),
                    (
                        "s3_ceiling",
                        { try UploadThroughput.ceilingS3(store: s3, lines: s.uploadLines, scratch: scratch) }
                    ),
                ]
            } else {
                notes.value.append("upload_lines_per_sec to S3 not measured: no --s3 endpoint")
            }
            return rows
        case "upload_context_switches_per_segment":
            guard let nginx else {
                notes.value.append("upload_context_switches_per_segment not measured: no --nginx URL")
                return []
            }
            return [
                (
                    "overtime",
                    {
                        let measured = try UploadThroughput.contextSwitchesPerSegment(
                            baseURL: nginx, lines: s.uploadLines, scratch: scratch)
                        let threads = measured.byThread.sorted { $0.value > $1.value }
                            .map {
                                "\($0.key) \(String(format: "%.1f", Double($0.value) / Double(max(measured.segments, 1))))"
                            }
                        notes.value.append(
                            "upload_context_switches_per_segment measured over \(measured.segments) segments; "
                                + "per segment by thread: \(threads.joined(separator: ", "))")
                        return measured.perSegment
                    }
                )
            ]
        case "compressed_bytes_per_line":
            let lines = max(10_000, s.uploadLines / 10)
            notes.value.append("compressed_bytes_per_line over \(lines) corpus lines in sealed 1 MiB segments")
            return ["none", "zstd", "gzip"].map { encoding in
                (encoding, { try CompressedSize.bytesPerLine(encoding, lines: lines, scratch: scratch) })
            }
        case "scheduler_submit_per_sec":
            let z = s.scheduler
            let peerSubmits = min(z.singleSubmits, 1_000)
            notes.value.append(
                "scheduler_submit_per_sec: the peers submit \(peerSubmits) one by one (APScheduler's add_job, huey's "
                    + "schedule; neither batches), sqlite_limit the same counts as Overtime")
            return [
                ("overtime_single", { try SchedulerScenarios.submitSingle(count: z.singleSubmits, scratch: scratch) }),
                (
                    "overtime_batched",
                    { try SchedulerScenarios.submitBatched(count: z.batchedSubmits, batch: 1_000, scratch: scratch) }
                ),
                ("apscheduler_single", { try peer().figure("apscheduler", "submit", [peerSubmits]) }),
                ("huey_single", { try peer().figure("huey", "submit", [peerSubmits]) }),
                ("sqlite_limit_single", { try peer().limit("submit", z.singleSubmits) }),
                ("sqlite_limit_batched", { try peer().limit("batched", z.batchedSubmits) }),
            ]
        case "scheduler_runs_per_sec":
            let z = s.scheduler
            let peerRuns = min(z.runs, 20_000)
            notes.value.append(
                "scheduler_runs_per_sec measured with \(z.runs) requests due at once, at most 1,000 running at once; "
                    + "the peers with \(peerRuns) (APScheduler on 20 threads, huey on 8), sqlite_limit with \(z.runs)")
            return [
                ("overtime", { try SchedulerScenarios.runs(count: z.runs, concurrent: 1_000, scratch: scratch) }),
                ("apscheduler", { try peer().figure("apscheduler", "runs", [peerRuns]) }),
                ("huey", { try peer().figure("huey", "runs", [peerRuns]) }),
                ("sqlite_limit", { try peer().limit("runs", z.runs) }),
            ]
        case "scheduler_bulk_retry_ms":
            let (succeeded, failed) =
                switch mode {
                case .full: (100_000, 1_000)
                case .quick: (20_000, 200)
                case .smoke: (200, 20)
                }
            let measured = Unprotected<(byTag: Double, byPrefix: Double)?>(nil)
            let figures = {
                if let done = measured.value { return done }
                let done = try BulkRetry.measure(succeeded: succeeded, failed: failed, scratch: scratch)
                measured.value = done
                notes.value.append(
                    "scheduler_bulk_retry_ms: \(succeeded) one-shots that succeeded and \(failed) that failed for good "
                        + "(tagged, one attempt each), in the history; retry-failed on the control socket, the median of "
                        + "\(BulkRetry.retries) by tag, then of \(BulkRetry.retries) by prefix")
                return done
            }
            return [("overtime_by_tag", { try figures().byTag }), ("overtime_by_prefix", { try figures().byPrefix })]
        case "scheduler_context_switches_per_run":
            let count = min(2_000, s.scheduler.runs)
            return [
                (
                    "overtime",
                    {
                        let (perRun, byThread) = try SchedulerScenarios.contextSwitchesPerRun(
                            count: count, scratch: scratch)
                        let threads = byThread.sorted { $0.value > $1.value }
                            .map { "\($0.key) \(String(format: "%.1f", Double($0.value) / Double(count)))" }
                        notes.value.append(
                            "scheduler_context_switches_per_run measured over \(count) one-shots run one at a time; "
                                + "per run by thread: \(threads.joined(separator: ", "))")
                        return perRun
                    }
                )
            ]
        case "scheduler_lateness_p99_us":
            let z = s.scheduler
            let (peerPending, peerDue) = (min(z.latencyPending, 2_000), min(z.latencyDue, 500))
            notes.value.append(
                "scheduler_lateness_p99_us measured with \(z.latencyPending) pending, \(z.latencyDue) due over 5 s; "
                    + "the peers with \(peerPending) pending and \(peerDue) due (their single submits make more take minutes)"
            )
            return [
                (
                    "overtime",
                    {
                        try SchedulerScenarios.lateness(
                            pending: z.latencyPending, due: z.latencyDue, spread: 5, scratch: scratch)
                    }
                ),
                (
                    "apscheduler",
                    { try peer().figure("apscheduler", "lateness", [peerPending, peerDue, 5], samplesOf: metric) }
                ),
                ("huey", { try peer().figure("huey", "lateness", [peerPending, peerDue, 5], samplesOf: metric) }),
            ]
        case "scheduler_idle_wakeups_per_sec":
            return [
                (
                    "overtime",
                    {
                        try IdleWakeups.measureChild(
                            executable: Self.selfPath, implementation: "scheduler", grants: s.scheduler.idleRequests,
                            seconds: s.idleSeconds)
                    }
                ),
                (
                    "apscheduler",
                    {
                        try peer().idleWakeups(
                            "apscheduler", pending: min(s.scheduler.idleRequests, 2_000), seconds: s.idleSeconds)
                    }
                ),
                (
                    "huey",
                    {
                        try peer().idleWakeups(
                            "huey", pending: min(s.scheduler.idleRequests, 2_000), seconds: s.idleSeconds)
                    }
                ),
            ]
        case "scheduler_resident_mb":
            let peerPending = min(s.scheduler.memoryPending, 2_000)
            notes.value.append(
                "scheduler_resident_mb measured with \(s.scheduler.memoryPending) pending; the peers with \(peerPending) "
                    + "(both keep their jobs in SQLite, not in memory; their submits make a million take hours)")
            return [
                (
                    "overtime",
                    { try SchedulerScenarios.residentMegabytes(count: s.scheduler.memoryPending, scratch: scratch) }
                ),
                ("apscheduler", { try peer().figure("apscheduler", "resident", [peerPending]) }),
                ("huey", { try peer().figure("huey", "resident", [peerPending]) }),
            ]
        case "fleet_runs_per_sec":
            let runs = mode.fleetPeerRuns
            notes.value.append(
                "fleet_runs_per_sec: the peers run \(runs) one-shots on 4 worker processes (APScheduler on 1: "
                    + "its job store takes one scheduler), 32 at once each, at their defaults otherwise")
            return [
                ("overtime", { try fleetFigure(metric) }),
                ("pgbench_limit", { try fleetFigure("fleet_runs_per_sec_limit") }),
                ("pgbench_limit_batched", { try fleetFigure("fleet_runs_per_sec_limit_batched") }),
            ] + fleetPeers.map { name in (name, { try fleetPeerRate(name) }) }
        case "fleet_claim_latency_p99_ms":
            let (due, spread) = mode.fleetPeerLatency
            notes.value.append(
                "fleet_claim_latency_p99_ms: the peers with \(due) one-shots due over \(Int(spread)) s on 4 workers "
                    + "(the same rate as Overtime's), due time → handler start on the one clock of this machine")
            return [("overtime", { try fleetFigure(metric) })]
                + fleetPeers.map { name in
                    (name, { try peer().fleetFigure(name, "latency", [Double(due), spread, 4], samplesOf: metric) })
                }
        case "fleet_idle_wakeups_per_sec":
            return [("overtime", { try fleetFigure(metric) })]
                + fleetPeers.map { name in
                    (name, { try peer().fleetFigure(name, "idle", [4, s.idleSeconds]) })
                }
        case "fleet_runs_per_sec_at_defaults":
            // The peers at their defaults, as in fleet_runs_per_sec (measured once for both).
            return [("overtime", { try fleetFigure(metric) })]
                + fleetPeers.map { name in (name, { try fleetPeerRate(name) }) }
        case "fleet_status_p99_ms_database_stopped":
            return [("overtime", { try fleetFigure(metric) })]
        case "dashboard_fleet_page_p99_ms":
            let parts =
                [
                    "requests_p50", "requests_p99", "history_p50", "history_p99", "failed_p50", "failed_p99",
                    "history_few_p50", "history_few_p99", "overview_p50", "overview_p99", "overview_changed_p50",
                    "overview_changed_p99", "search_p50", "search_p99", "sorted_p50", "sorted_p99",
                ] + DashboardPages.sortedOrderNames.map { "sorted_\($0)_p99" }
            return parts.map { part in (part, { try fleetFigure("dashboard_fleet_" + part) }) }
        case "dashboard_fleet_live_update_ms":
            return ["p50", "p99"].map { part in (part, { try fleetFigure("dashboard_fleet_live_" + part) }) }
        default:
            return []
        }
    }

    /// A fleet peer's one-shots per second on 4 workers, 32 at once each and its defaults
    /// otherwise: measured at its first asking, then the same figure.
    func fleetPeerRate(_ name: String) throws -> Double {
        if let rate = fleetPeerRates.value[name] { return rate }
        let rate = try peer().fleetFigure(name, "runs", [Double(mode.fleetPeerRuns), 4])
        fleetPeerRates.value[name] = rate
        return rate
    }

    /// One of the fleet rows: `overtime-fleet-bench` (built beside this runner) run once on
    /// the PostgreSQL database the `PG*` variables name, for all three.
    func fleetFigure(_ metric: String) throws -> Double {
        if fleetFigures.value == nil {
            guard ProcessInfo.processInfo.environment["PGPORT"] != nil else {
                throw ScenarioError(
                    "no PostgreSQL database: PGHOST, PGPORT and PGUSER name one (Benchmarks/run starts it)")
            }
            let program = URL(fileURLWithPath: Self.selfPath).deletingLastPathComponent()
                .appendingPathComponent("overtime-fleet-bench").path
            let process = Process()
            process.executableURL = URL(fileURLWithPath: program)
            process.arguments = ["--mode", mode.rawValue] + (dashboard.map { ["--dashboard", $0] } ?? [])
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            let data = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            guard process.terminationStatus == 0,
                let printed = try JSONSerialization.jsonObject(with: data) as? [String: Any]
            else {
                throw ScenarioError("overtime-fleet-bench: exit \(process.terminationStatus)")
            }
            if let samples = printed["claim_latency_samples_ms"] as? [Double] {
                Distributions.record("fleet_claim_latency_p99_ms", "overtime", samples)
            }
            let figures = printed.compactMapValues { $0 as? Double }
            fleetFigures.value = figures
            notes.value.append(
                "fleet rows: \(Int(figures["runs_at_once"] ?? 0)) one-shots at once, "
                    + "\(Int(figures["runs_spread"] ?? 0)) spread for the latency")
            if let pending = figures["dashboard_fleet_pending"] {
                notes.value.append(
                    "dashboard_fleet_page_p99_ms: overtime-dashboard --store postgres://… beside the fleet's database: "
                        + "\(Int(pending)) requests pending (submitted by an instance), \(Int(figures["dashboard_fleet_history"] ?? 0)) "
                        + "attempts in the history (inserted by SQL, every tenth failed); \(Int(figures["dashboard_fleet_loads"] ?? 0)) "
                        + "loads of each kind (first, deep, by prefix, filtered), each a new connection; "
                        + "dashboard_fleet_live_update_ms: a submit by an instance → the change event (NOTIFY; the feed looks every 200 ms)"
                )
            }
            if let samples = figures["status_samples"] {
                notes.value.append(
                    "fleet_status_p99_ms_database_stopped: \(Int(samples)) statuses, the longest "
                        + "\(String(format: "%.1f", figures["status_max_ms"] ?? 0)) ms; the held run's handler "
                        + "began \(Int(figures["status_resubmitted"] ?? 0)) submits through the async API meanwhile; "
                        + "the worker " + (figures["worker_lived"] == 1 ? "lived" : "DID NOT LIVE")
                        + " (watchdog limit 2 s)")
            }
        }
        guard let value = fleetFigures.value?[metric] else { throw ScenarioError("no \(metric) from the fleet run") }
        return value
    }

    /// The fleet rows' peers this run measures: Oban only where the peers' Python has it
    /// (it needs Python 3.12; said in the notes when left out).
    var fleetPeers: [String] {
        guard let peers else { return ["procrastinate", "pgqueuer", "oban", "apscheduler"] }
        if let missing = peers.missing("oban") {
            if !notes.value.contains(where: { $0.hasPrefix("fleet rows: Oban left out") }) {
                notes.value.append("fleet rows: Oban left out: \(missing)")
            }
            return ["procrastinate", "pgqueuer", "apscheduler"]
        }
        return ["procrastinate", "pgqueuer", "oban", "apscheduler"]
    }

    /// The peers, or why they cannot be measured.
    func peer() throws -> SchedulerPeers {
        guard let peers else {
            throw ScenarioError("no --peer-python: Benchmarks/run makes the peers' Python environment")
        }
        return peers
    }

    /// This runner's own executable (children of it measure one implementation alone).
    static var selfPath: String { ProcessInfo.processInfo.arguments[0] }

    /// How each program is started: the shipped programs from their static builds, the
    /// peer from this package's build.
    func programCommand(_ name: String) throws -> (String, [String]) {
        let command: (String, [String]) =
            switch name {
            case "tiny_daemon": (programs + "/tiny-daemon", [])
            case "tiny_daemon_logind":
                (
                    "/usr/bin/env",
                    ["DBUS_SYSTEM_BUS_ADDRESS=" + (try PrivateSystemBus.shared().address), programs + "/tiny-daemon"]
                )
            case "log_uploader": (programs + "/log-uploader", ["--spool", "@D/spool", "--sink", "@D/collected"])
            case "log_uploader_no_system_events":
                (
                    programs + "/log-uploader",
                    ["--spool", "@D/spool", "--sink", "@D/collected", "--no-system-events"]
                )
            case "log_uploader_metrics":
                (
                    programs + "/log-uploader",
                    [
                        "--spool", "@D/spool", "--sink", "@D/collected", "--metrics-listen", "127.0.0.1:\(metricsPort)",
                    ]
                )
            case "tiny_daemon_metrics": (programs + "/tiny-daemon", ["--metrics-listen", "127.0.0.1:\(metricsPort)"])
            case "swift_floor": (floor, [])
            case "service_lifecycle_peer":
                (URL(fileURLWithPath: Self.selfPath).deletingLastPathComponent().path + "/service-lifecycle-peer", [])
            default: throw ScenarioError("unknown program \(name)")
            }
        guard FileManager.default.isExecutableFile(atPath: command.0) else {
            throw ScenarioError("\(command.0) is not built (Benchmarks/run builds it)")
        }
        return command
    }

    /// The figures of `name`, measured on first use; `<program>_busy`: the program on a
    /// busy machine (``BusyMachine``).
    func program(_ name: String) throws -> ProgramFigures {
        if let measured = figures.value[name] { return measured }
        let busy = name.hasSuffix("_busy")
        let (executable, arguments) = try programCommand(busy ? String(name.dropLast(5)) : name)
        let measured = try ProgramFootprint.measure(
            executable, arguments, starts: sizes.programStarts, restSeconds: sizes.programRestSeconds,
            load: busy ? BusyMachine() : nil)
        figures.value[name] = measured
        if !measured.wakeupsByThread.isEmpty {
            let threads = measured.wakeupsByThread.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
            notes.value.append(
                "\(name) at rest, wake-ups in \(sizes.programRestSeconds) s by thread: \(threads.joined(separator: ", "))"
            )
        }
        return measured
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
