// The SQLite store's writes: a batch in one transaction, syncs of its log beside the
// commits, and retention.

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
    func recordHandlers(identifiers: [String], prefixes: [String], at now: WallClockInstant) throws(ScheduleStoreError)
    {
        try using { connection throws(SQLiteError) in
            let statement = try connection.statement(
                "INSERT OR REPLACE INTO handlers (program, identifiers, prefixes, recorded_at) VALUES ('', ?, ?, ?)")
            statement.bind(1, RegisteredHandlers.joined(identifiers))
            statement.bind(2, RegisteredHandlers.joined(prefixes))
            statement.bind(3, now.nanosecondsSinceEpoch)
            try statement.run()
        }
    }

    /// Written beside the commits, not synced: progress is shown while a run runs, and a
    /// crash ends the run it described.
    func recordProgress(_ identifier: String, runID: Int64, _ progress: RunProgress, at now: WallClockInstant)
        throws(ScheduleStoreError)
    {
        try using { connection throws(SQLiteError) in
            let statement = try connection.statement(Self.recordProgressQuery)
            statement.bind(1, runID)
            statement.bind(2, progress.fraction)
            statement.bind(3, progress.message)
            statement.bind(4, identifier)
            try statement.run()
        }
    }

    func commit(_ batch: ScheduleBatch, lastRunID: Int64) throws(ScheduleStoreError) -> CommitRefusals {
        guard !batch.isEmpty else { return CommitRefusals() }
        return try usingHolder { holder, connection throws(SQLiteError) in
            try connection.transaction { () throws(SQLiteError) in
                // One scheduler owns the store: nothing else claims starts.
                var found = CommitRefusals()
                var tally = StateTally()
                if !batch.writes.isEmpty {
                    var kinds = WrittenKinds(hadWaking: holder.hasWaking)
                    found = try Self.write(batch.writes, connection, &kinds, &tally)
                    if kinds.links { holder.hasLinks = true }
                    if kinds.waking { holder.hasWaking = true }
                }
                for end in batch.ends {
                    try Self.insertRun(end.record, connection)
                    if let plan = end.plan {
                        // An update submitted while it ran has already written the new request.
                        try Self.updatePlan(plan, start: nil, ended: end.record, connection, &tally)
                    } else {
                        // Cancelled or replaced meanwhile: the identifier may run again.
                        let failed = ScheduleOverview.isFailure(end.record.result)
                        let old = try StateTally.state(of: end.record.identifier, connection)
                        let statement = try connection.statement(Self.endDetachedQuery)
                        statement.bind(1, end.record.identifier)
                        statement.bind(2, failed)
                        try statement.run()
                        tally.moved(
                            from: old,
                            to: old.map {
                                $0 & ~(CountedState.running | CountedState.lastFailed)
                                    | (failed ? CountedState.lastFailed : 0)
                            })
                    }
                }
                try Self.countActivity(batch.ends.map(\.record), connection)
                for (record, plan) in batch.starts {
                    try Self.updatePlan(plan, start: record, ended: nil, connection, &tally)
                }
                try Self.countLateness(batch, connection)
                try tally.write(connection)
                for action in batch.actions { try Self.insertAction(action, connection) }
                if !batch.starts.isEmpty {
                    let statement = try connection.statement(Self.lastRunIDQuery)
                    statement.bind(1, lastRunID)
                    try statement.run()
                }
                return found
            }
        }
    }

    static func insertAction(_ action: OperatorAction, _ connection: SQLiteConnection) throws(SQLiteError) {
        let statement = try connection.statement(
            "INSERT INTO operator_actions (at, by, action, subject, count, outcome) VALUES (?, ?, ?, ?, ?, ?)")
        statement.bind(1, action.at.nanosecondsSinceEpoch)
        statement.bind(2, action.by)
        statement.bind(3, action.action)
        statement.bind(4, action.subject)
        statement.bind(5, action.count)
        statement.bind(6, action.outcome)
        try statement.run()
    }

    func sync() throws(ScheduleStoreError) {
        try log.withLock { log throws(ScheduleStoreError) in
            guard log.descriptor >= 0 else { throw ScheduleStoreError("schedule store \(path): closed") }
            // fdatasync, as SQLite itself syncs: the data and the size needed to read it back,
            // not the times of the file.
            guard fdatasync(log.descriptor) == 0 else {
                throw ScheduleStoreError(
                    "schedule store \(path): fdatasync of the write-ahead log: \(errnoDescription())")
            }
            // What an earlier process left in the log goes at the first sync, whatever its
            // size: every start reads all of the log to index it (4 MiB of it, some thirty
            // restarts' worth, made a start 2 ms slower).
            let leftBefore = log.holdsEarlierFrames
            log.holdsEarlierFrames = false
            var status = stat()
            guard fstat(log.descriptor, &status) == 0, status.st_size > Self.checkpointBytes || leftBefore,
                let checkpointer = log.checkpointer
            else { return }
            // Copies the log into the database (and syncs it) beside the commits, which go
            // on appending; the log starts over at the next commit once all of it is copied.
            do {
                try checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)")
            } catch {
                throw ScheduleStoreError("schedule store \(path): checkpoint: \(error)")
            }
        }
    }

    /// Request writes, new rows numbered in submission order. Returns the conditional
    /// inserts that kept a pending request or replaced a finished one.
    static func write(
        _ writes: [RequestWrite], _ connection: SQLiteConnection, _ kinds: inout WrittenKinds,
        _ tally: inout StateTally
    ) throws(SQLiteError) -> CommitRefusals {
        let read = try connection.statement(sequenceQuery)
        var sequence = try read.step() ? read.int64(0) : 0
        var found = CommitRefusals()
        for write in writes {
            switch write {
            case .save(let stored):
                sequence += 1
                try upsert(stored, sequence: sequence, ifAbsent: false, connection, &kinds, &tally)
            case .replan(let stored, let from):
                let read = try connection.statement(requestQuery)
                read.bind(1, stored.request.identifier)
                guard try read.step() else { continue }
                let current = try request(read)
                read.reset()
                guard !current.isRunning, !current.plan.isFinished, current.plan == from else { continue }
                var replanned = stored
                replanned.rowID = nil
                try updatePlan(replanned, start: nil, ended: nil, connection, &tally)
            case .insertUnlessPending(let stored):
                let existing = try connection.statement(finishedQuery)
                existing.bind(1, stored.request.identifier)
                if try existing.step() {
                    guard existing.bool(0) else {
                        found.kept.insert(stored.request.identifier)
                        continue
                    }
                    // A new submission: it takes its place at the end of the order.
                    let old = try StateTally.state(of: stored.request.identifier, connection)
                    let delete = try connection.statement(deleteQuery)
                    delete.bind(1, stored.request.identifier)
                    try delete.run()
                    tally.moved(from: old, to: nil)
                    found.resubmitted.insert(stored.request.identifier)
                }
                sequence += 1
                try upsert(stored, sequence: sequence, ifAbsent: true, connection, &kinds, &tally)
            case .cancel(let identifier, let time):
                let old = try StateTally.state(of: identifier, connection)
                let statement = try connection.statement(cancelQuery + " AND identifier = ?2")
                statement.bind(1, time.nanosecondsSinceEpoch)
                statement.bind(2, identifier)
                try statement.run()
                if connection.changes > 0 {
                    tally.moved(from: old, to: old.map { $0 | CountedState.cancelled | CountedState.finished })
                }
            case .cancelAll(let time):
                try tally.countOut(where: "finished = 0", connection)
                let statement = try connection.statement(cancelQuery + " RETURNING \(stateKey)")
                statement.bind(1, time.nanosecondsSinceEpoch)
                try tally.countIn(statement)
            }
        }
        let statement = try connection.statement(setSequenceQuery)
        statement.bind(1, sequence)
        try statement.run()
        return found
    }

    /// Writes only where a request's schedule stands, and its run in progress: `start`
    /// when one starts, none when it ended (`ended`, whose result the row keeps).
    static func updatePlan(
        _ stored: StoredRequest, start: RunRecord?, ended: RunRecord?, _ connection: SQLiteConnection,
        _ tally: inout StateTally
    ) throws(SQLiteError) {
        let plan = stored.plan
        let old = try StateTally.state(of: stored.request.identifier, rowID: stored.rowID, connection)
        let statement = try connection.statement(stored.rowID == nil ? updatePlanQuery : updatePlanByRowQuery)
        bindPlan(stored, to: statement, at: 1)
        statement.bind(7, stored.nextStart?.nanosecondsSinceEpoch)
        statement.bind(8, start != nil)
        statement.bind(9, start?.runID)
        statement.bind(10, start?.attempt)
        statement.bind(11, start?.startedAt.nanosecondsSinceEpoch)
        statement.bind(12, stored.request.identifier)
        statement.bind(13, stored.rowID)
        statement.bind(14, plan.plannedTime?.nanosecondsSinceEpoch)
        let failed = ended.map { ScheduleOverview.isFailure($0.result) }
        statement.bind(15, failed.map { $0 ? Int64(1) : 0 })
        try statement.run()
        // The write keeps whether it is cancelled, its details, and (but at an end) whether
        // its newest attempt failed.
        guard let old else { return }
        let kept = old & (CountedState.cancelled | CountedState.detailed | CountedState.lastFailed)
        tally.moved(
            from: old,
            to: CountedState.of(
                cancelled: false, running: start != nil, finished: plan.isFinished,
                failedAttempts: plan.failedAttempts, lastFailed: failed ?? false, detailed: false)
                | (failed == nil ? kept : kept & ~CountedState.lastFailed))
    }

    /// Binds where a request's schedule stands (anchor, owed, retry at, failed attempts,
    /// finished, the run ID being retried) to six parameters from `first` on.
    static func bindPlan(_ stored: StoredRequest, to statement: SQLiteStatement, at first: Int32) {
        let plan = stored.plan
        statement.bind(first, plan.anchor.nanosecondsSinceEpoch)
        statement.bind(first + 1, plan.owed)
        statement.bind(first + 2, plan.retryAt?.nanosecondsSinceEpoch)
        statement.bind(first + 3, plan.failedAttempts)
        statement.bind(first + 4, plan.isFinished)
        statement.bind(first + 5, stored.currentRunID)
    }

    /// A minute of ``activityMinute`` nanoseconds: the unit the activity table counts in.
    static let activityMinute: Int64 = 60_000_000_000

    /// The results the activity table (and an inspector's overview) counts as failed, as
    /// SQL's list.
    static let activityFailures = ScheduleOverview.failureResults.map { "'\($0)'" }.joined(separator: ", ")

    /// Counts `records`, just written to the history, in the activity table: one write for
    /// each minute they started in (a batch's ends start in one or two).
    static func countActivity(_ records: [RunRecord], _ connection: SQLiteConnection) throws(SQLiteError) {
        guard !records.isEmpty else { return }
        var minutes: [Int64: (ended: Int, failed: Int)] = [:]
        for record in records {
            let minute = record.startedAt.nanosecondsSinceEpoch / activityMinute
            minutes[minute, default: (0, 0)].ended += 1
            if ScheduleOverview.isFailure(record.result) { minutes[minute, default: (0, 0)].failed += 1 }
        }
        for (minute, count) in minutes {
            let statement = try connection.statement(countActivityQuery)
            statement.bind(1, minute)
            statement.bind(2, count.ended)
            statement.bind(3, count.failed)
            try statement.run()
        }
    }

    /// Counts how late the starts of `batch` are, by the minute each started in and its
    /// lateness bucket: a write for each pair (a batch's starts share one or two).
    static func countLateness(_ batch: ScheduleBatch, _ connection: SQLiteConnection) throws(SQLiteError) {
        var counted: [LatenessKey: Int] = [:]
        for (record, _) in batch.starts {
            guard let lateness = batch.lateness[record.identifier] else { continue }
            let key = LatenessKey(
                minute: record.startedAt.nanosecondsSinceEpoch / activityMinute,
                bucket: LatenessBuckets.bucket(of: lateness))
            counted[key, default: 0] += 1
        }
        for (key, started) in counted {
            let statement = try connection.statement(countLatenessQuery)
            statement.bind(1, key.minute)
            statement.bind(2, key.bucket)
            statement.bind(3, started)
            try statement.run()
        }
    }

    /// A row of the lateness table.
    struct LatenessKey: Hashable {
        let minute: Int64
        let bucket: Int
    }

    static let countLatenessQuery = SQLiteQuery(
        """
        INSERT INTO lateness (minute, bucket, started) VALUES (?, ?, ?)
            ON CONFLICT (minute, bucket) DO UPDATE SET started = started + excluded.started
        """)

    static let countActivityQuery = SQLiteQuery(
        """
        INSERT INTO activity (minute, ended, failed) VALUES (?, ?, ?)
            ON CONFLICT (minute) DO UPDATE SET ended = ended + excluded.ended, failed = failed + excluded.failed
        """)

    /// The history's row of an attempt that ended.
    static func insertRun(_ record: RunRecord, _ connection: SQLiteConnection) throws(SQLiteError) {
        let statement = try connection.statement(insertRunQuery)
        statement.bind(1, record.runID)
        statement.bind(2, record.attempt)
        statement.bind(3, record.identifier)
        statement.bind(4, record.startedAt.nanosecondsSinceEpoch)
        statement.bind(5, record.endedAt?.nanosecondsSinceEpoch)
        statement.bind(6, record.result.description)
        statement.bind(7, record.stopReason)
        statement.bind(8, record.output)
        try statement.run()
    }

    static let updatePlanColumns = """
        UPDATE requests SET anchor = ?, owed = ?, retry_at = ?, failed_attempts = ?, finished = ?,
            current_run_id = ?, due_at = ?, running = ?, active_run_id = ?, active_attempt = ?,
            active_started_at = ?, planned_at = ?14, last_started_at = IFNULL(?11, last_started_at),
            last_failed = IFNULL(?15, last_failed)
        """
    // By rowid when read with one (the identifier checked on the row found, not searched
    // for), else by identifier.
    static let updatePlanQuery = SQLiteQuery(updatePlanColumns + " WHERE identifier = ?12")
    static let updatePlanByRowQuery = SQLiteQuery(updatePlanColumns + " WHERE rowid = ?13 AND identifier = ?12")
    static let endDetachedQuery = SQLiteQuery(
        """
        UPDATE requests SET running = 0, active_run_id = NULL, active_attempt = NULL,
            active_started_at = NULL, last_failed = ?2 WHERE identifier = ?1
        """)
    /// The request's progress, kept with the run that reported it: an inspector shows it
    /// only while that run is the one in progress, so no run's end has to clear it.
    static let recordProgressQuery = SQLiteQuery(
        """
        UPDATE requests SET progress_run_id = ?1, progress_fraction = ?2, progress_message = ?3
            WHERE identifier = ?4 AND active_run_id = ?1
        """)
    static let insertRunQuery = SQLiteQuery(
        """
        INSERT OR REPLACE INTO history (run_id, attempt, identifier, started_at, ended_at, result, stop_reason, output)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?)
        """)
    static let lastRunIDQuery = SQLiteQuery("UPDATE counters SET value = MAX(value, ?) WHERE name = 'run_id'")
    static let sequenceQuery = SQLiteQuery("SELECT value FROM counters WHERE name = 'sequence'")
    static let setSequenceQuery = SQLiteQuery("UPDATE counters SET value = ? WHERE name = 'sequence'")
    static let deleteQuery = SQLiteQuery("DELETE FROM requests WHERE identifier = ?")
    static let finishedQuery = SQLiteQuery("SELECT finished FROM requests WHERE identifier = ?")
    /// Cancels the pending requests (`AND` more conditions) at `?1`.
    static let cancelQuery = """
        UPDATE requests SET finished = 1, cancelled_at = ?1, due_at = NULL, owed = 0, retry_at = NULL
            WHERE finished = 0
        """

    /// Writes a request's row. A new row takes `sequence` (its submission order); an
    /// existing one keeps its own, and its run in progress. With `ifAbsent`, an existing
    /// row is left as it is.
    static func upsert(
        _ stored: StoredRequest, sequence: Int64, ifAbsent: Bool, _ connection: SQLiteConnection,
        _ kinds: inout WrittenKinds, _ tally: inout StateTally
    ) throws(SQLiteError) {
        let row = RequestColumns(stored)
        // An existing row is left as it is (if absent), or written over but for whether its
        // newest attempt failed.
        let old = ifAbsent ? nil : try StateTally.state(of: row.identifier, connection)
        let details = RequestDetails(row).packed
        let statement = try connection.statement(ifAbsent ? insertIfAbsentQuery : saveQuery)
        statement.bind(1, row.identifier)
        statement.bind(2, row.submittedAt)
        statement.bind(3, row.earliestBegin)
        statement.bind(4, row.intervalNanoseconds)
        statement.bind(5, row.flexNanoseconds)
        statement.bind(6, row.catchUp)
        statement.bind(7, row.catchUpMaximum)
        statement.bind(8, row.randomizedDelayNanoseconds)
        statement.bind(9, row.maximumDurationNanoseconds)
        statement.bind(10, row.backoff)
        statement.bind(11, row.initialDelayNanoseconds)
        statement.bind(12, row.maximumDelayNanoseconds)
        statement.bind(13, row.maximumAttempts)
        bindPlan(stored, to: statement, at: 14)
        statement.bind(20, row.requirements)
        statement.bind(21, row.dueAt)
        statement.bind(22, row.requirementMask)
        statement.bind(23, row.running)
        statement.bind(24, sequence)
        statement.bind(25, row.scope)
        statement.bind(26, row.plannedAt)
        statement.bind(27, details)
        statement.bind(28, row.cancelledAt)
        try statement.run()
        guard connection.changes > 0 else { return }
        tally.moved(
            from: old,
            to: CountedState.of(
                cancelled: row.cancelledAt != nil, running: row.running, finished: stored.plan.isFinished,
                failedAttempts: stored.plan.failedAttempts, lastFailed: false, detailed: details != nil)
                | (old ?? 0) & CountedState.lastFailed)
        if !stored.request.prerequisites.isEmpty {
            try writeLinks(stored, connection)
            kinds.links = true
        }
        if row.wakesSystem {
            let waking = try connection.statement("INSERT OR IGNORE INTO waking VALUES (?)")
            waking.bind(1, row.identifier)
            try waking.run()
            kinds.waking = true
        } else if kinds.hadWaking {
            // It may have woken the system before this write.
            let waking = try connection.statement("DELETE FROM waking WHERE identifier = ?")
            waking.bind(1, row.identifier)
            try waking.run()
        }
    }

    /// What a batch's request writes held, for the flags that spare queries.
    struct WrittenKinds {
        /// A request with prerequisites.
        var links = false
        /// A request that wakes the system.
        var waking = false
        /// The store held one before the batch.
        var hadWaking = false
    }

    /// Writes which prerequisites `stored` waits on (those it no longer waits on go).
    static func writeLinks(_ stored: StoredRequest, _ connection: SQLiteConnection) throws(SQLiteError) {
        let identifier = stored.request.identifier
        let clear = try connection.statement("DELETE FROM prerequisites WHERE identifier = ?")
        clear.bind(1, identifier)
        try clear.run()
        for prerequisite in stored.chain?.waitingOn ?? [] {
            let insert = try connection.statement("INSERT OR IGNORE INTO prerequisites VALUES (?, ?)")
            insert.bind(1, prerequisite)
            insert.bind(2, identifier)
            try insert.run()
        }
    }

    static let insertColumns = """
        INSERT INTO requests (identifier, submitted_at, earliest_begin, interval_ns, flex_ns, catch_up,
            catch_up_maximum, randomized_delay_ns, maximum_duration_ns, backoff, initial_delay_ns, maximum_delay_ns,
            maximum_attempts, anchor, owed, retry_at, failed_attempts, finished, current_run_id, requirements,
            due_at, requirement_mask, running, sequence, scope, planned_at, details, cancelled_at)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """
    static let insertIfAbsentQuery = SQLiteQuery(insertColumns + " ON CONFLICT (identifier) DO NOTHING")
    static let saveQuery = SQLiteQuery(
        insertColumns + """
             ON CONFLICT (identifier) DO UPDATE SET
                submitted_at = excluded.submitted_at, earliest_begin = excluded.earliest_begin,
                interval_ns = excluded.interval_ns, flex_ns = excluded.flex_ns, catch_up = excluded.catch_up,
                catch_up_maximum = excluded.catch_up_maximum, randomized_delay_ns = excluded.randomized_delay_ns,
                maximum_duration_ns = excluded.maximum_duration_ns, backoff = excluded.backoff,
                initial_delay_ns = excluded.initial_delay_ns, maximum_delay_ns = excluded.maximum_delay_ns,
                maximum_attempts = excluded.maximum_attempts, anchor = excluded.anchor, owed = excluded.owed,
                retry_at = excluded.retry_at, failed_attempts = excluded.failed_attempts,
                finished = excluded.finished, current_run_id = excluded.current_run_id,
                requirements = excluded.requirements, due_at = excluded.due_at,
                requirement_mask = excluded.requirement_mask, running = excluded.running, scope = excluded.scope,
                planned_at = excluded.planned_at, details = excluded.details, cancelled_at = excluded.cancelled_at
            """)

    func pruneHistory(endedBefore: WallClockInstant?, keepingPerIdentifier: Int?) throws(ScheduleStoreError) -> Int {
        try using { connection throws(SQLiteError) in
            try connection.transaction { () throws(SQLiteError) -> Int in
                var deleted = 0
                if let endedBefore {
                    let old = try connection.statement("DELETE FROM history WHERE ended_at < ?")
                    old.bind(1, endedBefore.nanosecondsSinceEpoch)
                    try old.run()
                    deleted += connection.changes
                    // The activity and lateness of those minutes go with their attempts,
                    // and the operators' actions of that time.
                    let activity = try connection.statement("DELETE FROM activity WHERE minute < ?")
                    activity.bind(1, endedBefore.nanosecondsSinceEpoch / Self.activityMinute)
                    try activity.run()
                    let lateness = try connection.statement("DELETE FROM lateness WHERE minute < ?")
                    lateness.bind(1, endedBefore.nanosecondsSinceEpoch / Self.activityMinute)
                    try lateness.run()
                    let actions = try connection.statement("DELETE FROM operator_actions WHERE at < ?")
                    actions.bind(1, endedBefore.nanosecondsSinceEpoch)
                    try actions.run()
                }
                if let keep = keepingPerIdentifier {
                    // The newest `keep` of each identifier stay (its primary key's order).
                    let surplus = try connection.statement(
                        """
                        DELETE FROM history WHERE (identifier, run_id, attempt) IN (
                            SELECT identifier, run_id, attempt FROM (
                                SELECT identifier, run_id, attempt, ROW_NUMBER() OVER (
                                    PARTITION BY identifier ORDER BY run_id DESC, attempt DESC) AS newest
                                FROM history)
                            WHERE newest > ?)
                        """)
                    surplus.bind(1, keep)
                    try surplus.run()
                    deleted += connection.changes
                }
                if let endedBefore {
                    // Finished, not running, and nothing of it younger left in the history.
                    let finished = try connection.statement(
                        """
                        DELETE FROM requests WHERE finished = 1 AND running = 0 AND submitted_at < ?1
                            AND IFNULL(cancelled_at, 0) < ?1
                            AND NOT EXISTS (SELECT 1 FROM history
                                WHERE history.identifier = requests.identifier AND history.ended_at >= ?1)
                        RETURNING \(Self.stateKey)
                        """)
                    finished.bind(1, endedBefore.nanosecondsSinceEpoch)
                    var tally = StateTally()
                    try tally.countIn(finished, removing: true)
                    let removed = connection.changes
                    try tally.write(connection)
                    if removed > 0 {
                        try connection.execute(
                            """
                            DELETE FROM prerequisites
                                WHERE identifier NOT IN (SELECT identifier FROM requests WHERE finished = 0);
                            DELETE FROM waking WHERE identifier NOT IN (SELECT identifier FROM requests);
                            """)
                    }
                }
                return deleted
            }
        }
    }
}
