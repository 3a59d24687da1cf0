// Every metric Overtime's modules record, with the help line Prometheus shows and the
// buckets of its histograms: swift-metrics carries neither.

/// What Overtime knows of its own metrics: each family's help text and, for histograms,
/// buckets that suit what it measures (a lateness of hours, a handler of milliseconds).
enum MetricCatalog {
    /// Help text by family name.
    static let help: [String: String] = [
        // Grants and the lifecycle (Overtime).
        "overtime_background_tasks_begun_total": "Grants of background time begun.",
        "overtime_background_tasks_ended_total":
            "Grants ended, by reason: completed (ended by the program), expired (ended after expiring), terminated (never ended; the runtime terminated them).",
        "overtime_background_tasks_expired_total": "Grants whose expiration handler was asked to run.",
        "overtime_background_tasks_refused_total":
            "Begins refused, by reason (no time left, terminating, too many open).",
        "overtime_misuse_total": "Program mistakes the runtime absorbed (ending a grant twice, dropping one), by kind.",
        "overtime_control_errors_total": "Control-socket errors, by kind.",
        "overtime_memory_warnings_total": "Memory warnings delivered to the program.",
        "overtime_system_bus_ignored_signals_total":
            "System-bus signals not acted on: not sent by the owner of the bus name they claimed to come from (claimed_sender).",
        "overtime_background_duration_seconds": "Time spent out of the foreground per stay.",
        "overtime_handler_duration_seconds": "Time the program's handlers took on the loop, by handler.",
        // The spool, ingest and uploader (OvertimeLogUploader).
        "overtime_spool_appended_lines_total": "Lines stored durably in the spool.",
        "overtime_spool_dropped_lines_total": "Lines the spool dropped (its quota full, dropping the oldest).",
        "overtime_spool_write_errors_total": "Spool writes that failed (a full or failing disk).",
        "overtime_spool_quota_rejections_total": "Appends refused because the spool's quota was full.",
        "overtime_spool_segments_sealed_total": "Spool segments sealed for upload.",
        "overtime_spool_dead_lettered_segments_total": "Segments set aside after a sink rejected them for good.",
        "overtime_spool_redriven_segments_total": "Dead-lettered segments put back for upload.",
        "overtime_spool_handler_dropped_lines_total": "Log lines the swift-log handler dropped (its buffer full).",
        "overtime_spool_pending_bytes": "Bytes in the spool not yet acknowledged by the sink.",
        "overtime_spool_pending_segments": "Segments in the spool not yet acknowledged by the sink.",
        "overtime_spool_pending_lines": "Lines in the spool not yet acknowledged by the sink.",
        "overtime_spool_oldest_pending_timestamp_seconds":
            "When the oldest line not yet acknowledged was spooled, in seconds since the epoch; 0 when none waits.",
        "overtime_ingest_rejected_lines_total": "Ingested lines rejected (not text, or the spool refused them).",
        "overtime_ingest_truncated_lines_total": "Ingested lines cut at the longest line kept.",
        "overtime_uploader_segments_total": "Segments the uploader finished, by sink and result (stored, dead_letter).",
        "overtime_uploader_failed_attempts_total":
            "Upload attempts that failed (to be retried or dead-lettered), by sink.",
        "overtime_uploader_upload_duration_seconds": "Time one upload attempt of a segment took, by sink.",
        "overtime_uploader_lines_total": "Lines in segments a sink stored, by sink.",
        "overtime_uploader_stored_bytes_total":
            "Bytes of segments a sink stored, as spooled (before compression), by sink.",
        "overtime_uploader_compression_input_bytes_total": "Bytes handed to compression for upload, by encoding.",
        "overtime_uploader_compressed_bytes_total": "Bytes compression made of them, as sent, by encoding.",
        // The scheduler (OvertimeScheduler).
        "overtime_scheduler_runs_total": "Scheduled runs ended, by handler and result.",
        "overtime_scheduler_lateness_seconds": "How long after its due time a run started, by handler.",
        "overtime_scheduler_misuse_total": "Program mistakes the scheduler absorbed, by kind.",
        "overtime_scheduler_superseded_total": "Runs stopped because their request was replaced, by handler.",
        "overtime_scheduler_run_progress_ratio": "The last progress a run reported, from 0 to 1, by handler.",
        "overtime_scheduler_requests": "Requests not finished, by state (enqueued, blocked, running).",
        "overtime_scheduler_failed_for_good_total": "Runs that failed with no retry left, by handler.",
        // Fleets (OvertimePostgres).
        "overtime_fleet_held_runs": "Runs this instance holds a claim on, by instance.",
        "overtime_fleet_reclaimed_runs_total":
            "Runs this instance took over from an instance that stopped renewing, by instance.",
        "overtime_fleet_lost_claims_total":
            "Claims this instance lost to another (it stopped renewing in time), by instance.",
        "overtime_fleet_database_round_trip_seconds": "Time one statement took to PostgreSQL and back, by instance.",
        "overtime_fleet_listen_connected":
            "1 while the connection that hears other instances' notifications is up, by instance.",
        // The endpoint itself.
        "overtime_metrics_http_errors_total":
            "Requests to the metrics endpoint answered with an error or cut off, by kind (head_deadline and idle_evicted: connections that sent no request in time, or gave their place to a newcomer).",
    ]

    /// Buckets of the duration histograms that do not suit Prometheus' defaults (5 ms to 10 s).
    static let durationBuckets: [String: [Duration]] = [
        "overtime_scheduler_lateness_seconds": [
            .milliseconds(100), .seconds(1), .seconds(5), .seconds(30), .seconds(60), .seconds(300), .seconds(900),
            .seconds(3600), .seconds(6 * 3600),
        ],
        "overtime_background_duration_seconds": [
            .seconds(1), .seconds(5), .seconds(30), .seconds(60), .seconds(300), .seconds(900), .seconds(3600),
        ],
        "overtime_handler_duration_seconds": [
            .microseconds(100), .milliseconds(1), .milliseconds(5), .milliseconds(10), .milliseconds(50),
            .milliseconds(100), .milliseconds(500), .seconds(1),
        ],
        "overtime_uploader_upload_duration_seconds": [
            .milliseconds(10), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
            .seconds(1), .seconds(2), .seconds(5), .seconds(10), .seconds(30), .seconds(60),
        ],
        "overtime_fleet_database_round_trip_seconds": [
            .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10),
            .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .seconds(1),
        ],
    ]
}
