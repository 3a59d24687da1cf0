/// The metrics `latest.json` holds, in report order, with the targets the issue sets.
/// Names are a contract: add new ones, never rename.
struct MetricSpec: Sendable {
    let name: String
    let unit: String
    let higherIsBetter: Bool
    /// What it measures, for the table.
    let what: String
    /// The target, for the table, and the check of the measured values against it.
    let target: String
    let meetsTarget: @Sendable ([String: Double]) -> Bool?

    /// A row reported beside others, with no target of its own.
    static func context(name: String, unit: String, what: String, target: String) -> MetricSpec {
        MetricSpec(name: name, unit: unit, higherIsBetter: false, what: what, target: target) { _ in nil }
    }

    /// The fleet rows' peers (`Peers/fleet_peer.py`).
    static let fleetPeers = ["procrastinate", "pgqueuer", "oban", "apscheduler"]

    static let all: [MetricSpec] = [
        MetricSpec(
            name: "grant_begin_end_pairs_per_sec", unit: "pairs/s", higherIsBetter: true,
            what: "1,000,000 open, then begin+end pairs on one thread",
            target: "≥ 10,000,000 and ≥ 4× libuv_timer"
        ) { values in
            guard let overtime = values["overtime"], let libuv = values["libuv_timer"] else { return nil }
            return overtime >= 10_000_000 && overtime >= 4 * libuv
        },
        MetricSpec(
            name: "grant_pair_instructions", unit: "instructions/pair", higherIsBetter: false,
            what: "instructions per begin+end pair, every thread, 10,000 open (callgrind; not moved by neighbours)",
            target: "≤ ¼ of libuv_timer"
        ) { values in
            guard let overtime = values["overtime"], let libuv = values["libuv_timer"] else { return nil }
            return overtime <= libuv / 4
        },
        MetricSpec(
            name: "grant_begin_end_cross_thread_pairs_per_sec", unit: "pairs/s", higherIsBetter: true,
            what: "two threads off the loop, 1,000,000 open", target: "≥ 2,000,000"
        ) { values in values["overtime"].map { $0 >= 2_000_000 } },
        MetricSpec(
            name: "expiration_lateness_p99_us", unit: "µs", higherIsBetter: false,
            what: "100,000 deadlines over 10 s, real clock", target: "≤ 1,000 and no worse than either peer"
        ) { values in
            guard let overtime = values["overtime"] else { return nil }
            let peers = [values["nio_scheduled"], values["dispatch_after"]].compactMap { $0 }
            return overtime <= 1_000 && peers.allSatisfy { overtime <= $0 }
        },
        .context(
            name: "expiration_lateness_p50_us", unit: "µs", what: "the same run's median",
            target: "(context for the p99)"),
        .context(
            name: "expiration_lateness_p999_us", unit: "µs", what: "the same run's 99.9th percentile",
            target: "(context for the p99)"),
        .context(
            name: "expiration_lateness_max_us", unit: "µs", what: "the same run's latest handler",
            target: "(context for the p99)"),
        .context(
            name: "expiration_lateness_steal_percent", unit: "%",
            what: "the machine's steal time during each implementation's run (/proc/stat): a VM's tail",
            target: "(context for the p99)"),
        MetricSpec(
            name: "bytes_per_open_grant", unit: "bytes", higherIsBetter: false,
            what: "resident growth / 1,000,000 open", target: "≤ 128"
        ) { values in values["overtime"].map { $0 <= 128 } },
        MetricSpec(
            name: "idle_wakeups_per_sec", unit: "wake-ups/s", higherIsBetter: false,
            what: "every thread of a process at rest (from 3 s after READY=1): the runtime with 10,000 open in the "
                + "foreground (nothing due), the shipped programs with their defaults (watched 95 s: three of "
                + "log-uploader's 30 s upload intervals), and the ServiceGroup peer; _busy: the same on a busy "
                + "machine (every core spinning, another process of the cgroup closing a PSI trigger every 2 s)",
            target: "0 (overtime, log_uploader, tiny_daemon_busy)"
        ) { values in
            guard let overtime = values["overtime"], let uploader = values["log_uploader"] else { return nil }
            return overtime == 0 && uploader == 0 && values["tiny_daemon_busy"].map { $0 == 0 } != false
        },
        MetricSpec(
            name: "idle_bytes_written_per_hour", unit: "bytes/h", higherIsBetter: false,
            what: "the shipped programs with their defaults at rest (from 3 s after READY=1, over 95 s): write_bytes "
                + "of /proc/PID/io, every thread, scaled to an hour",
            target: "0"
        ) { values in
            guard let uploader = values["log_uploader"], let tiny = values["tiny_daemon"] else { return nil }
            return uploader == 0 && tiny == 0
        },
        MetricSpec(
            name: "transition_1000_observers_p99_us", unit: "µs", higherIsBetter: false,
            what: "background→foreground round trip, 1,000 observers", target: "≤ 100"
        ) { values in values["overtime"].map { $0 <= 100 } },
        MetricSpec(
            name: "spool_ingest_lines_per_sec", unit: "lines/s", higherIsBetter: true,
            what: "200-byte lines, fdatasync per group commit", target: "≥ 1,500,000 (overtime_append)"
        ) { values in values["overtime_append"].map { $0 >= 1_500_000 } },
        MetricSpec(
            name: "huge_line_ingest_mb_per_sec", unit: "MB/s", higherIsBetter: true,
            what:
                "a 20 MiB line without a newline, then a short line, into log-uploader's standard input: from the"
                + " first byte to the process's exit (the line cut to 1 MiB, the next one whole)",
            target: "≥ 50 (linear in the line's length)"
        ) { values in values["log_uploader"].map { $0 >= 50 } },
        MetricSpec(
            name: "upload_lines_per_sec", unit: "lines/s", higherIsBetter: true,
            what: "HTTP PUT to a local nginx; S3 PUT (SigV4, If-None-Match, CRC-32C) to a local SeaweedFS",
            target: "≥ 90 % of ceiling (each)"
        ) { values in
            let pairs = [("overtime", "ceiling"), ("s3_overtime", "s3_ceiling")].compactMap { pair in
                values[pair.0].flatMap { overtime in values[pair.1].map { (overtime, $0) } }
            }
            return pairs.isEmpty ? nil : pairs.allSatisfy { $0.0 >= 0.9 * $0.1 }
        },
        .context(
            name: "upload_context_switches_per_segment", unit: "switches/segment",
            what:
                "one drain to nginx as upload_lines_per_sec's, at the uploader's defaults: every thread's context"
                + " switches per 1 MiB segment (threads in notes)",
            target: "reported"),
        .context(
            name: "compressed_bytes_per_line", unit: "bytes/line",
            what: "a device's mixed log lines as sinks send them: none, zstd, gzip", target: "reported"),
        MetricSpec(
            name: "scheduler_submit_per_sec", unit: "requests/s", higherIsBetter: true,
            what:
                "durable submits to SQLite, on disk when each returns; the peers one by one (neither batches); "
                + "sqlite_limit: inserts alone, one and 1,000 a transaction",
            target: "≥ 2,000 single, ≥ 100,000 batched"
        ) { values in
            guard let single = values["overtime_single"], let batched = values["overtime_batched"] else { return nil }
            return single >= 2_000 && batched >= 100_000
        },
        MetricSpec(
            name: "scheduler_runs_per_sec", unit: "runs/s", higherIsBetter: true,
            what:
                "one-shots due at once, each a grant, start+end durable (size in results); APScheduler and huey on "
                + "SQLite, durable; sqlite_limit: the same writes by a minimal C program",
            target: "≥ 100,000 (at 1,000,000 due), ≥ 10× the best peer, ≥ 50 % of sqlite_limit"
        ) { values in
            guard let overtime = values["overtime"] else { return nil }
            let peers = ["apscheduler", "huey"].compactMap { values[$0] }
            return overtime >= 100_000 && overtime >= 10 * (peers.max() ?? 0)
                && overtime >= 0.5 * (values["sqlite_limit"] ?? 0)
        },
        .context(
            name: "scheduler_context_switches_per_run", unit: "switches/run",
            what: "one-shots run one at a time: every thread's context switches per run (threads in notes)",
            target: "reported"),
        MetricSpec(
            name: "scheduler_lateness_p99_us", unit: "µs", higherIsBetter: false,
            what: "run start after earliest begin, real clock, many pending; the peers the same",
            target: "≤ 2,000 (at 100,000 pending), ≤ the best peer's"
        ) { values in
            guard let overtime = values["overtime"] else { return nil }
            let peers = ["apscheduler", "huey"].compactMap { values[$0] }
            return overtime <= 2_000 && overtime <= (peers.min() ?? .infinity)
        },
        MetricSpec(
            name: "scheduler_idle_wakeups_per_sec", unit: "wake-ups/s", higherIsBetter: false,
            what:
                "10,000 requests due in an hour, every thread of the process (a child of its own); the peers with "
                + "2,000, running",
            target: "0"
        ) { values in values["overtime"].map { $0 == 0 } },
        MetricSpec(
            name: "scheduler_bulk_retry_ms", unit: "ms", higherIsBetter: false,
            what:
                "retry-failed on the daemon's control socket (as the dashboard's \"retry all\" and overtimectl ask it) "
                + "→ its answer, every request that failed for good submitted again, by tag and by prefix, beside "
                + "100,000 finished requests that succeeded (sizes in the notes)",
            target: "(none set: how long an operator waits)"
        ) { _ in nil },
        MetricSpec(
            name: "scheduler_resident_mb", unit: "MB", higherIsBetter: false,
            what: "resident growth with requests pending (sizes in the notes)", target: "≤ 100 (at 1,000,000 pending)"
        ) { values in values["overtime"].map { $0 <= 100 } },
        MetricSpec(
            name: "fleet_runs_per_sec", unit: "runs/s", higherIsBetter: true,
            what:
                "4 worker processes on one PostgreSQL schedule, one-shots due at once (size in results); "
                + "pgbench_limit: as many claimed and completed by pgbench, one per transaction, 4 clients; "
                + "_batched: 256 claimed in one transaction and completed in the next, as a tuned worker's cycle "
                + "at its fullest; procrastinate, PgQueuer, Oban and APScheduler on the same server (sizes in the notes)",
            target: "≥ 5,000, ≥ 10× the best peer, ≥ 50 % of pgbench_limit_batched"
        ) { values in
            guard let overtime = values["overtime"] else { return nil }
            let peers = Self.fleetPeers.compactMap { values[$0] }
            return overtime >= 5_000 && overtime >= 10 * (peers.max() ?? 0)
                && overtime >= 0.5 * (values["pgbench_limit_batched"] ?? 0)
        },
        MetricSpec(
            name: "fleet_runs_per_sec_at_defaults", unit: "runs/s", higherIsBetter: true,
            what:
                "fleet_runs_per_sec on workers at SchedulerConfiguration's defaults on PostgreSQL (32 runs at once"
                + " each, 0.5 s start spacing for a backlog); the peers as in fleet_runs_per_sec (the same figures),"
                + " at their defaults",
            target: "≥ the best peer's"
        ) { values in
            guard let overtime = values["overtime"] else { return nil }
            return overtime >= (Self.fleetPeers.compactMap { values[$0] }.max() ?? 0)
        },
        MetricSpec(
            name: "fleet_claim_latency_p99_ms", unit: "ms", higherIsBetter: false,
            what:
                "4 workers, one-shots due over seconds: due time (the database's clock) → handler start; the "
                + "peers the same (distributions in the chart)",
            target: "≤ 20, ≤ the best peer's"
        ) { values in
            guard let overtime = values["overtime"] else { return nil }
            return overtime <= 20 && overtime <= (Self.fleetPeers.compactMap { values[$0] }.min() ?? .infinity)
        },
        MetricSpec(
            name: "fleet_idle_wakeups_per_sec", unit: "wake-ups/s", higherIsBetter: false,
            what: "4 workers at rest (nothing due), every thread, the busiest worker; the peers the same",
            target: "0"
        ) { values in values["overtime"].map { $0 == 0 } },
        MetricSpec(
            name: "fleet_status_p99_ms_database_stopped", unit: "ms", higherIsBetter: false,
            what:
                "a worker holding a run whose handler resubmits through the async API every 100 ms, PostgreSQL"
                + " stopped (SIGSTOP), in the background and asked for its schedule: its `status` over the"
                + " control socket, asked every 50 ms past the store's timeout",
            target: "≤ 100"
        ) { values in values["overtime"].map { $0 <= 100 } },
        MetricSpec(
            name: "start_to_ready_ms", unit: "ms", higherIsBetter: false,
            what:
                "exec → READY=1 on a notify socket, static release build, warm state folder (median); swift_floor: "
                + "the smallest static Swift program that says READY=1",
            target: "≤ 3 (tiny_daemon), ≤ 5 (log_uploader)"
        ) { values in
            guard let tiny = values["tiny_daemon"], let uploader = values["log_uploader"] else { return nil }
            return tiny <= 3 && uploader <= 5
        },
        MetricSpec(
            name: "sigterm_to_exit_ms", unit: "ms", higherIsBetter: false,
            what: "SIGTERM → exit at rest (median); log_uploader ships its own stop's log line first",
            target: "≤ 2 and below service_lifecycle_peer (tiny_daemon)"
        ) { values in
            guard let tiny = values["tiny_daemon"], let peer = values["service_lifecycle_peer"] else { return nil }
            return tiny <= 2 && tiny < peer
        },
        MetricSpec(
            name: "footprint_rss_mb", unit: "MB", higherIsBetter: false,
            what:
                "resident memory at rest (3 s after READY=1, a warm state folder), and log_uploader after lines on stdin "
                + "(warm; _first_start: an empty folder)",
            target: "≤ 12 (log_uploader, both); tiny_daemon_logind ≤ tiny_daemon + 1"
        ) { values in
            guard let idle = values["log_uploader"], let fed = values["log_uploader_after_lines"] else { return nil }
            let logind = values["tiny_daemon_logind"].flatMap { on in values["tiny_daemon"].map { on <= $0 + 1 } }
            return idle <= 12 && fed <= 12 && logind != false
        },
        MetricSpec(
            name: "sleep_to_release_ms", unit: "ms", higherIsBetter: false,
            what:
                "logind's PrepareForSleep(true) → the delay lock let go, nothing running (LogindMonitor's own "
                + "measure: the signal read on the loop → the descriptor closed; python-dbusmock's logind on a private "
                + "bus); p50 and p99 of the cycles; logind_delay: the time logind allows (InhibitDelayMaxSec)",
            target: "≤ 5 (p99)"
        ) { values in values["overtime_p99"].map { $0 <= 5 } },
        MetricSpec(
            name: "metrics_scrape_ms", unit: "ms", higherIsBetter: false,
            what:
                "GET /metrics of log-uploader --metrics-listen, connect → the whole exposition read, from another "
                + "process: at rest (p50), and while it spools a steady stream of lines (p50, p99)",
            target: "≤ 5 (busy, p99)"
        ) { values in values["log_uploader_busy_p99"].map { $0 <= 5 } },
        MetricSpec(
            name: "dashboard_page_p99_ms", unit: "ms", higherIsBetter: false,
            what:
                "overtime-dashboard beside a SQLite schedule of 100,000 requests, pending, that ran 10 times each "
                + "(1,000,000 attempts; the last round daily, so each has a last run): "
                + "a page loaded over a new connection (first, deep, by prefix, filtered; the history also last, "
                + "newer, a prefix's last), p50 and p99 of the "
                + "requests pages, of the history pages, of the failed pages, and of history pages whose filter "
                + "matches none of the attempts (history_few: result=superseded, a day before any start), and of "
                + "the overview (counts by state and handler, the last hour's attempts by minute: counted once "
                + "per change of the schedule for every viewer), and of the overview just after a change "
                + "(overview_changed: counted again), and of pages "
                + "searched for text nothing holds (search: the requests of every state, the history), and of "
                + "the pending requests sorted by next run, attempt and last run (sorted: each read in an "
                + "index; and the p99 of each order); "
                + "meanwhile two clients load the slowest of them (the day before any start) over and over",
            target: "≤ 50 (p99, each)"
        ) { values in Self.dashboardPagesMet(values) },
        MetricSpec(
            name: "dashboard_live_update_ms", unit: "ms", higherIsBetter: false,
            what: "a submit committed by the daemon → the change event on a page's open event stream",
            target: "≤ 1000 (p99)"
        ) { values in values["p99"].map { $0 <= 1000 } },
        MetricSpec(
            name: "dashboard_fleet_page_p99_ms", unit: "ms", higherIsBetter: false,
            what:
                "overtime-dashboard beside a fleet's PostgreSQL schedule of 100,000 requests pending and 1,000,000 "
                + "attempts: the pages of dashboard_page_p99_ms (two clients looping on the slowest meanwhile), p50 and p99",
            target: "≤ 50 (p99, each)"
        ) { values in Self.dashboardPagesMet(values) },
        MetricSpec(
            name: "dashboard_fleet_live_update_ms", unit: "ms", higherIsBetter: false,
            what: "a submit by a fleet's instance → the change event on a page's open event stream",
            target: "≤ 1000 (p99)"
        ) { values in values["p99"].map { $0 <= 1000 } },
        MetricSpec(
            name: "footprint_pss_mb", unit: "MB", higherIsBetter: false,
            what: "proportional set size at rest (Pss of /proc/PID/smaps_rollup: a shared library's pages by share)",
            target: "(context for footprint_rss_mb)"
        ) { _ in nil },
        MetricSpec(
            name: "footprint_anonymous_mb", unit: "MB", higherIsBetter: false,
            what:
                "anonymous memory at rest (Anonymous of /proc/PID/smaps_rollup: the process's own, nothing a file backs)",
            target: "tiny_daemon_logind ≤ tiny_daemon + 0.25"
        ) { values in
            guard let on = values["tiny_daemon_logind"], let off = values["tiny_daemon"] else { return nil }
            return on <= off + 0.25
        },
        .context(name: "footprint_threads", unit: "threads", what: "threads at rest", target: "(context)"),
        .context(
            name: "footprint_shared_libraries", unit: "libraries", what: "shared libraries mapped at rest",
            target: "(context)"),
        .context(
            name: "binary_size_mb", unit: "MB", what: "stripped, the Swift runtime linked statically",
            target: "(context)"),
    ]

    /// The dashboard rows' target: every kind of page within 50 ms at p99 (unknown while a
    /// kind was not measured).
    static func dashboardPagesMet(_ values: [String: Double]) -> Bool? {
        let kinds = [
            "requests_p99", "history_p99", "failed_p99", "history_few_p99", "overview_p99", "overview_changed_p99",
            "search_p99", "sorted_p99",
        ]
        let p99s = kinds.compactMap { values[$0] }
        guard p99s.count == kinds.count else { return nil }
        return p99s.allSatisfy { $0 <= 50 }
    }
}
