import Foundation
import Overtime
import OvertimeTestSupport
import OvertimeTesting
import Testing

@_spi(ScheduleStore) @testable import OvertimeScheduler

/// Many requests of one kind: one handler for an identifier prefix, the store as the
/// index of due times (nothing per request in memory), and stores made by the previous
/// schema.
@Suite(
    "Scheduler with many requests: prefixes, the due index, migration", .serialized,
    // Minutes: under ThreadSanitizer its queue threads wait on the Swift runtime's locks
    // (ThreadSanitizer.swift).
    .timeLimit(.minutes(5)))
struct SchedulerManyRequestsTests {
    @Test func oneHandlerServesEveryIdentifierOfAPrefixAndAnIdentifierOfItsOwnComesFirst() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(identifiers: [], prefixes: ["thumb."])
            defer { h.finish() }
            let special = Recorder<String>()
            try h.current.register("thumb.special") { task in
                special.append(task.identifier)
                task.setTaskCompleted(success: true)
            }
            try h.current.start()
            try h.current.submit(
                contentsOf: ["thumb.1", "thumb.2", "thumb.special"].map { ScheduledTaskRequest(identifier: $0) })
            h.settle()
            #expect(h.attempts.all.map(\.identifier).sorted() == ["thumb.1", "thumb.2"])
            #expect(special.all == ["thumb.special"])
            do throws(SchedulerError) {
                try h.current.submit(ScheduledTaskRequest(identifier: "thumb"))
                Issue.record("an identifier without a handler was accepted")
            } catch {
                #expect(error.code == .notRegistered, "the prefix is 'thumb.', not 'thumb'")
            }
        }
    }

    /// 2,000 one-shots due at once, at most 25 running: each runs exactly once, the limit
    /// is never exceeded, and runs start in the order they fell due.
    @Test func twoThousandDueTogetherRunOnceEachNeverOverTheLimit() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(identifiers: [], prefixes: ["job-"]) { $0.maximumConcurrentRuns = 25 }
            defer { h.finish() }
            h.script.withLock { $0 = { _ in .hang } }
            try h.current.start()
            let start = h.now
            let requests = (0..<2_000).map { index in
                var request = ScheduledTaskRequest(identifier: "job-\(index)")
                request.earliestBegin = start + .milliseconds(index)
                return request
            }
            try h.current.submit(contentsOf: requests.shuffled())
            h.advance(by: .seconds(3))
            var completed = 0
            for _ in 0..<200 {
                guard completed < 2_000 else { break }
                let open = h.hanging.all.dropFirst(completed)
                #expect(open.count <= 25, "at most 25 at once")
                guard !open.isEmpty else { break }
                for task in open { task.setTaskCompleted(success: true) }
                completed += open.count
                h.settle()
            }
            let ran = h.attempts.all.map(\.identifier)
            #expect(ran.count == 2_000 && Set(ran).count == 2_000, "each exactly once")
            #expect(ran == requests.map(\.identifier), "in the order they fell due")
            #expect(h.current.pendingRequests().isEmpty)
            #expect(try h.current.history("job-1999").map(\.result) == [.succeeded])
        }
    }

    /// A store the previous schema (2) wrote: opened, migrated, its plans kept — the next
    /// run at its planned time, not at once and not lost.
    @Test func aStoreOfThePreviousSchemaIsMigratedWithItsPlansKept() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(store: .sqlite)
            defer { h.finish() }
            let planned = h.now + .seconds(500)
            try Self.replaceStore(
                of: h,
                with: Self.schemaVersion2
                    + """
                    INSERT INTO requests VALUES ('job', \(h.now.nanosecondsSinceEpoch), NULL, 3600000000000, 0, 'once',
                        1, 0, 600000000000, 'exponential', 30000000000, 18000000000000, 3,
                        \(planned.nanosecondsSinceEpoch), 0, NULL, 0, 0, NULL, 1, '');
                    INSERT INTO runs VALUES (7, 1, 'job', \((h.now - .seconds(10)).nanosecondsSinceEpoch),
                        \((h.now - .seconds(9)).nanosecondsSinceEpoch), 'succeeded', NULL);
                    UPDATE counters SET value = 7 WHERE name = 'run_id';
                    """)
            try h.open()
            try h.current.start()
            #expect(h.current.pendingRequests().map(\.nextRun) == [planned])
            h.advance(to: planned - .nanoseconds(1))
            #expect(h.attempts.count == 0, "not before its planned time")
            h.advance(by: .nanoseconds(1))
            #expect(h.attempts.all.map(\.at) == [planned])
            #expect(h.attempts.all.first?.runID == 8, "run IDs go on from the old store's")
            #expect(try h.current.history("job").map(\.result) == [.succeeded, .succeeded])
        }
    }

    /// A store of schema 3 (the last one before a run in progress moved into its request's
    /// row) left by a process killed while a run ran: the run is found interrupted and
    /// retried once at the next start, under its own run ID.
    @Test func aRunInProgressInAStoreOfSchema3IsRetriedOnceAfterTheMigration() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(store: .sqlite)
            defer { h.finish() }
            let started = h.now - .seconds(30)
            try Self.replaceStore(
                of: h,
                with: Self.schemaVersion2 + Self.schemaVersion3Additions
                    + """
                    INSERT INTO requests VALUES ('job', \(started.nanosecondsSinceEpoch), NULL, NULL, NULL, 'once', 1, 0,
                        600000000000, 'exponential', 30000000000, 18000000000000, 3,
                        \(started.nanosecondsSinceEpoch), 1, NULL, 0, 0, 12, 1, '',
                        \(started.nanosecondsSinceEpoch), 0, 1);
                    INSERT INTO runs VALUES (12, 1, 'job', \(started.nanosecondsSinceEpoch), NULL, 'running', NULL);
                    UPDATE counters SET value = 12 WHERE name = 'run_id';
                    PRAGMA user_version = 3;
                    """)
            try h.open()
            #expect(h.current.recovery.interruptedRuns.map(\.runID) == [12])
            try h.current.start()
            h.settle()
            #expect(
                h.attempts.all.map(\.runID) == [12] && h.attempts.all.map(\.attempt) == [2], "retried once, at once")
            #expect(try h.current.history("job").map(\.result) == [.succeeded, .interrupted])
            try h.open()
            try h.current.start()
            h.advance(by: .seconds(3600))
            #expect(h.attempts.count == 1, "done: never again")
        }
    }

    /// A store of schema 4 (history in a rowid table with two indexes): its history is kept
    /// and read newest run first, a run left 'running' without a request is interrupted,
    /// and run IDs go on above every one it holds, even one its counter missed.
    @Test func aStoreOfSchema4KeepsItsHistoryAndItsRunIDs() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(store: .sqlite)
            defer { h.finish() }
            let planned = h.now + .seconds(500)
            let earlier = h.now - .seconds(7200)
            try Self.replaceStore(
                of: h,
                with: Self.schemaVersion2 + Self.schemaVersion3Additions
                    + """
                    ALTER TABLE requests ADD COLUMN active_run_id INTEGER;
                    ALTER TABLE requests ADD COLUMN active_attempt INTEGER;
                    ALTER TABLE requests ADD COLUMN active_started_at INTEGER;
                    INSERT INTO requests VALUES ('job', \(earlier.nanosecondsSinceEpoch), NULL, 3600000000000, 0,
                        'once', 1, 0, 600000000000, 'exponential', 30000000000, 18000000000000, 3,
                        \(planned.nanosecondsSinceEpoch), 0, NULL, 0, 0, NULL, 1, '',
                        \(planned.nanosecondsSinceEpoch), 0, 0, NULL, NULL, NULL);
                    INSERT INTO runs VALUES (3, 1, 'job', \(earlier.nanosecondsSinceEpoch),
                        \((earlier + .seconds(1)).nanosecondsSinceEpoch), 'failed', NULL);
                    INSERT INTO runs VALUES (3, 2, 'job', \((earlier - .seconds(60)).nanosecondsSinceEpoch),
                        \((earlier - .seconds(59)).nanosecondsSinceEpoch), 'succeeded', NULL);
                    INSERT INTO runs VALUES (9, 1, 'gone', \(earlier.nanosecondsSinceEpoch), NULL, 'running', NULL);
                    UPDATE counters SET value = 4 WHERE name = 'run_id';
                    PRAGMA user_version = 4;
                    """)
            try h.open()
            #expect(h.current.recovery.interruptedRuns.isEmpty, "no request of 'gone' is left to retry")
            #expect(try h.current.history("gone").map(\.result) == [.interrupted])
            // Attempt 2 started after attempt 1 although the wall clock had gone back.
            #expect(try h.current.history("job").map(\.attempt) == [2, 1])
            try h.current.start()
            h.advance(to: planned)
            #expect(h.attempts.all.map(\.runID) == [10], "above run 9, which the counter missed")
            #expect(try h.current.history("job").map(\.runID) == [10, 3, 3])
            // Migrated to this build's version, the inspector's indexes made.
            #expect(try sqliteShell(h.path, "PRAGMA user_version") == [["\(SQLiteScheduleStore.schemaVersion)"]])
            #expect(
                try sqliteShell(h.path, "SELECT name FROM sqlite_master WHERE type = 'index' ORDER BY name")
                    .contains(["history_unusual_results"]))
            #expect(
                try sqliteShell(h.path, "SELECT name FROM sqlite_master WHERE type = 'index' ORDER BY name")
                    .contains(["history_started"]))
        }
    }

    /// Stops `h`'s scheduler and puts the store `sql` makes (with the `sqlite3` shell) in
    /// its place, as an older build left it.
    static func replaceStore(of h: SchedulerHarness, with sql: String) throws {
        h.current.abandon()
        try FileManager.default.removeItem(atPath: h.path)
        _ = try sqliteShell(h.path, sql)
    }

    /// What schema version 3 added to version 2 (a fixture, as ``schemaVersion2``).
    static let schemaVersion3Additions = """
        ALTER TABLE requests ADD COLUMN due_at INTEGER;
        ALTER TABLE requests ADD COLUMN requirement_mask INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE requests ADD COLUMN running INTEGER NOT NULL DEFAULT 0;
        CREATE INDEX requests_due ON requests (due_at, sequence) WHERE running = 0 AND due_at IS NOT NULL;

        """

    /// What schema version 2 created (kept here as a fixture: the store's migrations
    /// must go on reading it).
    static let schemaVersion2 = """
        CREATE TABLE requests (
            identifier TEXT PRIMARY KEY NOT NULL, submitted_at INTEGER NOT NULL, earliest_begin INTEGER,
            interval_ns INTEGER, flex_ns INTEGER, catch_up TEXT NOT NULL, catch_up_maximum INTEGER NOT NULL,
            randomized_delay_ns INTEGER NOT NULL, maximum_duration_ns INTEGER NOT NULL, backoff TEXT NOT NULL,
            initial_delay_ns INTEGER NOT NULL, maximum_delay_ns INTEGER NOT NULL, maximum_attempts INTEGER NOT NULL,
            anchor INTEGER NOT NULL, owed INTEGER NOT NULL, retry_at INTEGER, failed_attempts INTEGER NOT NULL,
            finished INTEGER NOT NULL, current_run_id INTEGER, sequence INTEGER NOT NULL,
            requirements TEXT NOT NULL DEFAULT ''
        );
        CREATE TABLE runs (
            run_id INTEGER NOT NULL, attempt INTEGER NOT NULL, identifier TEXT NOT NULL, started_at INTEGER NOT NULL,
            ended_at INTEGER, result TEXT NOT NULL, stop_reason TEXT, PRIMARY KEY (run_id, attempt)
        );
        CREATE INDEX runs_by_identifier ON runs (identifier, started_at);
        CREATE TABLE counters (name TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL);
        INSERT INTO counters VALUES ('run_id', 0), ('sequence', 1);
        CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
        INSERT INTO grdb_migrations VALUES ('v1'), ('v2 requirements');
        PRAGMA user_version = 2;
        """
}
