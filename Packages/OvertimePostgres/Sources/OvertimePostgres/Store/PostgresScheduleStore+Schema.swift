// The PostgreSQL store's schema: made on the first connection, migrated version by version
// in one transaction, refused when newer than this build. The indexes a migration adds to
// tables that hold rows are built after it (PostgresScheduleStore+Indexes.swift).

import Logging
import Metrics
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Overtime
@_spi(ScheduleStore) import OvertimeScheduler
import PostgresNIO

extension PostgresScheduleStore {
    /// Makes the schema, or migrates it to this build's version, in one transaction on
    /// `connection` (the first of every connection until it is done once); in it, counts
    /// the requests by state again if the counts kept are not the rows' (``recountIfAmiss(_:)``).
    /// Then starts building the indexes a migration added to tables that held rows, on a
    /// connection of their own (``buildConcurrently(_:)``).
    func migrate(_ connection: PostgresConnection) async throws {
        _ = try await run(connection, "BEGIN")
        let recounted: Bool
        let indexes: [ConcurrentIndex]
        do {
            indexes = try await migrateInTransaction(connection)
            recounted = try await recountIfAmiss(connection)
            _ = try await run(connection, "COMMIT")
        } catch {
            if (try? await run(connection, "ROLLBACK")) == nil { try? await connection.close() }
            throw error
        }
        schemaReady.withLockedValue { $0 = true }
        buildConcurrently(indexes)
        if recounted {
            logger.warning(
                "schedule database \(configuration.serverName): the requests counted by state were not those of the rows (written with the counting triggers off?): counted again"
            )
        }
    }

    /// The migration's statements, in its transaction; returns the indexes to build after it
    /// commits (``buildConcurrently(_:)``).
    func migrateInTransaction(_ connection: PostgresConnection) async throws -> [ConcurrentIndex] {
        do {
            // One instance migrates at a time; the others find it done.
            _ = try await run(connection, "SELECT pg_advisory_xact_lock(hashtext('overtime schema'))")
            // A schema named `overtime` that is not Overtime's is refused and left as it was:
            // ours holds `overtime.meta` and only the tables these migrations make.
            let existing = try await run(
                connection,
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'overtime' AND c.relkind IN ('r', 'p', 'v', 'm', 'f')"
            )
            let tables = Set(try existing.map { try $0.decode(String.self) })
            if !tables.isEmpty, !tables.contains("meta") || !tables.isSubset(of: Self.tables) {
                throw ScheduleStoreError(
                    "schedule database \(configuration.serverName): the schema 'overtime' exists and is not an Overtime "
                        + "schedule store (tables \(tables.sorted().joined(separator: ", "))); left as it was")
            }
            _ = try await run(connection, "CREATE SCHEMA IF NOT EXISTS overtime")
            _ = try await run(
                connection, "CREATE TABLE IF NOT EXISTS overtime.meta (name text PRIMARY KEY, value bigint NOT NULL)")
            let rows = try await run(connection, "SELECT value FROM overtime.meta WHERE name = 'schema_version'")
            let version = try rows.first.map { try $0.decode(Int64.self) } ?? 0
            if version > Self.schemaVersion {
                throw ScheduleStoreError(
                    "schedule database \(configuration.serverName): written by a newer Overtime (schema version \(version));"
                        + " this build reads up to version \(Self.schemaVersion)")
            }
            for (target, statements) in [
                (1, Self.schemaVersion1), (2, Self.schemaVersion2), (3, Self.schemaVersion3), (4, Self.schemaVersion4),
                (5, Self.schemaVersion5), (6, Self.schemaVersion6), (7, Self.schemaVersion7), (8, Self.schemaVersion8),
                (9, Self.schemaVersion9), (10, Self.schemaVersion10), (11, Self.schemaVersion11),
                (12, Self.schemaVersion12), (13, Self.schemaVersion13), (14, Self.schemaVersion14),
                (15, Self.schemaVersion15), (16, Self.schemaVersion16), (17, Self.schemaVersion17),
                (18, Self.schemaVersion18 + Self.recountStates), (19, Self.schemaVersion19),
            ] where version < target {
                for statement in statements { _ = try await run(connection, PostgresQuery(unsafeSQL: statement)) }
            }
            // Versions 20 to 22 changed indexes only, built beside the fleet's writes.
            let indexes = try await indexesToBuild(connection, schemaBefore: version)
            _ = try await run(
                connection,
                """
                INSERT INTO overtime.meta (name, value) VALUES ('schema_version', \(Self.schemaVersion))
                ON CONFLICT (name) DO UPDATE SET value = excluded.value
                """)
            return indexes
        }
    }

    /// The tables the migrations make in the `overtime` schema.
    static let tables: Set<String> = [
        "meta", "requests", "history", "prerequisites", "handlers", "activity", "operator_actions", "request_counts",
        "lateness",
    ]

    static let schemaVersion1 = [
        "CREATE SEQUENCE overtime.run_ids",
        "CREATE SEQUENCE overtime.submissions",
        """
        CREATE TABLE overtime.requests (
            identifier text PRIMARY KEY, sequence bigint NOT NULL, submitted_at bigint NOT NULL,
            earliest_begin bigint, interval_ns bigint, flex_ns bigint, catch_up text NOT NULL,
            catch_up_maximum bigint NOT NULL, randomized_delay_ns bigint NOT NULL, maximum_duration_ns bigint NOT NULL,
            backoff text NOT NULL, initial_delay_ns bigint NOT NULL, maximum_delay_ns bigint NOT NULL,
            maximum_attempts bigint NOT NULL, requirements text NOT NULL, anchor bigint NOT NULL, owed bigint NOT NULL,
            retry_at bigint, failed_attempts bigint NOT NULL, finished boolean NOT NULL, current_run_id bigint,
            due_at bigint, requirement_mask bigint NOT NULL, running boolean NOT NULL DEFAULT false,
            active_run_id bigint, active_attempt bigint, active_started_at bigint,
            claimed_by text, claim_until timestamptz)
        """,
        "CREATE INDEX requests_due ON overtime.requests (due_at, sequence) WHERE due_at IS NOT NULL AND NOT running",
        "CREATE INDEX requests_claims ON overtime.requests (claim_until) WHERE running",
        // pendingRequests and their count read only what is not finished (in submission order).
        "CREATE INDEX requests_pending ON overtime.requests (sequence) WHERE NOT finished",
        "CREATE INDEX requests_claimed_by ON overtime.requests (claimed_by) WHERE claimed_by IS NOT NULL",
        """
        CREATE TABLE overtime.history (
            identifier text NOT NULL, run_id bigint NOT NULL, attempt bigint NOT NULL, started_at bigint NOT NULL,
            ended_at bigint, result text NOT NULL, stop_reason text, instance text,
            PRIMARY KEY (identifier, run_id, attempt))
        """,
    ]

    /// Per-instance requests: a row's owner is the instance name whose schedule it is in,
    /// empty for the fleet's shared schedule. An instance sees the shared rows and its own.
    static let schemaVersion2 = [
        "ALTER TABLE overtime.requests ADD COLUMN owner text NOT NULL DEFAULT ''",
        "ALTER TABLE overtime.requests DROP CONSTRAINT requests_pkey",
        "ALTER TABLE overtime.requests ADD PRIMARY KEY (identifier, owner)",
        // What is pending, counted from the index alone, owner included.
        "DROP INDEX IF EXISTS overtime.requests_pending",
        "CREATE INDEX requests_pending ON overtime.requests (sequence) INCLUDE (owner) WHERE NOT finished",
    ]

    /// Whose history an attempt is in: the owner of its request's row (empty for the
    /// shared schedule), so that an instance's history of a per-instance request lists its
    /// own runs only. Attempts recorded before this version count as the fleet's.
    static let schemaVersion3 = [
        "ALTER TABLE overtime.history ADD COLUMN owner text NOT NULL DEFAULT ''"
    ]

    /// Version 4: a retried run keeps the planned time it stands for.
    static let schemaVersion4 = [
        "ALTER TABLE overtime.requests ADD COLUMN planned_at bigint"
    ]

    /// Version 5: calendar repetitions (the expression, the drawn delay, and where the
    /// previous planned time's window opened, which a clock set back looks for), tags, a
    /// request's input and an attempt's output.
    static let schemaVersion5 = [
        "ALTER TABLE overtime.requests ADD COLUMN calendar text",
        "ALTER TABLE overtime.requests ADD COLUMN grid_offset_ns bigint NOT NULL DEFAULT 0",
        "ALTER TABLE overtime.requests ADD COLUMN previous_window_at bigint",
        "ALTER TABLE overtime.requests ADD COLUMN tags text NOT NULL DEFAULT ''",
        "ALTER TABLE overtime.requests ADD COLUMN input bytea NOT NULL DEFAULT ''::bytea",
        "ALTER TABLE overtime.history ADD COLUMN output bytea",
    ]

    /// Version 6: a cancelled request stays, finished, until retention prunes it. Links of
    /// chains: a request's prerequisites and its state (`chain`, ``ChainState/packed``),
    /// which request waits on which (found by the prerequisite when it concludes), and on
    /// each prerequisite whether anything waits on it — which a submission of a link sets
    /// under the prerequisite's row lock, so that the instance that ends the prerequisite
    /// reads it as it stands after that submission.
    static let schemaVersion6 = [
        "ALTER TABLE overtime.requests ADD COLUMN cancelled_at bigint",
        "ALTER TABLE overtime.requests ADD COLUMN prerequisites text NOT NULL DEFAULT ''",
        "ALTER TABLE overtime.requests ADD COLUMN chain bytea",
        "ALTER TABLE overtime.requests ADD COLUMN has_dependents boolean NOT NULL DEFAULT false",
        """
        CREATE TABLE overtime.prerequisites (
            prerequisite text NOT NULL, identifier text NOT NULL, PRIMARY KEY (prerequisite, identifier))
        """,
        "CREATE INDEX prerequisites_by_identifier ON overtime.prerequisites (identifier)",
    ]

    /// Version 7: requests that wake the system, and the earliest next start among them.
    static let schemaVersion7 = [
        "ALTER TABLE overtime.requests ADD COLUMN wakes_system boolean NOT NULL DEFAULT false",
        "CREATE INDEX requests_waking ON overtime.requests (due_at) WHERE wakes_system AND NOT finished",
    ]

    /// Version 8: the history newest first, across identifiers (what a dashboard's history
    /// page reads, a page at a time, at a million attempts).
    static let schemaVersion8 = [
        "CREATE INDEX IF NOT EXISTS history_by_run ON overtime.history (run_id, attempt)"
    ]

    /// Version 9: the selections a dashboard offers that match few of many rows, found by an
    /// index instead of a read of every row (measured at 100,000 requests and 1,000,000
    /// attempts): the requests that failed for good or were cancelled (24-30 ms → 0.04 ms),
    /// the attempts of one result other than success (56 → 0.05 ms; success, most of them,
    /// is left out and costs an attempt's insert nothing), and the attempts started in a
    /// range (BRIN: attempts are written about in the order they start; an empty range
    /// 44 → 0.09 ms, 24 kB at a million attempts).
    static let schemaVersion9 = [
        """
        CREATE INDEX IF NOT EXISTS requests_failed ON overtime.requests (sequence)
            WHERE finished AND cancelled_at IS NULL
        """,
        "CREATE INDEX IF NOT EXISTS requests_cancelled ON overtime.requests (sequence) WHERE cancelled_at IS NOT NULL",
        """
        CREATE INDEX IF NOT EXISTS history_unusual_results ON overtime.history (result, run_id, attempt)
            WHERE result <> 'succeeded'
        """,
        "CREATE INDEX IF NOT EXISTS history_started ON overtime.history USING brin (started_at)",
    ]

    /// The handlers each instance registered, as it started: an inspector tells a request
    /// no instance has a handler for from one waiting for its turn. Retiring an instance
    /// removes its row.
    static let schemaVersion10 = [
        """
        CREATE TABLE IF NOT EXISTS overtime.handlers (
            instance text PRIMARY KEY, identifiers text[] NOT NULL, prefixes text[] NOT NULL,
            recorded_at bigint NOT NULL)
        """
    ]
    /// The progress a running handler reported last, with the run that reported it: an
    /// inspector shows it beside that attempt while it is in progress.
    static let schemaVersion11 = [
        """
        ALTER TABLE overtime.requests ADD COLUMN IF NOT EXISTS progress_run_id bigint,
            ADD COLUMN IF NOT EXISTS progress_fraction double precision,
            ADD COLUMN IF NOT EXISTS progress_message text
        """
    ]

    /// Version 12: the rest of what a dashboard's pages ask of many rows, each found by an
    /// index (measured at 100,000 requests and 200,000 attempts):
    /// - the finished requests of chains, for the page of what failed for good: such a
    ///   request was stopped by its chain or has an attempt other than a success
    ///   (`history_unusual_results`), so a page reads those few instead of the newest
    ///   attempt of every finished request. Only a chain's requests pay for it;
    /// - the attempts' start times summarized as each block range fills, not only when
    ///   autovacuum comes by: a range BRIN has not summarized is read whole by every query
    ///   of a range of start times (an empty range: 21 ms until then).
    static let schemaVersion12 = [
        """
        CREATE INDEX IF NOT EXISTS requests_finished_in_chains ON overtime.requests (sequence)
            WHERE finished AND cancelled_at IS NULL AND chain IS NOT NULL
        """,
        "ALTER INDEX overtime.history_started SET (autosummarize = on)",
    ]

    /// Version 13: identifiers compare byte by byte (collation `C`), as SQLite's store
    /// compares them, whatever the database's own collation. Under a language's collation
    /// an index cannot find the identifiers that start with a prefix (a page of the requests
    /// with a prefix read every request: 36 ms at 110,000); under `C` the primary keys find
    /// them as a range (13 ms, most of it putting a tenth of them in submission order).
    /// The indexes on these columns are rebuilt once, under the migration's lock.
    static let schemaVersion13 = [
        "ALTER TABLE overtime.requests ALTER COLUMN identifier TYPE text COLLATE \"C\"",
        "ALTER TABLE overtime.history ALTER COLUMN identifier TYPE text COLLATE \"C\"",
        """
        ALTER TABLE overtime.prerequisites ALTER COLUMN prerequisite TYPE text COLLATE "C",
            ALTER COLUMN identifier TYPE text COLLATE "C"
        """,
    ]

    /// Version 14: a request that finishes without a success ended in the same write says
    /// so (`failure_candidate`), so that the page of what failed for good reads the few such
    /// requests by one index. Before, it found them from the attempts that did not succeed,
    /// each joined with every finished request, and the finished requests of chains: 20 ms
    /// at 20,000 such attempts whichever had failed for good. A candidate's state is still
    /// told by its newest attempt; the candidates are a superset (a request finished by a
    /// submission, stopped by its chain, or whose history was pruned is one), never missing
    /// one that failed. Requests finished before this version are marked from their newest
    /// attempt, and every finished request of a chain (whether its chain stopped it is in
    /// its encoded state).
    static let schemaVersion14 = [
        "ALTER TABLE overtime.requests ADD COLUMN IF NOT EXISTS failure_candidate boolean NOT NULL DEFAULT false",
        """
        UPDATE overtime.requests r SET failure_candidate = true WHERE r.finished AND r.cancelled_at IS NULL
            AND (r.chain IS NOT NULL OR coalesce((SELECT h.result FROM overtime.history h
                WHERE h.identifier = r.identifier AND h.owner = r.owner ORDER BY h.run_id DESC, h.attempt DESC LIMIT 1),
                '') <> 'succeeded')
        """,
        "DROP INDEX IF EXISTS overtime.requests_finished_in_chains",
        """
        CREATE INDEX IF NOT EXISTS requests_failed_for_good ON overtime.requests (sequence)
            WHERE finished AND cancelled_at IS NULL AND failure_candidate
        """,
    ]

    /// Version 15: the attempts that ended, counted by the minute they started as each is
    /// recorded, so that an overview reads an hour's as a few rows, not as every attempt of
    /// the hour (210,000 in the last hour: 136 ms of the server's time). Each connection
    /// counts in rows of its own (`shard`, its backend's process ID): the instances' writes
    /// never wait for each other's on a minute's row. Counted afresh from the history of the
    /// last day as it stands.
    static let schemaVersion15 = [
        """
        CREATE TABLE IF NOT EXISTS overtime.activity (minute bigint NOT NULL, shard integer NOT NULL,
            ended bigint NOT NULL, failed bigint NOT NULL, PRIMARY KEY (minute, shard))
        """,
        "DELETE FROM overtime.activity",
        """
        INSERT INTO overtime.activity (minute, shard, ended, failed)
            SELECT started_at / \(activityMinute), 0, count(*), count(*) FILTER (WHERE result = ANY(\(activityFailures)))
            FROM overtime.history WHERE started_at >= (SELECT max(started_at) FROM overtime.history) - 86400000000000
            GROUP BY 1
        ON CONFLICT (minute, shard) DO NOTHING
        """,
    ]

    /// Version 16: who ran, retried or cancelled what through an instance's control
    /// commands, for every instance's dashboard to read (`instance`: the instance that did
    /// it, as its claims name it).
    static let schemaVersion16 = [
        """
        CREATE TABLE IF NOT EXISTS overtime.operator_actions (id bigserial PRIMARY KEY, at bigint NOT NULL,
            by text NOT NULL, action text NOT NULL, subject text NOT NULL, count bigint NOT NULL,
            outcome text NOT NULL, instance text NOT NULL)
        """
    ]

    /// Version 17: when each request's newest attempt started, written with the start (a
    /// value in an update already made, no index): an inspector lists the requests by their
    /// last run without a lookup in the history for each. Filled in from the history.
    static let schemaVersion17 = [
        "ALTER TABLE overtime.requests ADD COLUMN IF NOT EXISTS last_started_at bigint",
        """
        UPDATE overtime.requests r SET last_started_at = coalesce(r.active_started_at,
            (SELECT max(h.started_at) FROM overtime.history h WHERE h.identifier = r.identifier AND h.owner = r.owner))
        """,
    ]

    /// Version 18: what an overview reads, kept so that it reads few rows at each change of
    /// a busy fleet's schedule:
    /// - the requests counted by state as they are written, instead of a pass over every
    ///   request (100,000: 80 ms of the server's time). Counted by triggers at the end of each
    ///   statement that writes requests, from the rows it changed as they were and as they
    ///   are (`state`: ``CountedRequestState``'s bits), so that no write of any instance, old
    ///   or new, nor an operator's own SQL, goes uncounted; a statement that changes no
    ///   request's state writes no count. Each connection counts in rows of its own (`shard`,
    ///   its backend's process ID, as `activity`): the instances' writes never wait for each
    ///   other's; the shards of connections that ended are added into shard 0 as the history
    ///   is pruned. Counted afresh from the requests as they stand (``recountStates``);
    /// - the waiting and running requests by identifier, in which each handler's share is a
    ///   range read in the index alone (100,000 of one prefix: 94 ms in a pass, 13 ms so);
    /// - the instances' own unfinished requests, counted by instance.
    static let schemaVersion18 = [
        """
        CREATE TABLE IF NOT EXISTS overtime.request_counts (shard integer NOT NULL, state integer NOT NULL,
            count bigint NOT NULL, PRIMARY KEY (shard, state))
        """,
        """
        CREATE OR REPLACE FUNCTION overtime.request_state(cancelled_at bigint, running boolean, finished boolean,
            failed_attempts bigint, tags text) RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE
        AS $$ SELECT (CASE WHEN cancelled_at IS NOT NULL THEN \(CountedRequestState.cancelled) ELSE 0 END)
            | (CASE WHEN running THEN \(CountedRequestState.running) ELSE 0 END)
            | (CASE WHEN finished THEN \(CountedRequestState.finished) ELSE 0 END)
            | (CASE WHEN failed_attempts > 0 THEN \(CountedRequestState.retried) ELSE 0 END)
            | (CASE WHEN tags <> '' THEN \(CountedRequestState.tagged) ELSE 0 END) $$
        """,
        countingFunction("count_inserted_requests", counted: "SELECT \(countedState), 1 FROM new_rows"),
        countingFunction(
            "count_updated_requests",
            counted: "SELECT \(countedState), 1 FROM new_rows UNION ALL SELECT \(countedState), -1 FROM old_rows"),
        countingFunction("count_deleted_requests", counted: "SELECT \(countedState), -1 FROM old_rows"),
        // Emptied with the table (no transition table holds what a truncation removed).
        """
        CREATE OR REPLACE FUNCTION overtime.count_truncated_requests() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM overtime.request_counts;
            RETURN NULL;
        END $$
        """,
        // Made anew: a migration run again (its version set back) finds them.
        "DROP TRIGGER IF EXISTS requests_counted_inserts ON overtime.requests",
        "DROP TRIGGER IF EXISTS requests_counted_updates ON overtime.requests",
        "DROP TRIGGER IF EXISTS requests_counted_deletes ON overtime.requests",
        "DROP TRIGGER IF EXISTS requests_counted_truncations ON overtime.requests",
        """
        CREATE TRIGGER requests_counted_inserts AFTER INSERT ON overtime.requests
            REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION overtime.count_inserted_requests()
        """,
        """
        CREATE TRIGGER requests_counted_updates AFTER UPDATE ON overtime.requests
            REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
            FOR EACH STATEMENT EXECUTE FUNCTION overtime.count_updated_requests()
        """,
        """
        CREATE TRIGGER requests_counted_deletes AFTER DELETE ON overtime.requests
            REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION overtime.count_deleted_requests()
        """,
        """
        CREATE TRIGGER requests_counted_truncations AFTER TRUNCATE ON overtime.requests
            FOR EACH STATEMENT EXECUTE FUNCTION overtime.count_truncated_requests()
        """,
        // Each handler's share of them, as a range of identifiers read in this index alone.
        """
        CREATE INDEX IF NOT EXISTS requests_unfinished ON overtime.requests (identifier) INCLUDE (running)
            WHERE cancelled_at IS NULL AND (NOT finished OR running)
        """,
        // The instances' own unfinished requests, which an overview counts by instance: few
        // or none, found without a read of every unfinished request (100,000: 8 ms).
        """
        CREATE INDEX IF NOT EXISTS requests_owned ON overtime.requests (owner) WHERE owner <> '' AND NOT finished
        """,
    ]

    /// Version 19: how late runs started, counted by the minute they started in (the
    /// database's) and by bucket (``LatenessBuckets``) as each start is written: an
    /// overview's percentiles read an hour's rows, not its runs. Each connection counts in
    /// rows of its own (`shard`, as `activity`). Starts before it were not timed.
    static let schemaVersion19 = [
        """
        CREATE TABLE IF NOT EXISTS overtime.lateness (minute bigint NOT NULL, shard integer NOT NULL,
            bucket integer NOT NULL, started bigint NOT NULL, PRIMARY KEY (minute, shard, bucket))
        """
    ]

    /// The SQL of the number a page in `order` is sorted by (``RequestQuery/Order-swift.struct``),
    /// of a request's columns: the sort indexes' expressions (version 20), which a page's
    /// `ORDER BY` repeats to read one. Before version 17 there are no start times
    /// (`lastStarted` false): the last-run order sorts by sequence alone.
    static func sortKey(_ order: RequestQuery.Order, lastStarted: Bool = true) -> String {
        switch order {
        case .nextRun: "coalesce(due_at, \(Int64.max))"
        case .attempts:
            "-(CASE WHEN running THEN coalesce(active_attempt, failed_attempts + 1) WHEN finished THEN 0"
                + " ELSE failed_attempts + 1 END)"
        case .lastRun: lastStarted ? "coalesce(-last_started_at, \(Int64.max))" : "\(Int64.max)::bigint"
        default: "0::bigint"
        }
    }

    /// A request's counted state, of the row's columns (as a trigger's transition table
    /// names them, or the table's own).
    static let countedState = "overtime.request_state(cancelled_at, running, finished, failed_attempts, tags)"

    /// A trigger function that adds the states `counted` selects (state, +1 or -1 per row)
    /// into this connection's shard, leaving out the states whose count does not change.
    private static func countingFunction(_ name: String, counted: String) -> String {
        """
        CREATE OR REPLACE FUNCTION overtime.\(name)() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO overtime.request_counts AS c (shard, state, count)
                SELECT pg_backend_pid(), state, sum(delta) FROM (\(counted)) AS changed (state, delta)
                GROUP BY state HAVING sum(delta) <> 0
            ON CONFLICT (shard, state) DO UPDATE SET count = c.count + excluded.count;
            RETURN NULL;
        END $$
        """
    }
}
