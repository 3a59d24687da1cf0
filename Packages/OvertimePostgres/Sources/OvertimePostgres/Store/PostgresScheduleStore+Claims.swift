// The PostgreSQL store's claims: due requests claimed in one statement, lapsed claims
// taken over, and, on the event loop, claims renewed and other instances heard.

import Logging
import Metrics
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Overtime
@_spi(ScheduleStore) import OvertimeScheduler
import PostgresNIO

extension PostgresScheduleStore {
    /// Claims them: first takes the runs whose instance stopped renewing their claims
    /// (recorded as interrupted, retried), then the due requests no other instance claims,
    /// on both clocks (the database's and the scheduler's `now`), earliest first.
    ///
    /// The claim is one statement (one round trip on the way from due time to start); the
    /// lapsed claims are looked for only once one may have ended, as the last
    /// ``nextDue(after:unmet:)`` saw the claims held elsewhere.
    func due(at now: WallClockInstant, unmet: Int64, limit: Int) async throws(ScheduleStoreError) -> [StoredRequest] {
        try await reclaimLapsedRunsIfAnyMayHaveEnded(now)
        return try await using { [self] connection in
            // A claim need not survive a crash of the database: a start is written only
            // where the claim is still this instance's, so a claim lost is a start refused
            // (its request claimed again), never a run in two places. Not waiting for the
            // log's flush (`set_config` local to the statement's own transaction) takes one
            // flush off the way from due time to start.
            let rows = try await run(
                connection,
                """
                WITH due AS (
                    SELECT identifier, owner FROM overtime.requests
                    WHERE due_at <= least(\(now.nanosecondsSinceEpoch), \(unescaped: Self.databaseNow)) AND NOT running
                        AND \(unescaped: visibleInDueOrder)
                        AND (requirement_mask = 0 OR (requirement_mask & \(unmet)) = 0)
                        AND (claimed_by IS NULL OR claimed_by = \(instance) OR claim_until < now())
                    ORDER BY due_at, sequence LIMIT \(limit) FOR UPDATE SKIP LOCKED),
                unflushed AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true))
                UPDATE overtime.requests AS r SET claimed_by = \(instance),
                    claim_until = now() + make_interval(secs => \(claimSeconds)),
                    current_run_id = coalesce(r.current_run_id, nextval('overtime.run_ids'))
                FROM due, unflushed WHERE r.identifier = due.identifier AND r.owner = due.owner
                RETURNING \(unescaped: Self.prefixed("r")), r.due_at, r.sequence
                """)
            var claimed: [(StoredRequest, Int64, Int64)] = []
            for row in rows {
                let cell = NamedCells(row)
                claimed.append((try Self.request(cell), try cell("due_at"), try cell("sequence")))
            }
            let returned = claimed.count < limit ? claimed.map(\.0.request.identifier) : nil
            lastClaimWithRoom.withLockedValue { $0 = returned }
            return claimed.sorted { ($0.1, $0.2) < ($1.1, $1.2) }.map(\.0)
        }
    }

    /// Takes over the runs whose claims ended, once the earliest claim held elsewhere may
    /// have ended (as ``nextDue(after:unmet:)`` last saw them, or when not known).
    func reclaimLapsedRunsIfAnyMayHaveEnded(_ now: WallClockInstant) async throws(ScheduleStoreError) {
        guard foreignClaimEnd.withLockedValue({ $0.map { $0 <= now.nanosecondsSinceEpoch } ?? true }) else { return }
        try await transaction { [self] connection in
            _ = try await run(connection, "SET LOCAL synchronous_commit TO OFF")  // as a claim
            try await reclaimLapsedRuns(connection)
        }
        // Not looked for again until the next look for the next due time, which follows in
        // the same cycle and reads the claims held elsewhere, also those taken meanwhile.
        foreignClaimEnd.withLockedValue { $0 = .max }
    }

    /// Runs whose claims ended without renewal (their instance died or lost the database):
    /// each attempt is recorded as interrupted and retried as the planner says.
    func reclaimLapsedRuns(_ connection: PostgresConnection) async throws {
        let lapsed = try await run(
            connection,
            """
            SELECT \(unescaped: Self.columns), active_run_id, active_attempt, active_started_at, claimed_by,
                \(unescaped: Self.databaseNow) AS database_now
            FROM overtime.requests WHERE running AND claim_until < now() AND \(unescaped: visible)
            LIMIT 100 FOR UPDATE SKIP LOCKED
            """)
        for row in lapsed {
            let cell = NamedCells(row)
            var stored = try Self.request(cell)
            let identifier = stored.request.identifier
            let holder = try cell("claimed_by", as: String?.self) ?? "?"
            let now = WallClockInstant(nanosecondsSinceEpoch: try cell("database_now"))
            let rowOwner: String = try cell("owner")
            guard let runID = try cell("active_run_id", as: Int64?.self),
                let attempt = try cell("active_attempt", as: Int64?.self)
            else {
                // Its request was replaced while it ran: only the identifier is freed.
                _ = try await run(
                    connection,
                    """
                    UPDATE overtime.requests SET running = false, claimed_by = NULL, claim_until = NULL
                    WHERE identifier = \(identifier) AND owner = \(rowOwner)
                    """)
                continue
            }
            let twice =
                try await run(
                    connection,
                    """
                    SELECT 1 FROM overtime.history WHERE identifier = \(identifier) AND run_id = \(runID)
                        AND attempt = \(attempt - 1) AND result = 'interrupted'
                    """
                ).first != nil
            let record = RunRecord(
                identifier: identifier, runID: runID, attempt: Int(attempt),
                startedAt: WallClockInstant(nanosecondsSinceEpoch: try cell("active_started_at", as: Int64?.self) ?? 0),
                endedAt: now, result: .interrupted, stopReason: "its claim ended: \(holder) stopped renewing it")
            try await insertHistory([record], owners: [rowOwner], instance: holder, connection)
            reclaimedRuns.increment()
            stored.interrupt(runID: runID, attempt: Int(attempt), twice: twice, now: now)
            stored.isRunning = false
            _ = try await writePlans([PlanWrite(stored: stored, start: nil, ending: nil)], .any, connection)
            logger.notice(
                "took over a run whose claim ended: \(twice ? "counted as failed" : "retried now")",
                metadata: ["task": "\(identifier)", "run": "\(runID)", "attempt": "\(attempt)", "holder": "\(holder)"])
        }
    }

    /// The next due request and, in the same statement, when a claim held elsewhere may
    /// end (the earlier of the two is returned): the claim is taken over then if its holder
    /// stopped renewing it, and ``due(at:unmet:limit:)`` looks for lapsed claims from then on.
    ///
    /// Such a time must come no later than every claim held elsewhere, also those this read
    /// does not see yet: nothing tells of a start, and a run whose worker died unseen would be
    /// left until the next change. A request due now that this instance could run but did
    /// not claim:
    /// - claimed elsewhere and not started yet: looked at again when that claim ends;
    /// - unclaimed (or its claim lapsed) though the last claim had room: it was passed over —
    ///   its row locked for a moment (maybe by another instance claiming it), or due only
    ///   since the claim's statement read the database's clock — so looked at again soon
    ///   (``passedOverRecheck``), not a claim's length later;
    /// - otherwise (this instance at its limit) it is claimed elsewhere or will be, and such a
    ///   claim ends no sooner than a claim's duration from now (give or take the moments
    ///   between a claim and this read); an end here looks again anyway.
    ///
    /// The due index is walked in order (with a plain `LIMIT 1` the planner read the table
    /// from its start: 20 ms past a burst's dead rows).
    func nextDue(after now: WallClockInstant, unmet: Int64) async throws(ScheduleStoreError) -> (
        identifier: String, at: WallClockInstant
    )? {
        // Also here, not only before a claim: an instance that claims nothing (at its limit)
        // still takes over what dead instances held.
        try await reclaimLapsedRunsIfAnyMayHaveEnded(now)
        let lastClaim = lastClaimWithRoom.withLockedValue { lastClaim in
            defer { lastClaim = nil }
            return lastClaim
        }
        let passedOver = lastClaim == nil ? configuration.claimDuration.nanosecondsClamped : Self.passedOverRecheck
        return try await using { [self] connection in
            let rows = try await run(
                connection,
                """
                (SELECT false, identifier, due_at FROM overtime.requests
                    WHERE NOT running AND due_at > least(\(now.nanosecondsSinceEpoch), \(unescaped: Self.databaseNow))
                        AND \(unescaped: visibleInDueOrder)
                        AND (claimed_by IS NULL OR claimed_by = \(instance) OR claim_until < now())
                    ORDER BY due_at, sequence LIMIT 1)
                UNION ALL
                (SELECT true, identifier, (extract(epoch FROM claim_until) * 1000000000)::bigint FROM overtime.requests
                    WHERE running AND claimed_by <> \(instance) AND \(unescaped: visible)
                    ORDER BY claim_until LIMIT 1)
                UNION ALL
                (SELECT true, identifier, \(unescaped: Self.databaseNow) + \(passedOver) FROM overtime.requests
                    WHERE NOT running AND due_at <= least(\(now.nanosecondsSinceEpoch), \(unescaped: Self.databaseNow))
                        AND \(unescaped: visibleInDueOrder)
                        AND (requirement_mask = 0 OR (requirement_mask & \(unmet)) = 0)
                        AND (claimed_by IS NULL OR (claimed_by <> \(instance) AND claim_until < now()))
                        AND NOT (identifier = ANY(\(lastClaim ?? [])))
                    ORDER BY due_at, sequence LIMIT 1)
                UNION ALL
                (SELECT true, identifier, (extract(epoch FROM claim_until) * 1000000000)::bigint FROM overtime.requests
                    WHERE NOT running AND due_at <= least(\(now.nanosecondsSinceEpoch), \(unescaped: Self.databaseNow))
                        AND \(unescaped: visibleInDueOrder)
                        AND (requirement_mask = 0 OR (requirement_mask & \(unmet)) = 0)
                        AND claimed_by <> \(instance) AND claim_until >= now()
                    ORDER BY due_at, sequence LIMIT 1)
                """)
            var next: (identifier: String, at: WallClockInstant)?
            var claimEnd = Int64.max
            for row in rows {
                let (heldElsewhere, identifier, at) = try row.decode((Bool, String, Int64).self)
                if heldElsewhere { claimEnd = min(claimEnd, at) }
                if next == nil || at < next!.at.nanosecondsSinceEpoch {
                    next = (identifier, WallClockInstant(nanosecondsSinceEpoch: at))
                }
            }
            foreignClaimEnd.withLockedValue { $0 = claimEnd }
            return next
        }
    }

    // MARK: Renewing claims and hearing of changes (on the event loop)

    func start(_ events: ScheduleStoreEvents) {
        background.withLockedValue { $0.events = events }
        connectBackground()
    }

    var claimSeconds: Double { Self.seconds(configuration.claimDuration) }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// Connects the listening connection (again, after a loss, every reconnect interval).
    func connectBackground() {
        let proceed = background.withLockedValue { background in
            guard !background.closed, background.connection == nil, !background.connecting else { return false }
            background.connecting = true
            return true
        }
        guard proceed else { return }
        // Weakly held from the loop's callbacks: a store nobody holds any more closes (its
        // deinit), instead of listening and reconnecting for good from its own loop.
        PostgresConnection.connect(
            on: loop, configuration: configuration.connection(warn: { logger.warning("\($0)") }), id: 2, logger: logger
        ).whenComplete { [weak self] result in
            switch result {
            case .success(let connection):
                guard let self else {
                    connection.close().whenComplete { _ in }
                    return
                }
                let events = background.withLockedValue { background -> ScheduleStoreEvents? in
                    background.connecting = false
                    // Closed while connecting: this connection is nobody's.
                    guard !background.closed else { return nil }
                    background.connection = connection
                    return background.events
                }
                guard let events else {
                    connection.close().whenComplete { _ in }
                    return
                }
                connection.addListener(channel: Self.channel) { [instance] _, notification in
                    if notification.payload != instance { events.changed() }
                }
                listenConnected.record(1)
                connection.closeFuture.whenComplete { [weak self] _ in
                    guard let self else { return }
                    listenConnected.record(0)
                    let closed = background.withLockedValue { background in
                        background.connection = nil
                        return background.closed
                    }
                    guard !closed else { return }
                    logger.warning("lost the schedule database's notifications: connecting again")
                    reconnectLater()
                }
                // Whatever was notified while not listening: decide again.
                events.changed()
                // A renewal missed while the connection was down is made now, not at the
                // next turn: by then the claims may have lapsed though the database is back.
                if background.withLockedValue({ !$0.held.isEmpty && !$0.renewed }) { _ = renewClaims() }
            case .failure(let error):
                guard let self else { return }
                let closed = background.withLockedValue { background in
                    background.connecting = false
                    return background.closed
                }
                guard !closed else { return }
                logger.warning("cannot listen to the schedule database: \(Self.describe(error))")
                reconnectLater()
            }
        }
    }

    /// Connects the listening connection again after the reconnect interval, the schedule
    /// read again then (what was notified meanwhile is lost); one such attempt waits at a
    /// time, however many losses and failed attempts asked for it.
    func reconnectLater() {
        let interval = TimeAmount.nanoseconds(configuration.reconnectInterval.nanosecondsClamped)
        background.withLockedValue { state in
            guard state.reconnect == nil, !state.closed else { return }
            state.reconnect = loop.scheduleTask(in: interval) { [weak self] in
                guard let self else { return }
                let events = background.withLockedValue { background in
                    background.reconnect = nil
                    return background.closed ? nil : background.events
                }
                events?.changed()
                connectBackground()
            }
        }
    }

    /// Renews this instance's claims every third of their duration while it holds any;
    /// runs whose claims could not be renewed in time are told to stop.
    func renewClaimsWhileHeld() {
        let every = TimeAmount.nanoseconds(configuration.claimDuration.nanosecondsClamped / 3)
        background.withLockedValue { background in
            guard background.renewal == nil, !background.closed else { return }
            background.renewal = loop.scheduleRepeatedAsyncTask(initialDelay: every, delay: every) {
                [weak self, loop] _ in
                self?.renewClaims() ?? loop.makeSucceededVoidFuture()
            }
        }
    }

    /// Nothing to renew: no timer either, so that an idle instance does not wake.
    ///
    /// NIO's epoll selector leaves its timerfd set for a cancelled task (it sets it again
    /// only for an earlier deadline), so the loop would still wake, at rest, when the
    /// renewal was due. A task that does nothing, due in a few milliseconds, moves the
    /// timerfd there; it fires while the instance is still busy, and then nothing is set.
    func stopRenewing(_ background: inout Background) {
        guard let renewal = background.renewal else { return }
        renewal.cancel()
        background.renewal = nil
        background.safeTimes?.cancel()
        background.safeTimes = nil
        loop.scheduleTask(in: .milliseconds(5)) {}
    }

    func renewClaims() -> EventLoopFuture<Void> {
        let loop = self.loop
        let (connection, held) = background.withLockedValue { background in
            if background.held.isEmpty { stopRenewing(&background) }
            return (background.connection, background.held)
        }
        guard !held.isEmpty else { return loop.makeSucceededVoidFuture() }
        let asked = Self.bootNanoseconds()
        // Until a renewal succeeds, each run is told to stop when its claim stops being
        // safe, not at a later renewal's turn: with a margin under a third of the claim
        // (the defaults: 5 s of 30 s), that turn comes as the claim ends.
        background.withLockedValue { $0.renewed = false }
        stopRunsAtTheirSafeTimes(checkedUntil: asked)
        guard let connection else {
            stopRunsLosingClaims(held)
            // Now, not at the reconnect interval: connected, it renews at once.
            connectBackground()
            return loop.makeSucceededVoidFuture()
        }
        let query: PostgresQuery = """
            UPDATE overtime.requests SET claim_until = now() + make_interval(secs => \(claimSeconds))
            WHERE running AND claimed_by = \(instance) RETURNING identifier
            """
        return connection.query(query, logger: logger).map { [self] result in
            let timer = background.withLockedValue { background in
                background.renewed = true
                defer { background.safeTimes = nil }
                return background.safeTimes
            }
            timer?.cancel()
            let renewed = Set(result.rows.compactMap { try? $0.decode(String.self) })
            let lost = background.withLockedValue { background -> [String] in
                var lost: [String] = []
                for identifier in background.held.keys {
                    if renewed.contains(identifier) {
                        background.held[identifier] = asked
                    } else if held[identifier] != nil {
                        lost.append(identifier)
                    }
                }
                return lost
            }
            if !lost.isEmpty {
                background.withLockedValue { $0.lost.formUnion(lost) }
                lostClaims.increment(by: lost.count)
                // Taken over or cancelled elsewhere: the run must not go on here.
                background.withLockedValue { $0.events }?.claimsLapsing(lost)
            }
        }.flatMapErrorThrowing { [self] error in
            logger.warning("cannot renew claims: \(Self.describe(error))")
            stopRunsLosingClaims(held)
        }
    }

    /// Until a renewal succeeds — while one goes unanswered (a server that hangs, a network
    /// that drops every packet), after one failed or found no connection — each run held
    /// here is told to stop when its claim stops being safe: the answer may never come (and
    /// the next renewal waits for it), and the next renewal's turn may come after the
    /// claim's end. Arms a timer, unless one is armed, for the earliest such time after
    /// `checkedUntil` (a run started meanwhile is looked for a third of a claim later at
    /// the latest); when it fires, the runs whose safe time passed since are told, and the
    /// next is armed.
    func stopRunsAtTheirSafeTimes(checkedUntil: Int64, again: Bool = false) {
        let deadline = safeClaimNanoseconds
        let now = Self.bootNanoseconds()
        background.withLockedValue { state in
            if again {  // the timer that fired, or one armed since (it would tell the same runs)
                state.safeTimes?.cancel()
                state.safeTimes = nil
            }
            // Nothing held, no timer: an idle instance does not wake.
            guard !state.renewed, !state.closed, !state.held.isEmpty, state.safeTimes == nil else { return }
            let next = state.held.values.map { $0 + deadline }.filter { $0 > checkedUntil }.min()
            let delay = min(max(0, (next ?? .max) - now), configuration.claimDuration.nanosecondsClamped / 3)
            state.safeTimes = loop.scheduleTask(in: .nanoseconds(delay)) { [weak self] in
                guard let self else { return }
                let now = Self.bootNanoseconds()
                let due = background.withLockedValue { background -> [String: Int64]? in
                    guard !background.renewed else { return nil }
                    return background.held.filter { $0.value + deadline > checkedUntil && $0.value + deadline <= now }
                }
                guard let due else { return }
                if !due.isEmpty {
                    logger.warning(
                        "the claims were not renewed in time: stopping the runs whose claims are no longer safe")
                    stopRunsLosingClaims(due)
                }
                stopRunsAtTheirSafeTimes(checkedUntil: now, again: true)
            }
        }
    }

    /// The runs whose claims end within the margin without a renewal are told to stop.
    func stopRunsLosingClaims(_ held: [String: Int64]) {
        let lapsing = Self.unsafe(held, now: Self.bootNanoseconds(), deadline: safeClaimNanoseconds)
        if !lapsing.isEmpty { lostClaims.increment(by: lapsing.count) }
        if !lapsing.isEmpty { background.withLockedValue { $0.events }?.claimsLapsing(lapsing) }
    }

    /// How long after its last renewal a claim is still safe to act under: its duration
    /// less the margin (a run stops before another instance may take it).
    var safeClaimNanoseconds: Int64 {
        configuration.claimDuration.nanosecondsClamped - configuration.claimMargin.nanosecondsClamped
    }

    /// The runs of `held` not renewed within `deadline` nanoseconds before `now`.
    static func unsafe(_ held: [String: Int64], now: Int64, deadline: Int64) -> [String] {
        held.filter { now - $0.value >= deadline }.map(\.key)
    }

    /// Nanoseconds on `CLOCK_BOOTTIME`: claims age while the machine sleeps too (the
    /// database's clock goes on), and a step of the wall clock does not renew them.
    static func bootNanoseconds() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_BOOTTIME, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }

    /// A pause of the process as long as the claim margin can outlast a claim.
    var stallThreshold: Duration? { configuration.claimMargin }

    /// The runs held here whose claims were taken, or not renewed within the claim's
    /// duration less its margin (the process was paused, or the database unreachable).
    func claimsNoLongerSafe() -> [String] {
        let now = Self.bootNanoseconds()
        let deadline = safeClaimNanoseconds
        return background.withLockedValue { background in
            Array(background.lost)
                + Self.unsafe(background.held, now: now, deadline: deadline)
                .filter { !background.lost.contains($0) }
        }
    }

    func isClaimHeld(_ identifier: String) -> Bool {
        let now = Self.bootNanoseconds()
        let deadline = safeClaimNanoseconds
        return background.withLockedValue { background in
            guard let renewed = background.held[identifier], !background.lost.contains(identifier) else { return false }
            return now - renewed < deadline
        }
    }
}
