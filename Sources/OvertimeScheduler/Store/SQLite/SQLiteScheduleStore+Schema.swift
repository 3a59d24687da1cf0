// The SQLite store's schema: opened, checked, migrated version by version, and runs found in
// progress recorded as interrupted.

import CSQLite
import Logging
import Overtime
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

extension SQLiteScheduleStore {
    /// Opens (creating) the database, refuses a newer schema, checks and migrates it.
    static func open(_ path: String) throws -> SQLiteConnection {
        var existing: SQLiteConnection?
        if access(path, F_OK) == 0 {
            // Read-only first: a store refused is left byte for byte as it was (opening it
            // for writing would already switch its journal mode).
            let reader = try SQLiteConnection(path: path, readOnly: true)
            let version = try reader.integer("PRAGMA user_version") ?? 0
            try refuseForeign(reader, path)
            try refuseNewer(Int(version), path)
            existing = reader
        }
        // Written to the log at each commit; on disk at each sync (see the type's comment).
        // A 16 MiB page cache (filled only as the store grows): runs/s at a million due
        // rose by a tenth over SQLite's 2 MiB, and 64 MiB added nothing.
        let connection = try SQLiteConnection(path: path)
        try connection.execute(
            """
            PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = 0;
            PRAGMA cache_size = -16384
            """)
        // Closed only now: the first connection to a database whose log holds frames reads
        // the whole log to index it, and that index lasts only while some connection has it
        // open. A connection opens the log at its first statement, not at sqlite3_open, so a
        // reader closed before the writer's first statement leaves it the log to read again.
        existing?.close()
        let version = try connection.integer("PRAGMA user_version") ?? 0
        try refuseNewer(Int(version), path)
        let check = try connection.rows("PRAGMA quick_check") { $0.text(0) }
        guard check == ["ok"] else {
            throw ScheduleStoreError("quick_check: \(check.prefix(3).joined(separator: "; "))")
        }
        for (target, migration) in migrations where target > version {
            try connection.transaction { () throws(SQLiteError) in
                try migration(connection)
                try connection.execute("PRAGMA user_version = \(target)")
            }
        }
        if try connection.integer("PRAGMA application_id") != applicationID {
            try connection.execute("PRAGMA application_id = \(applicationID)")
        }
        return connection
    }

    static func refuseNewer(_ version: Int, _ path: String) throws(ScheduleStoreError) {
        guard version > schemaVersion else { return }
        throw ScheduleStoreError(
            "the schedule store \(path) has schema version \(version); this build reads up to version "
                + "\(schemaVersion) (written by a newer Overtime: upgrade, or move the file aside)")
    }

    /// Versioned migrations, each in its own transaction with the `user_version` it reaches
    /// (which older builds check).
    static var migrations: [(Int64, (SQLiteConnection) throws(SQLiteError) -> Void)] {
        [
            (
                1,
                { connection throws(SQLiteError) in
                    try connection.execute(
                        """
                        CREATE TABLE requests (
                            identifier TEXT PRIMARY KEY NOT NULL,
                            submitted_at INTEGER NOT NULL,
                            earliest_begin INTEGER,
                            interval_ns INTEGER,
                            flex_ns INTEGER,
                            catch_up TEXT NOT NULL,
                            catch_up_maximum INTEGER NOT NULL,
                            randomized_delay_ns INTEGER NOT NULL,
                            maximum_duration_ns INTEGER NOT NULL,
                            backoff TEXT NOT NULL,
                            initial_delay_ns INTEGER NOT NULL,
                            maximum_delay_ns INTEGER NOT NULL,
                            maximum_attempts INTEGER NOT NULL,
                            anchor INTEGER NOT NULL,
                            owed INTEGER NOT NULL,
                            retry_at INTEGER,
                            failed_attempts INTEGER NOT NULL,
                            finished INTEGER NOT NULL,
                            current_run_id INTEGER,
                            sequence INTEGER NOT NULL
                        );
                        CREATE TABLE runs (
                            run_id INTEGER NOT NULL,
                            attempt INTEGER NOT NULL,
                            identifier TEXT NOT NULL,
                            started_at INTEGER NOT NULL,
                            ended_at INTEGER,
                            result TEXT NOT NULL,
                            stop_reason TEXT,
                            PRIMARY KEY (run_id, attempt)
                        );
                        CREATE INDEX runs_by_identifier ON runs (identifier, started_at);
                        CREATE TABLE counters (name TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL);
                        INSERT INTO counters VALUES ('run_id', 0), ('sequence', 0);
                        """)
                }
            ),
            (
                2,
                { connection throws(SQLiteError) in
                    try connection.execute("ALTER TABLE requests ADD COLUMN requirements TEXT NOT NULL DEFAULT ''")
                }
            ),
            (
                3,
                { connection throws(SQLiteError) in
                    // The store becomes the index of due times: the scheduler keeps no request
                    // in memory, and asks for the earliest due ones it may run.
                    try connection.execute(
                        """
                        ALTER TABLE requests ADD COLUMN due_at INTEGER;
                        ALTER TABLE requests ADD COLUMN requirement_mask INTEGER NOT NULL DEFAULT 0;
                        ALTER TABLE requests ADD COLUMN running INTEGER NOT NULL DEFAULT 0;
                        """)
                    // Read as the columns stood then (the scope came with version 6).
                    let stored = try connection.rows(
                        "SELECT \(requestColumnsBeforeScope), 'shared' AS scope, NULL AS planned_at, NULL AS details FROM requests",
                        request)
                    let update = "UPDATE requests SET due_at = ?, requirement_mask = ? WHERE identifier = ?"
                    for stored in stored {
                        let statement = try connection.statement(update)
                        statement.bind(1, SchedulePlanner.nextStart(stored.plan, stored.request)?.nanosecondsSinceEpoch)
                        statement.bind(2, stored.request.requirements.mask)
                        statement.bind(3, stored.request.identifier)
                        try statement.run()
                    }
                    try connection.execute(
                        "CREATE INDEX requests_due ON requests (due_at, sequence) WHERE running = 0 AND due_at IS NOT NULL"
                    )
                }
            ),
            (
                4,
                { connection throws(SQLiteError) in
                    // A run in progress lives in its request's row (one write at its start, not
                    // two); the history gets its row when the attempt ends.
                    try connection.execute(
                        """
                        ALTER TABLE requests ADD COLUMN active_run_id INTEGER;
                        ALTER TABLE requests ADD COLUMN active_attempt INTEGER;
                        ALTER TABLE requests ADD COLUMN active_started_at INTEGER;
                        UPDATE requests SET active_run_id = runs.run_id, active_attempt = runs.attempt,
                            active_started_at = runs.started_at, running = 1
                            FROM runs WHERE runs.identifier = requests.identifier AND runs.result = 'running';
                        DELETE FROM runs WHERE result = 'running' AND identifier IN (SELECT identifier FROM requests);
                        """)
                }
            ),
            (
                5,
                { connection throws(SQLiteError) in
                    // The history keyed by what it is read by (an identifier's runs, newest run
                    // ID first): one B-tree written per ended attempt instead of a table and two
                    // indexes. The highest run ID lives in its counter alone (no scan at open),
                    // and a run the process left 'running' without a request is interrupted.
                    try connection.execute(
                        """
                        UPDATE counters SET value = MAX(value, IFNULL((SELECT MAX(run_id) FROM runs), 0),
                            IFNULL((SELECT MAX(active_run_id) FROM requests), 0)) WHERE name = 'run_id';
                        CREATE TABLE history (
                            identifier TEXT NOT NULL,
                            run_id INTEGER NOT NULL,
                            attempt INTEGER NOT NULL,
                            started_at INTEGER NOT NULL,
                            ended_at INTEGER,
                            result TEXT NOT NULL,
                            stop_reason TEXT,
                            PRIMARY KEY (identifier, run_id, attempt)
                        ) WITHOUT ROWID;
                        INSERT OR REPLACE INTO history
                            SELECT identifier, run_id, attempt, started_at,
                                CASE result WHEN 'running' THEN started_at ELSE ended_at END,
                                CASE result WHEN 'running' THEN 'interrupted' ELSE result END,
                                CASE result WHEN 'running' THEN '\(interruptedReason)' ELSE stop_reason END
                            FROM runs ORDER BY identifier, run_id, attempt;
                        DROP TABLE runs;
                        """)
                }
            ),
            (
                6,
                { connection throws(SQLiteError) in
                    try connection.execute("ALTER TABLE requests ADD COLUMN scope TEXT NOT NULL DEFAULT 'shared'")
                }
            ),
            (
                7,
                { connection throws(SQLiteError) in
                    // A retried run keeps the planned time it stands for.
                    try connection.execute("ALTER TABLE requests ADD COLUMN planned_at INTEGER")
                }
            ),
            (
                8,
                { connection throws(SQLiteError) in
                    // A calendar repetition's expression and drawn delay, a request's tags
                    // and its input, packed in one column (`details`, NULL for most
                    // requests): every update of a plan rewrites its row, and each column
                    // more costs every update. An attempt's output.
                    try connection.execute(
                        """
                        ALTER TABLE requests ADD COLUMN details BLOB;
                        ALTER TABLE history ADD COLUMN output BLOB;
                        """)
                }
            ),
            (
                9,
                { connection throws(SQLiteError) in
                    // A cancelled request stays, finished, until retention prunes it. Links of
                    // chains: which request waits on which (the request keeps the rest of its
                    // state in `details`), found by the prerequisite when it concludes.
                    try connection.execute(
                        """
                        ALTER TABLE requests ADD COLUMN cancelled_at INTEGER;
                        CREATE TABLE prerequisites (
                            prerequisite TEXT NOT NULL,
                            identifier TEXT NOT NULL,
                            PRIMARY KEY (prerequisite, identifier)
                        ) WITHOUT ROWID;
                        """)
                }
            ),
            (
                10,
                { connection throws(SQLiteError) in
                    // Which requests wake the system (each says so in `details` too): an index
                    // on `due_at` would cost every update of a plan; this table, only their
                    // own writes.
                    try connection.execute("CREATE TABLE waking (identifier TEXT PRIMARY KEY NOT NULL) WITHOUT ROWID")
                }
            ),
            (
                11,
                { connection throws(SQLiteError) in
                    // For an inspector beside the daemon: the whole history newest first, a
                    // page at a time, without a sort of every row. (One more B-tree entry per
                    // ended attempt: 1-2 % of runs/s. An index of the unfinished requests cost
                    // a tenth of runs/s and was left out: the requests are read in order.)
                    try connection.execute("CREATE INDEX history_by_run ON history (run_id, attempt)")
                }
            ),
            (
                12,
                { connection throws(SQLiteError) in
                    // An inspector's attempts of one result other than success, newest first,
                    // without a read of the whole history (1,000,000 attempts: `superseded`
                    // 0.68 s → under 0.1 ms). Success, most attempts, is left out: an attempt's
                    // insert pays for the index only when it did not succeed. SQLite takes a
                    // partial index only for a query that repeats its condition, which
                    // SQLiteScheduleInspector's does.
                    try connection.execute(
                        """
                        CREATE INDEX history_unusual_results ON history (result, run_id, attempt)
                            WHERE result <> 'succeeded'
                        """)
                }
            ),
            (
                13,
                { connection throws(SQLiteError) in
                    // The handlers the daemon registered, as it started: an inspector tells a
                    // request it has no handler for from one waiting for its turn. One row
                    // (the program ''); the names one per line.
                    try connection.execute(
                        """
                        CREATE TABLE handlers (
                            program TEXT PRIMARY KEY NOT NULL,
                            identifiers TEXT NOT NULL,
                            prefixes TEXT NOT NULL,
                            recorded_at INTEGER NOT NULL
                        )
                        """)
                }
            ),
            (
                14,
                { connection throws(SQLiteError) in
                    // The progress a running handler reported last, with the run that reported
                    // it: an inspector shows it beside that attempt while it is in progress.
                    try connection.execute(
                        """
                        ALTER TABLE requests ADD COLUMN progress_run_id INTEGER;
                        ALTER TABLE requests ADD COLUMN progress_fraction REAL;
                        ALTER TABLE requests ADD COLUMN progress_message TEXT;
                        """)
                }
            ),
            (
                15,
                { connection throws(SQLiteError) in
                    // An inspector's attempts started in a range, without a read of the whole
                    // history when the range holds few of them (1,000,000 attempts, an empty
                    // day: a read of every attempt before). One more B-tree entry per ended
                    // attempt, as history_by_run.
                    try connection.execute("CREATE INDEX history_started ON history (started_at)")
                }
            ),
            (
                16,
                { connection throws(SQLiteError) in
                    // The attempts that ended, counted by the minute they started as each is
                    // recorded (one row a minute, written once per batch of ends): an
                    // overview reads an hour's as 60 rows, not as every attempt of the hour.
                    // Counted from the history of the last day as it stands.
                    try connection.execute(
                        """
                        CREATE TABLE activity (
                            minute INTEGER PRIMARY KEY NOT NULL,
                            ended INTEGER NOT NULL,
                            failed INTEGER NOT NULL
                        );
                        INSERT INTO activity
                            SELECT started_at / \(activityMinute), COUNT(*),
                                COUNT(*) FILTER (WHERE result IN (\(activityFailures)))
                            FROM history WHERE started_at >= (SELECT MAX(started_at) FROM history) - 86400000000000
                            GROUP BY 1;
                        """)
                }
            ),
            (
                17,
                { connection throws(SQLiteError) in
                    // Who retried, ran or cancelled what through the control commands: the
                    // schedule's own record, which every dashboard of it reads.
                    try connection.execute(
                        """
                        CREATE TABLE operator_actions (
                            id INTEGER PRIMARY KEY,
                            at INTEGER NOT NULL,
                            by TEXT NOT NULL,
                            action TEXT NOT NULL,
                            subject TEXT NOT NULL,
                            count INTEGER NOT NULL,
                            outcome TEXT NOT NULL
                        )
                        """)
                }
            ),
            (
                18,
                { connection throws(SQLiteError) in
                    // When each request's newest attempt started, written with the start (a
                    // value in an update already made, no index): an inspector lists the
                    // requests by their last run without a lookup in the history for each.
                    try connection.execute(
                        """
                        ALTER TABLE requests ADD COLUMN last_started_at INTEGER;
                        UPDATE requests SET last_started_at = IFNULL(active_started_at,
                            (SELECT MAX(started_at) FROM history h WHERE h.identifier = requests.identifier));
                        """)
                }
            ),
            (
                19,
                { connection throws(SQLiteError) in
                    // The requests counted by state, kept by the store's writes (see
                    // StateTally): an overview reads 64 rows, not every request (a third of
                    // a second at 100,000, at each change). A state is a function of the row
                    // alone, so the counts cannot drift from the rows: whether the newest
                    // attempt failed is kept on the row, written with the attempt's end. And
                    // the waiting and running requests by identifier, for each handler's
                    // share (a range of this index per prefix).
                    try connection.execute(
                        """
                        ALTER TABLE requests ADD COLUMN last_failed INTEGER NOT NULL DEFAULT 0;
                        UPDATE requests SET last_failed = IFNULL((SELECT result IN (\(activityFailures)) FROM history h
                            WHERE h.identifier = requests.identifier ORDER BY run_id DESC, attempt DESC LIMIT 1), 0);
                        CREATE TABLE request_counts (state INTEGER PRIMARY KEY, count INTEGER NOT NULL);
                        \(recountStates)
                        CREATE INDEX requests_unfinished ON requests (identifier, running)
                            WHERE cancelled_at IS NULL AND (finished = 0 OR running = 1);
                        """)
                }
            ),
            (
                20,
                { connection throws(SQLiteError) in
                    // The requests that may have failed for good: their newest attempt
                    // failed, or their details may say their chain stopped them. A page of
                    // failed requests reads these rather than every finished one (all
                    // 100,000 to find none), and so does an overview's count of those a
                    // chain stopped. A row is in it only once finished so: the scheduler's
                    // writes to waiting and running requests leave it as it is.
                    try connection.execute("CREATE INDEX requests_failed ON requests (finished) WHERE \(failedRows)")
                }
            ),
            (
                21,
                { connection throws(SQLiteError) in
                    // How late runs started, counted by the minute they started in and by
                    // lateness bucket (LatenessBuckets) as each start is written: an
                    // overview's percentiles read an hour's few hundred rows at most. Starts
                    // before it were not timed: none is counted.
                    try connection.execute(
                        """
                        CREATE TABLE lateness (
                            minute INTEGER NOT NULL,
                            bucket INTEGER NOT NULL,
                            started INTEGER NOT NULL,
                            PRIMARY KEY (minute, bucket)
                        ) WITHOUT ROWID
                        """)
                }
            ),
            (
                22,
                { connection throws(SQLiteError) in
                    // The requests that may have failed for good again, by identifier: a bulk
                    // retry reads them a page at a time in that order (finishedRequests),
                    // each page a range of this index, where requests_failed (in the order
                    // submitted) would be read whole and sorted for every page.
                    try connection.execute(
                        "CREATE INDEX requests_failed_by_identifier ON requests (identifier) WHERE \(failedRows)")
                }
            ),
            (
                23,
                { connection throws(SQLiteError) in
                    // The waiting requests an attempt of which failed, by how many: a list by
                    // attempts reads them here, and the rest in the order submitted, rather
                    // than sorting every waiting request for each page. A run that succeeds
                    // the first time never enters it, so the scheduler's writes leave it as
                    // it is but for failures.
                    try connection.execute(
                        "CREATE INDEX requests_retrying ON requests (failed_attempts) WHERE \(retryingRows)")
                }
            ),
            (
                24,
                { connection throws(SQLiteError) in
                    // The waiting and running requests that have started, latest first: a list
                    // by last run reads them here, and those never started in the order
                    // submitted, rather than sorting every waiting request for each page. A
                    // one-shot is in it from its start to its end only, so the scheduler's
                    // runs of one-shots keep it as small as what runs at once.
                    try connection.execute(
                        "CREATE INDEX requests_last_run ON requests (\(lastRunKey)) WHERE \(lastRunRows)")
                }
            ),
        ]
    }

    /// The rows of the indexes `requests_failed` (schema version 20) and
    /// `requests_failed_by_identifier` (version 22): the requests that may
    /// have failed for good, a superset checked as read. A query reads the index only if its
    /// conditions include these, as written here.
    static let failedRows = "finished = 1 AND cancelled_at IS NULL AND (last_failed != 0 OR details IS NOT NULL)"

    /// The rows of the index `requests_retrying` (schema version 23): the waiting requests
    /// an attempt of which failed. A query reads the index only if its conditions include
    /// these, as written here.
    static let retryingRows = "finished = 0 AND failed_attempts > 0"

    /// The rows of the index `requests_last_run` (schema version 24): the waiting and running
    /// requests that have started. A query reads the index only if its conditions include
    /// these, as written here, and it orders by ``lastRunKey``.
    static let lastRunRows = "finished = 0 AND last_started_at IS NOT NULL"

    /// The key of the index `requests_last_run`: the newest attempt's start negated, so that
    /// the index's order (ties by row number, ascending) is the list's, latest first.
    static let lastRunKey = "-last_started_at"

    /// Why a run found in progress at open ended.
    static let interruptedReason = "the process ended while it ran"

    /// Runs in progress when the process ended: recorded as interrupted, their requests
    /// free to run again.
    static func recoverInterruptedRuns(_ connection: SQLiteConnection, _ now: WallClockInstant)
        throws(SQLiteError) -> [RunRecord]
    {
        // One read of the rows in progress: each counted out before the update below, and
        // an interrupted attempt recorded for each that held a run.
        let inProgress = "running != 0 OR active_run_id IS NOT NULL"
        let found = try connection.rows(
            """
            SELECT \(stateKey), identifier, active_run_id, active_attempt, active_started_at FROM requests
                WHERE \(inProgress)
            """
        ) { row in
            (
                state: row.int64(0),
                record: row.optionalInt64(2).map { runID in
                    RunRecord(
                        identifier: row.text(1), runID: runID, attempt: row.int(3),
                        startedAt: WallClockInstant(nanosecondsSinceEpoch: row.int64(4)), endedAt: now,
                        result: .interrupted, stopReason: interruptedReason)
                }
            )
        }
        let interrupted = found.compactMap(\.record)
        for record in interrupted { try insertRun(record, connection) }
        try countActivity(interrupted, connection)
        var tally = StateTally()
        for (state, _) in found { tally.moved(from: state, to: nil) }
        try tally.countIn(
            connection.statement(
                """
                UPDATE requests SET running = 0, active_run_id = NULL, active_attempt = NULL, active_started_at = NULL,
                    last_failed = IIF(active_run_id IS NULL, last_failed, 0)
                    WHERE \(inProgress) RETURNING \(stateKey)
                """))
        try tally.write(connection)
        return interrupted
    }
}
