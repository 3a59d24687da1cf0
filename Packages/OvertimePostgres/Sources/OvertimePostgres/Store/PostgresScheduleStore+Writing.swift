// The PostgreSQL store's writes: a batch of submits, starts and ends in one transaction,
// plans written only where this instance still holds the run, and retention.

import Logging
import Metrics
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Overtime
@_spi(ScheduleStore) import OvertimeScheduler
import PostgresNIO

extension PostgresScheduleStore {
    func pruneHistory(endedBefore: WallClockInstant?, keepingPerIdentifier: Int?) async throws(ScheduleStoreError)
        -> Int
    {
        try await using { [self] connection in
            // The rows this instance sees (the fleet's and its own); other instances prune
            // theirs. Each statement stands alone: a delete repeated by another instance
            // deletes nothing more.
            var deleted: Int64 = 0
            if let endedBefore {
                let cutoff = endedBefore.nanosecondsSinceEpoch
                deleted +=
                    try await run(
                        connection,
                        """
                        WITH gone AS (DELETE FROM overtime.history WHERE ended_at < \(cutoff) AND \(unescaped: visible)
                            RETURNING 1)
                        SELECT count(*) FROM gone
                        """
                    ).first?.decode(Int64.self) ?? 0
                // The activity and lateness of those minutes go with their attempts, and the
                // operators' actions of that time.
                _ = try await run(
                    connection, "DELETE FROM overtime.activity WHERE minute < \(cutoff / Self.activityMinute)")
                _ = try await run(
                    connection, "DELETE FROM overtime.lateness WHERE minute < \(cutoff / Self.activityMinute)")
                _ = try await run(connection, "DELETE FROM overtime.operator_actions WHERE at < \(cutoff)")
                // The request counts of connections that ended, into one row per state.
                _ = try await run(connection, PostgresQuery(unsafeSQL: Self.foldEndedShards))
            }
            if let keep = keepingPerIdentifier {
                let kept = Int64(keep)
                deleted +=
                    try await run(
                        connection,
                        """
                        WITH surplus AS (
                            SELECT identifier, owner, run_id, attempt FROM (
                                SELECT identifier, owner, run_id, attempt, row_number() OVER (
                                    PARTITION BY identifier, owner ORDER BY run_id DESC, attempt DESC) AS newest
                                FROM overtime.history WHERE \(unescaped: visible)) ranked
                            WHERE newest > \(kept)),
                        gone AS (DELETE FROM overtime.history h USING surplus
                            WHERE (h.identifier, h.owner, h.run_id, h.attempt)
                                = (surplus.identifier, surplus.owner, surplus.run_id, surplus.attempt)
                            RETURNING 1)
                        SELECT count(*) FROM gone
                        """
                    ).first?.decode(Int64.self) ?? 0
            }
            if let endedBefore {
                let cutoff = endedBefore.nanosecondsSinceEpoch
                _ = try await run(
                    connection,
                    """
                    DELETE FROM overtime.requests r WHERE r.finished AND NOT r.running AND r.submitted_at < \(cutoff)
                        AND coalesce(r.cancelled_at, 0) < \(cutoff) AND \(unescaped: visibleR)
                        AND NOT EXISTS (SELECT 1 FROM overtime.history h
                            WHERE h.identifier = r.identifier AND h.owner = r.owner AND h.ended_at >= \(cutoff))
                    """)
                _ = try await run(
                    connection,
                    """
                    DELETE FROM overtime.prerequisites p WHERE NOT EXISTS (SELECT 1 FROM overtime.requests r
                        WHERE r.identifier = p.identifier AND r.owner = '' AND NOT r.finished)
                    """)
            }
            return Int(deleted)
        }
    }

    // MARK: Writing

    func recordHandlers(identifiers: [String], prefixes: [String], at now: WallClockInstant)
        async throws(ScheduleStoreError)
    {
        try await using { [self] connection in
            _ = try await run(
                connection,
                """
                INSERT INTO overtime.handlers (instance, identifiers, prefixes, recorded_at)
                VALUES (\(configuration.instanceName), \(identifiers), \(prefixes), \(now.nanosecondsSinceEpoch))
                ON CONFLICT (instance) DO UPDATE SET identifiers = excluded.identifiers, prefixes = excluded.prefixes,
                    recorded_at = excluded.recorded_at
                """)
        }
    }

    /// Kept with the run that reported it, on the row this instance's claim holds: an
    /// inspector shows it only while that run is the one in progress, so no run's end has to
    /// clear it, and an instance whose claim was taken over writes nothing.
    func recordProgress(_ identifier: String, runID: Int64, _ progress: RunProgress, at now: WallClockInstant)
        async throws(ScheduleStoreError)
    {
        try await using { [self] connection in
            _ = try await run(
                connection,
                """
                UPDATE overtime.requests SET progress_run_id = \(runID), progress_fraction = \(progress.fraction),
                    progress_message = \(progress.message)
                WHERE identifier = \(identifier) AND active_run_id = \(runID) AND claimed_by = \(instance)
                """)
        }
    }

    func commit(_ batch: ScheduleBatch, lastRunID: Int64) async throws(ScheduleStoreError) -> CommitRefusals {
        // The scheduler commits operators' actions alone, after what they did.
        if !batch.actions.isEmpty { try await recordActions(batch.actions) }
        // A batch with nothing in it comes from a cycle whose claims started nothing (due
        // requests this program has no handler for): written as any other, so that they are
        // released, and the other instances told, now — an instance with the handler runs
        // them at once, not when the claims lapse.
        guard !batch.writes.isEmpty || !batch.ends.isEmpty || !batch.starts.isEmpty || batch.actions.isEmpty else {
            return CommitRefusals()
        }
        // Ended attempts' plans are written only while this instance still holds the run: a
        // claim taken over meanwhile has recorded the attempt as interrupted.
        let planned = batch.ends.compactMap { end in
            end.plan.map { plan -> PlanWrite in
                var plan = plan
                plan.isRunning = false
                return PlanWrite(stored: plan, start: nil, ending: end.record)
            }
        }
        // Only a claim this instance still holds becomes a run.
        let starts = batch.starts.map { record, stored in
            var plan = stored
            plan.isRunning = true
            return PlanWrite(stored: plan, start: record, ending: nil, lateness: batch.lateness[record.identifier])
        }
        // Others hear of an end only when it leaves something to run (a repeating request's
        // next time, a retry); a finished one-shot wakes no one.
        let endsLeaveRuns = planned.contains { $0.stored.nextStart != nil }
        var found = CommitRefusals()
        let recorded: RecordedRuns
        if batch.writes.isEmpty {
            do {
                recorded = try await using { [self] connection in
                    try await recordRuns(batch.ends, planned, starts, notifying: endsLeaveRuns, connection)
                }
            } catch {
                guard let written = await readBackUnansweredRecord(batch.ends, starts) else { throw error }
                recorded = written
            }
        } else {
            recorded = try await commitWithWrites(batch, planned, starts, found: &found)
        }
        let started = recorded.started
        var refusals = found
        refusals.superseded = recorded.superseded
        for (record, _) in batch.starts where !started.contains(record.identifier) {
            refusals.starts.insert(record.identifier)
        }
        let now = Self.bootNanoseconds()
        let holding = background.withLockedValue { background in
            for end in batch.ends {
                background.held[end.record.identifier] = nil
                background.lost.remove(end.record.identifier)
            }
            for (record, _) in batch.starts where !refusals.starts.contains(record.identifier) {
                background.held[record.identifier] = now
            }
            if background.held.isEmpty { stopRenewing(&background) }
            return background.held.count
        }
        heldRuns.record(holding)
        if holding > 0 { renewClaimsWhileHeld() }
        return refusals
    }

    /// Records operators' actions, in one statement.
    func recordActions(_ actions: [OperatorAction]) async throws(ScheduleStoreError) {
        try await using { [self] connection in
            _ = try await run(
                connection,
                """
                INSERT INTO overtime.operator_actions (at, by, action, subject, count, outcome, instance)
                SELECT at, by, action, subject, count, outcome, \(instance)
                FROM unnest(\(actions.map(\.at.nanosecondsSinceEpoch)), \(actions.map(\.by)), \(actions.map(\.action)),
                    \(actions.map(\.subject)), \(actions.map { Int64($0.count) }), \(actions.map(\.outcome)))
                    AS a(at, by, action, subject, count, outcome)
                """)
        }
    }

    /// How many request writes in one batch make its commit analyse the table.
    static let manyWrites = 1_000

    /// The most requests one statement of a large submission writes or deletes: the server
    /// answers each within a fraction of the deadline however loaded, the batch staying one
    /// transaction.
    static let writesPerStatement = 1_000

    /// `items` in runs of at most ``writesPerStatement``, in their order.
    static func inStatements<T>(_ items: [T]) -> [[T]] {
        stride(from: 0, to: items.count, by: writesPerStatement).map {
            Array(items[$0..<min($0 + writesPerStatement, items.count)])
        }
    }

    /// Records ends and starts of runs in one statement (one round trip, on the way from a
    /// due time to its start), atomic as any statement, and notifies the other instances
    /// when `notifying` or when it freed or released something. Returns the runs that
    /// started and the ends that came after their runs were taken over.
    func recordRuns(
        _ ends: [RunEnd], _ planned: [PlanWrite], _ starts: [PlanWrite], notifying: Bool,
        _ connection: PostgresConnection
    ) async throws -> RecordedRuns {
        var bindings = PostgresBindings()
        var steps: [String] = []
        if !ends.isEmpty {
            let insert = historyInsert(
                ends.map(\.record), owners: ends.map { owner(of: $0.scope) }, instance: instance, &bindings)
            steps.append("recorded AS (\(insert))")
            steps.append("counted AS (\(Self.activityCount(of: "recorded")))")
        }
        steps.append("ended AS (\(planUpdate(planned, .ending, &bindings)))")
        steps.append("started AS (\(planUpdate(starts, .claimedHere, &bindings)))")
        // How late the runs that start are, counted in this connection's rows of the
        // lateness table by minute and bucket; only the claims that become runs count.
        let late = starts.compactMap { write in
            write.lateness.map { lateness in
                (
                    identifier: write.stored.request.identifier,
                    minute: (write.start?.startedAt.nanosecondsSinceEpoch ?? 0) / Self.activityMinute,
                    bucket: Int32(LatenessBuckets.bucket(of: lateness))
                )
            }
        }
        if !late.isEmpty {
            bindings.append(late.map(\.identifier))
            bindings.append(late.map(\.minute))
            bindings.append(late.map(\.bucket))
            let first = bindings.count - 2
            steps.append(
                """
                late AS (INSERT INTO overtime.lateness (minute, shard, bucket, started)
                    SELECT v.minute, pg_backend_pid(), v.bucket, count(*)
                    FROM unnest($\(first)::text[], $\(first + 1)::bigint[], $\(first + 2)::integer[])
                        AS v(identifier, minute, bucket)
                    WHERE v.identifier IN (SELECT identifier FROM started)
                    GROUP BY v.minute, v.bucket
                    ON CONFLICT (minute, shard, bucket) DO UPDATE SET started = overtime.lateness.started + excluded.started)
                """)
        }
        let base = bindings.count
        bindings.append(ends.map(\.record.identifier))
        bindings.append(ends.map(\.record.runID))
        bindings.append(instance)
        bindings.append(notifying)
        bindings.append(Self.channel)
        bindings.append(ends.filter { $0.scope == .shared }.map(\.record.identifier))
        bindings.append(configuration.claimDuration.nanosecondsClamped)
        bindings.append(ends.map { Int64($0.record.attempt) })
        bindings.append(ends.map(\.record.result.description))
        bindings.append(ends.map { $0.record.endedAt?.nanosecondsSinceEpoch ?? 0 })
        // An end that comes after another instance took its run over (the attempt is in the
        // history as interrupted, by the taker): it does not count, and says so.
        steps.append(
            """
            superseded AS (UPDATE overtime.history AS h SET result = 'superseded', ended_at = v.ended,
                    stop_reason = 'ended (' || v.result || ') after its claim was taken over; '
                        || coalesce(h.stop_reason, '')
                FROM unnest($\(base + 1)::text[], $\(base + 2)::bigint[], $\(base + 8)::bigint[], $\(base + 9)::text[],
                    $\(base + 10)::bigint[]) AS v(identifier, run, attempt, result, ended)
                WHERE h.identifier = v.identifier AND h.run_id = v.run AND h.attempt = v.attempt
                    AND h.result = 'interrupted' AND v.identifier NOT IN (SELECT identifier FROM ended)
                RETURNING h.identifier)
            """)
        // Each step sees the rows as they were before the statement: an end not written (the
        // request replaced or cancelled meanwhile) frees the identifier, and the claims not
        // started are released, leaving out the rows the steps above wrote.
        steps.append(
            """
            freed AS (UPDATE overtime.requests AS r SET running = false, active_run_id = NULL, active_attempt = NULL,
                    active_started_at = NULL, claimed_by = NULL, claim_until = NULL
                FROM unnest($\(base + 1)::text[], $\(base + 2)::bigint[]) AS v(identifier, run)
                WHERE r.identifier = v.identifier AND r.running AND r.claimed_by = $\(base + 3) AND \(visibleR)
                    AND (r.active_run_id IS NULL OR r.active_run_id = v.run)
                    AND v.identifier NOT IN (SELECT identifier FROM ended)
                RETURNING 1)
            """)
        steps.append(
            """
            released AS (UPDATE overtime.requests SET claimed_by = NULL, claim_until = NULL
                WHERE claimed_by = $\(base + 3) AND NOT running
                    AND (identifier, owner) NOT IN (SELECT identifier, owner FROM started)
                RETURNING 1)
            """)
        // The other instances wake when the earliest claim held elsewhere may end, as they
        // last read the claims (``nextDue(after:unmet:)``), to take its run over if its
        // holder died. When this instance's last shared run ends with nothing shared due
        // within a claim's duration, they are told to read again: else each would wake at
        // rest, when that claim would have ended, for nothing. (Whether this instance holds
        // another, not whether any instance does: two last ends at once would each see the
        // other's run and neither tell.)
        let lastEnd = """
            cardinality($\(base + 6)::text[]) > 0 AND NOT EXISTS (SELECT 1 FROM started WHERE owner = '')
                AND NOT EXISTS (SELECT 1 FROM overtime.requests WHERE running AND owner = ''
                    AND claimed_by = $\(base + 3) AND identifier <> ALL($\(base + 6)::text[]))
                AND coalesce((SELECT due_at FROM overtime.requests WHERE due_at IS NOT NULL AND NOT running
                    AND owner = '' ORDER BY due_at, sequence LIMIT 1) > \(Self.databaseNow) + $\(base + 7), true)
            """
        let sql = """
            WITH \(steps.joined(separator: ",\n"))
            SELECT identifier, false FROM started
            UNION ALL
            SELECT identifier, true FROM superseded
            UNION ALL
            SELECT identifier, NULL FROM ended WHERE linked
            UNION ALL
            SELECT NULL, NULL FROM (SELECT pg_notify($\(base + 5), $\(base + 3))
                WHERE $\(base + 4) OR EXISTS (SELECT 1 FROM freed) OR EXISTS (SELECT 1 FROM released)
                    OR (\(lastEnd))) AS notified
            """
        let rows = try await run(connection, PostgresQuery(unsafeSQL: sql, binds: bindings))
        var recorded = RecordedRuns()
        for row in rows {
            let (identifier, late) = try row.decode((String?, Bool?).self)
            guard let identifier else { continue }
            if late == nil {
                concludedWithDependents.withLockedValue { _ = $0.insert(identifier) }
            } else if late == true {
                recorded.superseded.insert(identifier)
            } else {
                recorded.started.insert(identifier)
            }
        }
        return recorded
    }

    /// What ``recordRuns(_:_:_:notifying:_:)`` wrote: the runs that started, and the ends
    /// that came after their runs were taken over.
    struct RecordedRuns {
        var started: Set<String> = []
        var superseded: Set<String> = []
    }

    /// A batch that writes requests: in one transaction, under the fleet's submission lock.
    /// Returns what it recorded of the runs (see ``RecordedRuns``).
    func commitWithWrites(
        _ batch: ScheduleBatch, _ planned: [PlanWrite], _ starts: [PlanWrite], found: inout CommitRefusals
    ) async throws(ScheduleStoreError) -> RecordedRuns {
        let inserts = batch.writes.compactMap { write -> StoredRequest? in
            guard case .insertUnlessPending(let stored) = write else { return nil }
            return stored
        }
        // A submission kept by policy: one statement for each ``writesPerStatement`` requests,
        // not one a request (a thousand round trips, which a loaded machine took past the
        // deadline), nor one for all (each answer gives the operation its deadline again, and
        // 20,000 requests in one statement took a loaded server 4.3 s of its 5). Made before
        // the operation begins: its deadline is for the database's answers, and encoding a
        // large batch is the program's own work, which a slow device (or an unoptimized
        // build under ThreadSanitizer) takes seconds over while the database is quick.
        let batchInserts =
            !inserts.isEmpty && inserts.count == batch.writes.count
            ? Self.inStatements(inserts).map { ($0, insertUnlessPendingStatement($0)) } : nil
        let (started, written) = try await transaction { [self] connection in
            // Submissions take turns across the fleet (one lock for the whole batch, not one
            // per request: a batch of 20,000 ran out of the server's lock table), so that two
            // instances submitting one identifier in different scopes cannot both insert it.
            _ = try await run(connection, "SELECT pg_advisory_xact_lock(hashtext('overtime requests'))")
            var found = CommitRefusals()
            found.resubmitted = try await deleteFinished(of: batch.writes, connection)
            if let batchInserts {
                for (requests, statement) in batchInserts {
                    found.kept.formUnion(try await insertUnlessPending(requests, statement, connection))
                }
            } else {
                for write in batch.writes {
                    guard try await apply(write, connection) else {
                        if case .insertUnlessPending(let stored) = write {
                            found.kept.insert(stored.request.identifier)
                        }
                        continue
                    }
                }
            }
            found.resubmitted.subtract(found.kept)
            if batch.writes.count >= Self.manyWrites {
                // The claims' plans are chosen from the table's statistics, which a burst of
                // new requests leaves behind until autovacuum's next analysis (a minute or
                // more): taken here, in the submitting transaction. Skipped while an index
                // is built (``buildConcurrently(_:)``), whose lock an analysis waits for.
                _ = try await run(connection, "ANALYZE (SKIP_LOCKED) overtime.requests")
            }
            // Written requests are news to every instance.
            return (try await recordRuns(batch.ends, planned, starts, notifying: true, connection), found)
        }
        found = written
        return started
    }

    /// Removes the finished requests (done, or failed for good) that the batch's
    /// ``RequestWrite/insertUnlessPending(_:)`` writes replace, in a statement for each
    /// ``writesPerStatement`` of them; returns their identifiers.
    func deleteFinished(of writes: [RequestWrite], _ connection: PostgresConnection) async throws -> Set<String> {
        var inserts: [StoredRequest] = []
        for case .insertUnlessPending(let stored) in writes { inserts.append(stored) }
        var deleted: Set<String> = []
        for part in Self.inStatements(inserts) {
            let visibleHere = part.map(\.request.identifier)
            // A shared request stands for the identifier in every instance: their own
            // finished requests of it go too.
            let shared = part.filter { rowOwner(of: $0).isEmpty }.map(\.request.identifier)
            let rows = try await run(
                connection,
                """
                DELETE FROM overtime.requests WHERE finished AND identifier = ANY(\(visibleHere))
                    AND (\(unescaped: visible) OR identifier = ANY(\(shared)))
                RETURNING identifier
                """)
            deleted.formUnion(try rows.map { try $0.decode(String.self) })
        }
        return deleted
    }

    /// Applies `write`; returns whether it wrote (a conditional insert keeps a pending request).
    func apply(_ write: RequestWrite, _ connection: PostgresConnection) async throws -> Bool {
        switch write {
        case .save(let stored): return try await upsert(stored, ifAbsent: false, connection)
        case .insertUnlessPending(let stored): return try await upsert(stored, ifAbsent: true, connection)
        case .replan(let stored, let from):
            let write = PlanWrite(stored: stored, start: nil, ending: nil)
            return try await !writePlans([write], .unchanged(from), connection).isEmpty
        case .cancel(let identifier, let time):
            try noteConcluded(
                await run(
                    connection,
                    """
                    UPDATE overtime.requests SET finished = true, cancelled_at = \(time.nanosecondsSinceEpoch),
                        due_at = NULL, owed = 0, retry_at = NULL
                    WHERE identifier = \(identifier) AND NOT finished AND \(unescaped: visible)
                    RETURNING identifier, has_dependents
                    """))
        case .cancelAll(let time):
            try noteConcluded(
                await run(
                    connection,
                    """
                    UPDATE overtime.requests SET finished = true, cancelled_at = \(time.nanosecondsSinceEpoch),
                        due_at = NULL, owed = 0, retry_at = NULL
                    WHERE NOT finished AND \(unescaped: visible)
                    RETURNING identifier, has_dependents
                    """))
        }
        return true
    }

    /// Writes a request's row. A new row takes the next submission number; an existing
    /// one keeps its own, and its run in progress — which a replacement (a new run ID)
    /// detaches from the request.
    ///
    /// An identifier is in one scope across the fleet, so that no instance sees two
    /// requests of it: a shared request replaces every instance's own of that identifier,
    /// a per-instance one the shared one. (Under the commit's lock: two instances
    /// submitting one identifier in different scopes at once cannot both insert it.)
    func upsert(_ stored: StoredRequest, ifAbsent: Bool, _ connection: PostgresConnection) async throws -> Bool {
        let row = RequestColumns(stored)
        let rowOwner = rowOwner(of: stored)
        if !ifAbsent {
            _ = try await run(
                connection,
                """
                DELETE FROM overtime.requests WHERE identifier = \(row.identifier) AND owner <> \(rowOwner)
                    AND (\(rowOwner) = '' OR owner = '')
                """)
        }
        let conflict =
            ifAbsent
            ? "DO NOTHING"
            : """
            DO UPDATE SET submitted_at = excluded.submitted_at, earliest_begin = excluded.earliest_begin,
                interval_ns = excluded.interval_ns, flex_ns = excluded.flex_ns, catch_up = excluded.catch_up,
                catch_up_maximum = excluded.catch_up_maximum, randomized_delay_ns = excluded.randomized_delay_ns,
                maximum_duration_ns = excluded.maximum_duration_ns, backoff = excluded.backoff,
                initial_delay_ns = excluded.initial_delay_ns, maximum_delay_ns = excluded.maximum_delay_ns,
                maximum_attempts = excluded.maximum_attempts, requirements = excluded.requirements,
                anchor = excluded.anchor, owed = excluded.owed, retry_at = excluded.retry_at,
                failed_attempts = excluded.failed_attempts, finished = excluded.finished,
                failure_candidate = excluded.failure_candidate,
                current_run_id = excluded.current_run_id, due_at = excluded.due_at,
                requirement_mask = excluded.requirement_mask, planned_at = excluded.planned_at,
                calendar = excluded.calendar, grid_offset_ns = excluded.grid_offset_ns,
                previous_window_at = excluded.previous_window_at, tags = excluded.tags, input = excluded.input,
                cancelled_at = excluded.cancelled_at, prerequisites = excluded.prerequisites, chain = excluded.chain,
                wakes_system = excluded.wakes_system,
                active_run_id = CASE WHEN excluded.current_run_id IS DISTINCT FROM requests.current_run_id
                    THEN NULL ELSE requests.active_run_id END
            """
        let written = try await run(
            connection,
            """
            INSERT INTO overtime.requests AS requests (identifier, submitted_at, earliest_begin, interval_ns, flex_ns,
                catch_up, catch_up_maximum, randomized_delay_ns, maximum_duration_ns, backoff, initial_delay_ns,
                maximum_delay_ns, maximum_attempts, requirements, anchor, owed, retry_at, failed_attempts, finished,
                current_run_id, due_at, requirement_mask, sequence, owner, planned_at, calendar, grid_offset_ns,
                previous_window_at, tags, input, cancelled_at, prerequisites, chain, wakes_system, failure_candidate)
            SELECT \(row.identifier), \(row.submittedAt), \(row.earliestBegin), \(row.intervalNanoseconds),
                \(row.flexNanoseconds), \(row.catchUp), \(Int64(row.catchUpMaximum)), \(row.randomizedDelayNanoseconds),
                \(row.maximumDurationNanoseconds), \(row.backoff), \(row.initialDelayNanoseconds),
                \(row.maximumDelayNanoseconds), \(Int64(row.maximumAttempts)), \(row.requirements), \(row.anchor),
                \(Int64(row.owed)), \(row.retryAt), \(Int64(row.failedAttempts)), \(row.finished), \(row.currentRunID),
                \(row.dueAt), \(row.requirementMask), nextval('overtime.submissions'), \(rowOwner), \(row.plannedAt),
                \(row.calendar), \(row.gridOffsetNanoseconds), \(row.previousWindowAt), \(row.tags),
                \(ByteBuffer(bytes: row.input)), \(row.cancelledAt), \(row.prerequisites),
                \(row.chain.map { ByteBuffer(bytes: $0) }), \(row.wakesSystem),
                -- Finished as submitted, with no attempt ending here: a candidate (schema 14).
                \(row.finished)
            -- Kept: a request of the identifier this instance sees, or a shared one another
            -- instance would see beside its own.
            WHERE \(!ifAbsent) OR NOT EXISTS (SELECT 1 FROM overtime.requests WHERE identifier = \(row.identifier)
                AND (\(unescaped: visible) OR \(rowOwner) = ''))
            ON CONFLICT (identifier, owner) \(unescaped: conflict)
            RETURNING identifier, has_dependents
            """)
        guard let first = written.first else { return false }
        if stored.plan.isFinished, try first.decode((String, Bool).self).1 {
            concludedWithDependents.withLockedValue { _ = $0.insert(row.identifier) }
        }
        if !stored.request.prerequisites.isEmpty { try await writeLinks(stored, connection) }
        if stored.request.wakesSystem { asksForWaking.withLockedValue { $0 = true } }
        return true
    }

    /// Inserts each of `requests` unless a request of its identifier is pending, by
    /// `statement` (``insertUnlessPendingStatement(_:)`` of them); returns the identifiers
    /// kept. A new row has no dependents yet: nothing concludes here.
    func insertUnlessPending(
        _ requests: [StoredRequest], _ statement: PostgresQuery, _ connection: PostgresConnection
    ) async throws -> Set<String> {
        guard !requests.isEmpty else { return [] }
        let written = Set(try await run(connection, statement).map { try $0.decode(String.self) })
        for stored in requests where written.contains(stored.request.identifier) {
            if !stored.request.prerequisites.isEmpty { try await writeLinks(stored, connection) }
            if stored.request.wakesSystem { asksForWaking.withLockedValue { $0 = true } }
        }
        return Set(requests.map(\.request.identifier)).subtracting(written)
    }

    /// The statement that inserts each of `requests` unless a request of its identifier is
    /// pending: all in one, arrays unnested, each taking the next submission number in turn;
    /// it returns the identifiers written.
    func insertUnlessPendingStatement(_ requests: [StoredRequest]) -> PostgresQuery {
        let rows = requests.map(RequestColumns.init)
        var v = UnnestedColumns()
        v.add("identifier", "text", rows.map(\.identifier))
        v.add("submitted_at", "bigint", rows.map(\.submittedAt))
        v.add("earliest_begin", rows.map(\.earliestBegin))
        v.add("interval_ns", rows.map(\.intervalNanoseconds))
        v.add("flex_ns", rows.map(\.flexNanoseconds))
        v.add("catch_up", "text", rows.map(\.catchUp))
        v.add("catch_up_maximum", "bigint", rows.map { Int64($0.catchUpMaximum) })
        v.add("randomized_delay_ns", "bigint", rows.map(\.randomizedDelayNanoseconds))
        v.add("maximum_duration_ns", "bigint", rows.map(\.maximumDurationNanoseconds))
        v.add("backoff", "text", rows.map(\.backoff))
        v.add("initial_delay_ns", "bigint", rows.map(\.initialDelayNanoseconds))
        v.add("maximum_delay_ns", "bigint", rows.map(\.maximumDelayNanoseconds))
        v.add("maximum_attempts", "bigint", rows.map { Int64($0.maximumAttempts) })
        v.add("requirements", "text", rows.map(\.requirements))
        v.add("anchor", "bigint", rows.map(\.anchor))
        v.add("owed", "bigint", rows.map { Int64($0.owed) })
        v.add("retry_at", rows.map(\.retryAt))
        v.add("failed_attempts", "bigint", rows.map { Int64($0.failedAttempts) })
        v.add("finished", "boolean", rows.map(\.finished))
        v.add("current_run_id", rows.map(\.currentRunID))
        v.add("due_at", rows.map(\.dueAt))
        v.add("requirement_mask", "bigint", rows.map(\.requirementMask))
        v.add("planned_at", rows.map(\.plannedAt))
        v.add("calendar", rows.map(\.calendar))
        v.add("grid_offset_ns", "bigint", rows.map(\.gridOffsetNanoseconds))
        v.add("previous_window_at", rows.map(\.previousWindowAt))
        v.add("tags", "text", rows.map(\.tags))
        v.add("input", bytes: rows.map(\.input))
        v.add("cancelled_at", rows.map(\.cancelledAt))
        v.add("prerequisites", "text", rows.map(\.prerequisites))
        v.add("chain", bytes: rows.map(\.chain))
        v.add("wakes_system", "boolean", rows.map(\.wakesSystem))
        v.unnest("row_owner", "text", requests.map { rowOwner(of: $0) })
        v.write("owner", "v.row_owner")
        v.write("sequence", "v.sequence")
        // Finished as submitted, with no attempt ending here: a candidate (schema 14).
        v.write("failure_candidate", "v.finished")
        // The numbers are drawn in the batch's order, in the scan of the arrays, before the
        // insert's anti-join, whose plan may take the rows in any order.
        let sql = """
            WITH v AS MATERIALIZED (SELECT *, nextval('overtime.submissions') AS sequence FROM \(v.source))
            INSERT INTO overtime.requests AS requests (\(v.columns))
            SELECT \(v.expressions) FROM v
            -- Kept: a request of the identifier this instance sees, or a shared one another
            -- instance would see beside its own.
            WHERE NOT EXISTS (SELECT 1 FROM overtime.requests WHERE identifier = v.identifier
                AND (\(visible) OR v.row_owner = ''))
            ON CONFLICT (identifier, owner) DO NOTHING
            RETURNING identifier
            """
        return PostgresQuery(unsafeSQL: sql, binds: v.bindings)
    }

    /// Writes which prerequisites `stored` waits on (those it no longer waits on go), and
    /// marks each as waited on — under its row lock, so that an instance ending it at the
    /// same time reads the mark once this commits, or this reads it ended (and the
    /// scheduler decides the link again after the commit).
    func writeLinks(_ stored: StoredRequest, _ connection: PostgresConnection) async throws {
        let identifier = stored.request.identifier
        let waiting = (stored.chain?.waitingOn ?? []).sorted()
        _ = try await run(connection, "DELETE FROM overtime.prerequisites WHERE identifier = \(identifier)")
        guard !waiting.isEmpty else { return }
        _ = try await run(
            connection,
            """
            INSERT INTO overtime.prerequisites (prerequisite, identifier)
                SELECT unnest(\(waiting)::text[]), \(identifier) ON CONFLICT DO NOTHING
            """)
        _ = try await run(
            connection,
            """
            UPDATE overtime.requests SET has_dependents = true
                WHERE identifier = ANY(\(waiting)) AND owner = '' AND NOT has_dependents
            """)
    }

    /// Notes the requests `rows` (identifier, has_dependents) finished that others wait on.
    func noteConcluded(_ rows: PostgresQueryResult) throws {
        var linked: [String] = []
        for row in rows {
            let (identifier, waitedOn) = try row.decode((String, Bool).self)
            if waitedOn { linked.append(identifier) }
        }
        guard !linked.isEmpty else { return }
        concludedWithDependents.withLockedValue { $0.formUnion(linked) }
    }

    /// The owner column of a request's row: this instance's name for a per-instance
    /// request, empty for a shared one.
    func rowOwner(of stored: StoredRequest) -> String {
        owner(of: stored.request.scope)
    }

    /// The owner column of a row in `scope`.
    func owner(of scope: RequestScope) -> String {
        scope == .perInstance ? owner : ""
    }

    /// A request's plan to write, with the run it starts (`start`) or the attempt whose end
    /// it records (`ending`).
    struct PlanWrite {
        let stored: StoredRequest
        let start: RunRecord?
        let ending: RunRecord?
        /// How late the run `start` starts is (from its due time), when it was due.
        var lateness: Duration? = nil
    }

    /// Which rows a plan may be written to.
    enum PlanCondition {
        /// The row, whatever holds it (a lapsed claim taken over in the same transaction).
        case any
        /// Only while this instance holds the run whose end is recorded.
        case ending
        /// Only an idle row this instance claimed: the write starts a run and extends the claim.
        case claimedHere
        /// Only a row still at the plan given, idle, unfinished and not claimed elsewhere:
        /// a correction made from that plan (one write at a time: the plan is one).
        case unchanged(PlanState)
    }

    /// `NULL` in the arrays below: postgres-nio encodes arrays of non-optional values only.
    static let none = Int64.min

    /// Writes where requests' schedules stand and their runs in progress, all in one
    /// statement (arrays unnested), on the rows `condition` allows; the identifiers written.
    ///
    /// Each row is named by its whole primary key (identifier and owner), not by the
    /// visibility predicate: the planner prices that predicate at a default 0.5 % of rows,
    /// took the instance's claimed rows for one row, and joined them in a nested loop over
    /// the unnested arrays (256 × 256 comparisons, 190–280 ms per batch of 256).
    func writePlans(_ writes: [PlanWrite], _ condition: PlanCondition, _ connection: PostgresConnection)
        async throws -> Set<String>
    {
        guard !writes.isEmpty else { return [] }
        var bindings = PostgresBindings()
        let sql = planUpdate(writes, condition, &bindings)
        let result = try await run(connection, PostgresQuery(unsafeSQL: sql, binds: bindings))
        return Set(try result.map { try $0.decode((String, String).self).0 })
    }

    /// The `UPDATE` ``writePlans(_:_:_:)`` runs, its values appended to `bindings`;
    /// returns the identifier and owner of each row written.
    func planUpdate(_ writes: [PlanWrite], _ condition: PlanCondition, _ bindings: inout PostgresBindings)
        -> String
    {
        let base = bindings.count
        func parameter(_ position: Int) -> String { "$\(base + position)" }
        let rows = writes.map { RequestColumns($0.stored) }
        let none = Self.none
        bindings.append(rows.map(\.identifier))
        bindings.append(rows.map(\.anchor))
        bindings.append(rows.map { Int64($0.owed) })
        bindings.append(rows.map { $0.retryAt ?? none })
        bindings.append(rows.map { Int64($0.failedAttempts) })
        bindings.append(rows.map(\.finished))
        bindings.append(rows.map { $0.currentRunID ?? none })
        bindings.append(rows.map { $0.dueAt ?? none })
        bindings.append(rows.map(\.running))
        bindings.append(writes.map { $0.start?.runID ?? none })
        bindings.append(writes.map { $0.start.map { Int64($0.attempt) } ?? none })
        bindings.append(writes.map { $0.start?.startedAt.nanosecondsSinceEpoch ?? none })
        bindings.append(writes.map { $0.ending?.runID ?? none })
        bindings.append(writes.map { $0.ending.map { Int64($0.attempt) } ?? none })
        bindings.append(none)
        bindings.append(instance)
        bindings.append(claimSeconds)
        bindings.append(writes.map { rowOwner(of: $0.stored) })
        bindings.append(rows.map { $0.plannedAt ?? none })
        bindings.append(rows.map { $0.previousWindowAt ?? none })
        // A row that finishes other than with a success ended in this write is a candidate
        // for the page of what failed for good (schema version 14).
        bindings.append(writes.map { $0.ending?.result == .succeeded })
        // A row finished meanwhile was cancelled by another instance (this one would have
        // ended or started nothing of it): an end or a start planned before then would
        // write its next time over the cancellation, and the request would run on. Left
        // out, the end frees the row (`freed` in ``recordRuns(_:_:_:notifying:_:)``) and the
        // start is refused, its claim released.
        let (claim, rowCondition) =
            switch condition {
            case .any: ("claimed_by = NULL, claim_until = NULL", "true")
            case .ending:
                (
                    "claimed_by = NULL, claim_until = NULL",
                    "r.running AND r.active_run_id = v.ending_run AND r.active_attempt = v.ending_attempt"
                        + " AND r.claimed_by = \(parameter(16)) AND NOT r.finished"
                )
            case .claimedHere:
                // A row this instance claimed as due, or one no instance holds a claim on: a
                // run started now by an operator (`run ID`, `run-tag`) is not due, so not
                // claimed beforehand. The update is the claim: of two instances starting one
                // row, the second finds it running and is refused.
                (
                    "claimed_by = \(parameter(16)), claim_until = now() + make_interval(secs => \(parameter(17)))",
                    "NOT r.running AND NOT r.finished AND (r.claimed_by = \(parameter(16)) OR r.claimed_by IS NULL"
                        + " OR r.claim_until < now())"
                )
            case .unchanged(let from):
                unchangedCondition(from, base: base, &bindings)
            }
        let none15 = parameter(15)
        return """
            UPDATE overtime.requests AS r SET anchor = v.anchor, owed = v.owed, retry_at = NULLIF(v.retry_at, \(none15)),
                failed_attempts = v.failed_attempts, finished = v.finished,
                failure_candidate = v.finished AND NOT v.succeeded,
                current_run_id = NULLIF(v.current_run_id, \(none15)), due_at = NULLIF(v.due_at, \(none15)),
                running = v.running, active_run_id = NULLIF(v.run, \(none15)),
                active_attempt = NULLIF(v.attempt, \(none15)), active_started_at = NULLIF(v.started, \(none15)),
                last_started_at = coalesce(NULLIF(v.started, \(none15)), r.last_started_at),
                planned_at = NULLIF(v.planned, \(none15)), previous_window_at = NULLIF(v.previous_window, \(none15)),
                \(claim)
            FROM unnest(\((1...14).map { parameter($0) + Self.arrayTypes[$0 - 1] }.joined(separator: ", ")),
                \(parameter(18))::text[], \(parameter(19))::bigint[], \(parameter(20))::bigint[],
                \(parameter(21))::boolean[])
                AS v(identifier, anchor, owed, retry_at, failed_attempts, finished, current_run_id, due_at, running,
                    run, attempt, started, ending_run, ending_attempt, owner, planned, previous_window, succeeded)
            WHERE r.identifier = v.identifier AND r.owner = v.owner AND \(rowCondition)
            RETURNING r.identifier, r.owner, r.finished AND r.has_dependents AS linked
            """
    }

    /// The claim left as it is, and the condition of ``PlanCondition/unchanged(_:)``: the
    /// row still at `from` (its values appended to `bindings` as parameters 22 to 26 of
    /// ``planUpdate(_:_:_:)``), idle, unfinished, and claimed by no other instance.
    private func unchangedCondition(_ from: PlanState, base: Int, _ bindings: inout PostgresBindings)
        -> (String, String)
    {
        func parameter(_ position: Int) -> String { "$\(base + position)" }
        bindings.append(from.anchor.nanosecondsSinceEpoch)
        bindings.append(Int64(from.owed))
        bindings.append(from.retryAt?.nanosecondsSinceEpoch ?? Self.none)
        bindings.append(Int64(from.failedAttempts))
        bindings.append(from.plannedTime?.nanosecondsSinceEpoch ?? Self.none)
        let none = parameter(15)
        return (
            "claim_until = r.claim_until",
            """
            NOT r.running AND NOT r.finished AND r.anchor = \(parameter(22)) AND r.owed = \(parameter(23))
                AND coalesce(r.retry_at, \(none)) = \(parameter(24)) AND r.failed_attempts = \(parameter(25))
                AND coalesce(r.planned_at, \(none)) = \(parameter(26))
                AND (r.claimed_by IS NULL OR r.claimed_by = \(parameter(16)) OR r.claim_until < now())
            """
        )
    }

    /// The casts of the first 14 arrays ``planUpdate(_:_:_:)`` unnests.
    static let arrayTypes = [
        "::text[]", "::bigint[]", "::bigint[]", "::bigint[]", "::bigint[]", "::boolean[]", "::bigint[]", "::bigint[]",
        "::boolean[]", "::bigint[]", "::bigint[]", "::bigint[]", "::bigint[]", "::bigint[]",
    ]

    /// Records ended attempts, each in the history of its row's owner (`owners`), all in
    /// one statement; an attempt already recorded (taken over as interrupted by another
    /// instance) is left as it is.
    func insertHistory(
        _ records: [RunRecord], owners: [String], instance: String, _ connection: PostgresConnection
    ) async throws {
        guard !records.isEmpty else { return }
        var bindings = PostgresBindings()
        let insert = historyInsert(records, owners: owners, instance: instance, &bindings)
        let sql = "WITH recorded AS (\(insert)) \(Self.activityCount(of: "recorded"))"
        _ = try await run(connection, PostgresQuery(unsafeSQL: sql, binds: bindings))
    }

    /// The `INSERT` ``insertHistory(_:owners:instance:_:)`` runs, its values appended to
    /// `bindings`.
    func historyInsert(
        _ records: [RunRecord], owners: [String], instance: String, _ bindings: inout PostgresBindings
    ) -> String {
        let base = bindings.count
        func parameter(_ position: Int) -> String { "$\(base + position)" }
        let none = Self.none
        bindings.append(records.map(\.identifier))
        bindings.append(records.map(\.runID))
        bindings.append(records.map { Int64($0.attempt) })
        bindings.append(records.map(\.startedAt.nanosecondsSinceEpoch))
        bindings.append(records.map { $0.endedAt?.nanosecondsSinceEpoch ?? none })
        bindings.append(records.map(\.result.description))
        bindings.append(records.map { $0.stopReason ?? "" })
        bindings.append(records.map { $0.stopReason != nil })
        bindings.append(owners)
        bindings.append(none)
        bindings.append(instance)
        bindings.append(records.map { ByteBuffer(bytes: $0.output ?? []) })
        bindings.append(records.map { $0.output != nil })
        return """
            INSERT INTO overtime.history (identifier, run_id, attempt, started_at, ended_at, result, stop_reason, instance,
                owner, output)
            SELECT identifier, run_id, attempt, started_at, NULLIF(ended_at, \(parameter(10))),
                result, CASE WHEN has_reason THEN stop_reason END, \(parameter(11)), owner,
                CASE WHEN has_output THEN output END
            FROM unnest(\(parameter(1))::text[], \(parameter(2))::bigint[], \(parameter(3))::bigint[],
                \(parameter(4))::bigint[], \(parameter(5))::bigint[], \(parameter(6))::text[], \(parameter(7))::text[],
                \(parameter(8))::boolean[], \(parameter(9))::text[], \(parameter(12))::bytea[], \(parameter(13))::boolean[])
                AS v(identifier, run_id, attempt, started_at, ended_at, result, stop_reason, has_reason, owner, output,
                    has_output)
            ON CONFLICT (identifier, run_id, attempt) DO NOTHING
            RETURNING started_at, result
            """
    }

    /// A minute of ``activityMinute`` nanoseconds: the unit the activity table counts in.
    static let activityMinute: Int64 = 60_000_000_000

    /// The results the activity table counts as failed, as an SQL array.
    static let activityFailures = "'{\(ScheduleOverview.failureResults.joined(separator: ","))}'::text[]"

    /// Counts the attempts `recorded` (the history insert's `RETURNING started_at, result`:
    /// the rows written, not those already there) in the activity table, in this
    /// connection's rows: one row a minute they started in.
    static func activityCount(of recorded: String) -> String {
        """
        INSERT INTO overtime.activity (minute, shard, ended, failed)
            SELECT started_at / \(activityMinute), pg_backend_pid(), count(*),
                count(*) FILTER (WHERE result = ANY(\(activityFailures)))
            FROM \(recorded) GROUP BY 1
        ON CONFLICT (minute, shard) DO UPDATE
            SET ended = overtime.activity.ended + excluded.ended, failed = overtime.activity.failed + excluded.failed
        """
    }

    /// Commits are durable when the database says so (`synchronous_commit`).
    func sync() throws(ScheduleStoreError) {}
}
