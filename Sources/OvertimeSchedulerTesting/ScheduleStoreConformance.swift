// What every schedule store answers alike: the checks a store implementation runs to show
// it keeps the `ScheduleStore` contract (the SQLite store, the in-memory one, PostgreSQL).

import Logging
import Overtime
@_spi(ScheduleStore) import OvertimeScheduler

/// The `ScheduleStore` contract as checks, one or more per requirement, that any store
/// runs against a fresh, empty database of its kind:
///
/// ```swift
/// @Test(arguments: ScheduleStoreConformance.checks)
/// func keepsTheContract(_ check: ScheduleStoreConformance.Check) async throws {
///     try await ScheduleStoreConformance.run(check, on: .inMemory(InMemorySchedule()), now: now)
/// }
/// ```
///
/// Times are taken around the store's own clock (``ScheduleStore/wallClock(_:)`` of `now`),
/// due ones in the past of it, so that a store that compares due times on its server's
/// clock answers as one that takes them as given.
@_spi(ScheduleStore) public enum ScheduleStoreConformance {
    /// A check that did not hold: what was expected, and what the store answered.
    public struct Failure: Error, CustomStringConvertible {
        /// The check, what was expected, and what was found.
        public let description: String
    }

    /// One check of the contract.
    public struct Check: Sendable, CustomStringConvertible {
        /// What it checks, as a sentence's words.
        public let name: String
        let body: @Sendable (inout Subject) async throws -> Void

        /// The name.
        public var description: String { name }
    }

    /// Every check of the contract.
    public static let checks: [Check] = [
        Check(name: "a request reads back as it was written", body: readsBackAsWritten),
        Check(name: "pending requests come in submission order, finished ones left out", body: submissionOrder),
        Check(name: "a tag is matched whole", body: tagsMatchWhole),
        Check(name: "a conditional insert keeps a pending request and replaces a finished one", body: keepOrReplace),
        Check(name: "cancelling finishes every pending request and keeps it", body: cancelling),
        Check(name: "due requests come by time, then order, without unmet requirements", body: dueSelection),
        Check(name: "a run in progress is neither due nor next, and is in its history", body: runsInProgress),
        Check(name: "an end without a plan frees the identifier", body: detachedEnds),
        Check(name: "dependents and links left waiting on a finished prerequisite are found", body: links),
        Check(name: "the next waking start is the earliest of the waking requests not running", body: waking),
        Check(name: "waiting requests are counted as enqueued or blocked", body: waitingCounts),
        Check(name: "repeating plans ahead of a clock set back are found", body: plannedAhead),
        Check(name: "waits for a length after a threshold are found, earliest first", body: waitsForALength),
        Check(name: "a correction is written only over the plan it was made from", body: replans),
        Check(name: "the history comes newest first and is pruned by age and count", body: historyAndPruning),
        Check(
            name: "finished requests not cancelled come by identifier, a page at a time, by prefix and tag",
            body: finishedRequests),
        Check(name: "operators' actions read back newest first and are pruned by age", body: operatorActions),
        Check(name: "a store one scheduler owns recovers runs in progress as interrupted", body: recovery),
        Check(name: "a closed store refuses every call", body: closedStore),
    ]

    /// Runs `check` on a store of `database`, which must hold no schedule yet, opened at
    /// `now` (the runtime's wall clock); the store is closed after it.
    ///
    /// - Throws: ``Failure`` when the store answers otherwise; a ``ScheduleStoreError``
    ///   when it fails a call.
    public static func run(_ check: Check, on database: ScheduleDatabase, now: WallClockInstant) async throws {
        var subject = try await Subject(database: database, now: now)
        defer { subject.store.close() }
        do {
            try await check.body(&subject)
        } catch let failure as Failure {
            throw Failure(description: "\(check.name): \(failure.description)")
        }
    }

    /// The store a check works on, and what it builds its requests with.
    struct Subject {
        let database: ScheduleDatabase
        let now: WallClockInstant
        var store: any ScheduleStore
        /// The store's clock at `now`: every time in a check is around it.
        let base: WallClockInstant

        init(database: ScheduleDatabase, now: WallClockInstant) async throws {
            self.database = database
            self.now = now
            store = try await database.openStore(Self.context(now))
            base = store.wallClock(now)
        }

        static func context(_ now: WallClockInstant) -> ScheduleStoreContext {
            ScheduleStoreContext(
                now: now, wallClock: { now },
                logger: Logger(label: "overtime.conformance", factory: { _ in SwiftLogNoOpLogHandler() }))
        }

        /// Closes the store and opens it again (what a restart of the program does).
        mutating func reopen() async throws {
            store.close()
            store = try await database.openStore(Self.context(now))
        }

        func at(_ seconds: Int64) -> WallClockInstant { base + .seconds(seconds) }

        /// A one-shot request due `seconds` from the base time.
        func oneShot(
            _ identifier: String, dueIn seconds: Int64, _ change: (inout ScheduledTaskRequest) -> Void = { _ in }
        )
            -> StoredRequest
        {
            var request = ScheduledTaskRequest(identifier: identifier)
            request.earliestBegin = at(seconds)
            change(&request)
            return StoredRequest(
                request: request, plan: PlanState(anchor: at(seconds)), submittedAt: at(-3600), currentRunID: nil)
        }

        @discardableResult
        func write(_ writes: [RequestWrite]) async throws -> CommitRefusals {
            try await store.commit(ScheduleBatch(writes: writes), lastRunID: store.lastRunID())
        }

        func save(_ requests: StoredRequest...) async throws { try await write(requests.map { .save($0) }) }

        /// Starts a run of `identifier` as a scheduler does: claimed through
        /// ``ScheduleStore/due(at:unmet:limit:)``, its run ID the store's or the next.
        func start(_ identifier: String, at time: WallClockInstant) async throws -> (RunRecord, StoredRequest) {
            guard
                var stored = try await store.due(at: base, unmet: 0, limit: 1000).first(where: {
                    $0.request.identifier == identifier
                })
            else { throw Failure(description: "'\(identifier)' is not due to start") }
            let runID: Int64
            if let id = stored.currentRunID {
                runID = id
            } else if let id = try await store.newRunID() {
                runID = id
            } else {
                runID = try store.lastRunID() + 1
            }
            stored.currentRunID = runID
            stored.isRunning = true
            let record = RunRecord(
                identifier: identifier, runID: runID, attempt: 1, startedAt: time, endedAt: nil, result: .running,
                stopReason: nil)
            var batch = ScheduleBatch()
            batch.starts = [(record, stored)]
            let refused = try await store.commit(batch, lastRunID: runID)
            try await expect(refused.starts.isEmpty, "the start of '\(identifier)' was written", refused)
            return (record, stored)
        }

        /// Ends the run `started` with `result` at `time`, its plan `plan` (`nil`: detached).
        func end(
            _ started: (RunRecord, StoredRequest), _ result: RunResult, at time: WallClockInstant,
            plan: ((inout StoredRequest) -> Void)? = { $0.plan.isFinished = true }
        ) async throws -> RunRecord {
            let (start, stored) = started
            let record = RunRecord(
                identifier: start.identifier, runID: start.runID, attempt: start.attempt, startedAt: start.startedAt,
                endedAt: time, result: result, stopReason: nil)
            var written: StoredRequest?
            if let plan {
                var ended = stored
                ended.isRunning = false
                plan(&ended)
                written = ended
            }
            var batch = ScheduleBatch()
            batch.ends = [RunEnd(record: record, plan: written, scope: stored.request.scope)]
            _ = try await store.commit(batch, lastRunID: try store.lastRunID())
            return record
        }

        func identifiers(_ requests: [StoredRequest]) -> [String] { requests.map(\.request.identifier) }
    }

    static func expect(_ condition: Bool, _ what: String, _ found: @autoclosure () async throws -> Any = "")
        async throws
    {
        guard condition else {
            throw Failure(description: "expected \(what); found \((try? await found()).map { "\($0)" } ?? "an error")")
        }
    }

    // MARK: The checks

    static func readsBackAsWritten(_ subject: inout Subject) async throws {
        var plain = subject.oneShot("plain", dueIn: 60)
        plain.request.tags = ["nightly", "reports"]
        plain.request.input = Array("input\u{0}bytes".utf8)
        plain.request.requirements = [.network, .externalPower]
        plain.request.retry.maximumAttempts = 7
        plain.request.retry.backoff = .linear
        plain.request.retry.initialDelay = .seconds(3)
        plain.request.maximumDuration = .seconds(90)
        plain.request.wakesSystem = true
        var repeating = subject.oneShot("repeating", dueIn: 120)
        repeating.request.earliestBegin = nil
        repeating.request.repetition = Repetition(every: .seconds(600), flex: .seconds(60))
        repeating.request.catchUp = .every(maximum: 4)
        repeating.plan.owed = 2
        repeating.plan.failedAttempts = 1
        repeating.plan.retryAt = subject.at(30)
        repeating.plan.plannedTime = subject.at(-570)
        var calendar = subject.oneShot("calendar", dueIn: 0)
        calendar.request.earliestBegin = nil
        calendar.request.repetition = Repetition(on: try CalendarSchedule("*-*-* 02:30 UTC"), flex: .seconds(300))
        calendar.plan.gridOffset = .seconds(17)
        var linked = subject.oneShot("linked", dueIn: 10)
        linked.request.prerequisites = ["plain", "repeating"]
        linked.chain = ChainState(waitingOn: ["plain", "repeating"], handedOn: ["x": [1, 2]])
        try await subject.save(plain, repeating, calendar, linked)
        for written in [plain, repeating, calendar, linked] {
            let read = try await subject.store.request(written.request.identifier)
            try await expect(
                read?.request == written.request, "the request '\(written.request.identifier)'", read as Any)
            try await expect(
                read?.plan == written.plan, "the plan of '\(written.request.identifier)'", read?.plan as Any)
            try await expect(read?.submittedAt == written.submittedAt, "the submission time", read?.submittedAt as Any)
            try await expect(read?.chain == written.chain, "the chain", read?.chain as Any)
            try await expect(read?.isRunning == false && read?.cancelledAt == nil, "not running, not cancelled")
        }
        try await expect(try subject.store.request("absent") == nil, "no request for an identifier never written")
    }

    static func submissionOrder(_ subject: inout Subject) async throws {
        try await subject.save(
            subject.oneShot("c", dueIn: 10), subject.oneShot("a", dueIn: 20), subject.oneShot("b", dueIn: 30))
        var updated = subject.oneShot("c", dueIn: 40)
        updated.request.tags = ["new"]
        try await subject.save(updated)
        try await expect(
            subject.identifiers(try subject.store.pendingRequests()) == ["c", "a", "b"], "an update keeps its place",
            await subject.identifiers(try subject.store.pendingRequests()))
        try await expect(try subject.store.request("c")?.request.tags == ["new"], "the update written")
        try await subject.write([.cancel("a", at: subject.at(1))])
        try await expect(
            subject.identifiers(try subject.store.pendingRequests()) == ["c", "b"], "the cancelled one left out")
        try await expect(try subject.store.pendingCount() == 2, "two pending", try await subject.store.pendingCount())
        let cancelled = try await subject.store.request("a")
        try await expect(
            cancelled?.plan.isFinished == true && cancelled?.cancelledAt == subject.at(1),
            "the cancelled request kept, finished, with its time", cancelled as Any)
    }

    static func tagsMatchWhole(_ subject: inout Subject) async throws {
        let tagged = [("n1", ["nightly"]), ("n2", ["night"]), ("n3", ["nightly", "reports"]), ("n4", [])]
        try await subject.write(
            tagged.map { identifier, tags in
                .save(subject.oneShot(identifier, dueIn: 10) { $0.tags = Set(tags) })
            })
        try await expect(
            subject.identifiers(try subject.store.pendingRequests(tagged: "nightly")) == ["n1", "n3"], "n1, n3",
            await subject.identifiers(try subject.store.pendingRequests(tagged: "nightly")))
        try await expect(subject.identifiers(try subject.store.pendingRequests(tagged: "night")) == ["n2"], "n2 alone")
        try await expect(try subject.store.pendingRequests(tagged: "ightl").isEmpty, "no request for a part of a tag")
    }

    static func keepOrReplace(_ subject: inout Subject) async throws {
        try await subject.save(subject.oneShot("first", dueIn: 10), subject.oneShot("kept", dueIn: 20))
        var again = subject.oneShot("kept", dueIn: 99)
        again.request.tags = ["again"]
        var refused = try await subject.write([.insertUnlessPending(again)])
        try await expect(refused.kept == ["kept"] && refused.resubmitted.isEmpty, "kept", refused)
        try await expect(try subject.store.request("kept")?.request.tags == [], "the pending request unchanged")
        try await subject.write([.cancel("kept", at: subject.at(0))])
        refused = try await subject.write([.insertUnlessPending(again)])
        try await expect(refused.resubmitted == ["kept"] && refused.kept.isEmpty, "resubmitted", refused)
        let read = try await subject.store.request("kept")
        try await expect(
            read?.request.tags == ["again"] && read?.plan.isFinished == false && read?.cancelledAt == nil,
            "the new request in the finished one's place", read as Any)
        try await expect(
            subject.identifiers(try subject.store.pendingRequests()) == ["first", "kept"],
            "a new submission last in the order")
        refused = try await subject.write([.insertUnlessPending(subject.oneShot("new", dueIn: 5))])
        try await expect(refused.kept.isEmpty && refused.resubmitted.isEmpty, "an absent identifier inserted", refused)
    }

    static func cancelling(_ subject: inout Subject) async throws {
        try await subject.save(subject.oneShot("x", dueIn: -10), subject.oneShot("y", dueIn: 10))
        try await subject.write([.cancelAll(at: subject.at(2))])
        try await expect(try subject.store.pendingCount() == 0, "nothing pending")
        try await expect(try subject.store.due(at: subject.base, unmet: 0, limit: 10).isEmpty, "nothing due")
        try await expect(try subject.store.nextDue(after: subject.base, unmet: 0) == nil, "nothing next")
        for identifier in ["x", "y"] {
            try await expect(
                try subject.store.request(identifier)?.cancelledAt == subject.at(2), "\(identifier) kept, cancelled")
        }
        // A finished request is left as it is.
        try await subject.write([.cancel("x", at: subject.at(9))])
        try await expect(
            try subject.store.request("x")?.cancelledAt == subject.at(2), "the first cancellation's time kept")
    }

    static func dueSelection(_ subject: inout Subject) async throws {
        let network = RequestColumns(subject.oneShot("m", dueIn: 0) { $0.requirements = [.network] }).requirementMask
        try await subject.save(
            subject.oneShot("later", dueIn: 50), subject.oneShot("second", dueIn: -20),
            subject.oneShot("needs-network", dueIn: -30) { $0.requirements = [.network] },
            subject.oneShot("same-time", dueIn: -20), subject.oneShot("first", dueIn: -40))
        let all = await subject.identifiers(try subject.store.due(at: subject.base, unmet: 0, limit: 10))
        try await expect(all == ["first", "needs-network", "second", "same-time"], "by due time, then order", all)
        let met = await subject.identifiers(try subject.store.due(at: subject.base, unmet: network, limit: 10))
        try await expect(met == ["first", "second", "same-time"], "what needs the network left out", met)
        try await expect(
            subject.identifiers(try subject.store.due(at: subject.base, unmet: 0, limit: 2)) == [
                "first", "needs-network",
            ],
            "at most the limit")
        try await expect(try subject.store.dueWaiting(at: subject.base, on: network), "one due waits on the network")
        try await expect(try !subject.store.dueWaiting(at: subject.at(-35), on: network), "none due then waits on it")
        let next = try await subject.store.nextDue(after: subject.base, unmet: 0)
        // A store on a shared database may answer an earlier time to look again.
        try await expect(
            next.map { $0.at <= subject.at(50) } == true, "the next due time at the latest 'later''s", next as Any)
        if subject.store.holderName == nil {
            try await expect(next?.identifier == "later" && next?.at == subject.at(50), "'later' next", next as Any)
        }
    }

    static func runsInProgress(_ subject: inout Subject) async throws {
        try await subject.save(subject.oneShot("job", dueIn: -5), subject.oneShot("other", dueIn: 30))
        let before = try subject.store.lastRunID()
        let started = try await subject.start("job", at: subject.at(-1))
        if try await subject.store.newRunID() == nil {
            try await expect(try subject.store.lastRunID() >= started.0.runID, "the last run ID at least the run's")
        }
        try await expect(started.0.runID > before, "a new run ID", started.0.runID)
        try await expect(try subject.store.request("job")?.isRunning == true, "running")
        try await expect(
            try subject.store.due(at: subject.base, unmet: 0, limit: 10).isEmpty, "a running request is not due")
        let history = try await subject.store.history(identifier: "job", limit: 10)
        try await expect(
            history.count == 1 && history[0].result == .running && history[0].endedAt == nil
                && history[0].runID == started.0.runID,
            "the run in progress in the history", history)
        let ended = try await subject.end(started, .succeeded, at: subject.at(0))
        try await expect(try subject.store.history(identifier: "job", limit: 10) == [ended], "the ended attempt alone")
        let read = try await subject.store.request("job")
        try await expect(
            read?.isRunning == false && read?.plan.isFinished == true, "finished, not running", read as Any)
        try await expect(try subject.store.pendingCount() == 1, "one pending left")
    }

    static func detachedEnds(_ subject: inout Subject) async throws {
        try await subject.save(subject.oneShot("job", dueIn: -5))
        let started = try await subject.start("job", at: subject.at(-1))
        try await subject.write([.cancel("job", at: subject.at(0))])
        try await expect(try subject.store.request("job")?.isRunning == true, "a cancelled run still in progress")
        let ended = try await subject.end(started, .stopped, at: subject.at(1), plan: nil)
        let read = try await subject.store.request("job")
        try await expect(
            read?.isRunning == false && read?.cancelledAt == subject.at(0), "no longer running, still cancelled")
        try await expect(try subject.store.history(identifier: "job", limit: 10) == [ended], "its attempt recorded")
        let refused = try await subject.write([.insertUnlessPending(subject.oneShot("job", dueIn: -1))])
        try await expect(refused.resubmitted == ["job"], "the identifier free again", refused)
        try await expect(
            subject.identifiers(try subject.store.due(at: subject.base, unmet: 0, limit: 10)) == ["job"], "due")
    }

    static func links(_ subject: inout Subject) async throws {
        func link(_ identifier: String, on prerequisites: Set<String>) -> StoredRequest {
            var stored = subject.oneShot(identifier, dueIn: -1) { $0.prerequisites = prerequisites }
            stored.chain = ChainState(waitingOn: prerequisites)
            return stored
        }
        try await subject.save(
            subject.oneShot("p", dueIn: 10), subject.oneShot("q", dueIn: 10), link("c1", on: ["p"]),
            link("c2", on: ["p", "q"]), link("c3", on: ["q"]), link("orphan", on: ["never-submitted"]))
        try await expect(
            subject.identifiers(try subject.store.waitingOnFinishedPrerequisites()) == ["orphan"],
            "the link on a request no store has",
            await subject.identifiers(try subject.store.waitingOnFinishedPrerequisites()))
        try await expect(
            try subject.store.due(at: subject.base, unmet: 0, limit: 10).isEmpty, "a waiting link is not due")
        try await expect(try subject.store.dependents(of: []).isEmpty, "none of nothing")
        // Asked, as a scheduler asks, about the requests a commit just concluded.
        try await subject.write([.cancel("p", at: subject.at(0)), .cancel("q", at: subject.at(0))])
        let dependents = await subject.identifiers(try subject.store.dependents(of: ["p", "q"]))
        try await expect(dependents.sorted() == ["c1", "c2", "c3"], "each dependent once", dependents)
        let left = await subject.identifiers(try subject.store.waitingOnFinishedPrerequisites())
        try await expect(left == ["c1", "c2", "c3", "orphan"], "links on a finished prerequisite, in order", left)
    }

    static func waking(_ subject: inout Subject) async throws {
        try await expect(try subject.store.nextWakingStart() == nil, "none without waking requests")
        try await subject.save(
            subject.oneShot("plain", dueIn: 5), subject.oneShot("wakes-late", dueIn: 20) { $0.wakesSystem = true },
            subject.oneShot("wakes-early", dueIn: -3) { $0.wakesSystem = true })
        try await expect(try subject.store.nextWakingStart() == subject.at(-3), "the earliest waking one's")
        _ = try await subject.start("wakes-early", at: subject.at(-2))
        try await expect(try subject.store.nextWakingStart() == subject.at(20), "not the running one's")
        var quiet = subject.oneShot("wakes-late", dueIn: 20)
        quiet.request.wakesSystem = false
        try await subject.save(quiet)
        try await expect(try subject.store.nextWakingStart() == nil, "none once it no longer wakes the system")
    }

    static func waitingCounts(_ subject: inout Subject) async throws {
        var link = subject.oneShot("link", dueIn: -1) { $0.prerequisites = ["ahead"] }
        link.chain = ChainState(waitingOn: ["ahead"])
        try await subject.save(
            subject.oneShot("ahead", dueIn: 60), subject.oneShot("ahead-too", dueIn: 90),
            subject.oneShot("overdue", dueIn: -10), subject.oneShot("running", dueIn: -20), link)
        _ = try await subject.start("running", at: subject.at(-1))
        try await subject.write([.cancel("ahead-too", at: subject.at(0))])
        let counts = try await subject.store.waitingCounts(at: subject.base)
        try await expect(counts.enqueued == 1 && counts.blocked == 2, "1 enqueued, 2 blocked", counts)
    }

    static func plannedAhead(_ subject: inout Subject) async throws {
        func repeating(_ identifier: String, anchor seconds: Int64) -> StoredRequest {
            var stored = subject.oneShot(identifier, dueIn: seconds)
            stored.request.earliestBegin = nil
            stored.request.repetition = Repetition(every: .seconds(60), flex: .seconds(10))
            return stored
        }
        // The previous window opened at anchor − 60 − 10: ahead of the base time for the first only.
        try await subject.save(
            repeating("ahead", anchor: 600), repeating("on-time", anchor: 60), subject.oneShot("one-shot", dueIn: 900))
        let ahead = await subject.identifiers(try subject.store.plannedAheadOfClock(subject.base))
        try await expect(ahead == ["ahead"], "the interval planned ahead alone", ahead)
        try await expect(try subject.store.plannedAheadOfClock(subject.at(1000)).isEmpty, "none once the clock is past")
        // A calendar request whose previous time lies ahead of the clock is among them.
        var calendar = subject.oneShot("calendar", dueIn: 0)
        calendar.request.earliestBegin = nil
        calendar.request.repetition = Repetition(on: try CalendarSchedule("*-*-* *:00,30:00 UTC"))
        calendar.plan.anchor = subject.at(7200)
        try await subject.save(calendar)
        let withCalendar = await subject.identifiers(try subject.store.plannedAheadOfClock(subject.base))
        try await expect(withCalendar.contains("calendar"), "the calendar planned ahead", withCalendar)
    }

    static func replans(_ subject: inout Subject) async throws {
        try await subject.save(
            subject.oneShot("current", dueIn: 600), subject.oneShot("stale", dueIn: 600),
            subject.oneShot("running", dueIn: 0), subject.oneShot("cancelled", dueIn: 600))
        // Each corrected from the plan read now, to be due a minute from the base time.
        var corrections: [RequestWrite] = []
        for identifier in ["current", "stale", "running", "cancelled"] {
            guard let read = try await subject.store.request(identifier) else {
                throw Failure(description: "'\(identifier)' was not read back")
            }
            var moved = read
            moved.plan.anchor = subject.at(60)
            corrections.append(.replan(moved, from: read.plan))
        }
        // Meanwhile, as another instance of a store instances share would: one replanned, one
        // started, one cancelled.
        try await subject.save(subject.oneShot("stale", dueIn: 700))
        _ = try await subject.start("running", at: subject.base)
        try await subject.write([.cancel("cancelled", at: subject.at(1))])
        try await subject.write(corrections)
        let current = try await subject.store.request("current")
        try await expect(current?.plan.anchor == subject.at(60), "the correction written", current?.plan as Any)
        let stale = try await subject.store.request("stale")
        try await expect(
            stale?.plan.anchor == subject.at(700), "the plan written since kept, not the correction", stale?.plan as Any
        )
        let running = try await subject.store.request("running")
        try await expect(
            running?.isRunning == true && running?.plan.anchor == subject.at(0), "the run started since left alone",
            running as Any)
        let cancelled = try await subject.store.request("cancelled")
        try await expect(cancelled?.plan.isFinished == true, "the cancellation kept", cancelled?.plan as Any)
    }

    static func waitsForALength(_ subject: inout Subject) async throws {
        var retry = subject.oneShot("retry", dueIn: 0)
        retry.request.earliestBegin = nil
        retry.request.repetition = Repetition(every: .seconds(3600))
        retry.plan.retryAt = subject.at(100)
        retry.plan.failedAttempts = 1
        var queued = subject.oneShot("queued", dueIn: 50)
        queued.request.earliestBegin = nil
        var repeating = subject.oneShot("repeating", dueIn: 30)
        repeating.request.earliestBegin = nil
        repeating.request.repetition = Repetition(every: .seconds(3600))
        var past = subject.oneShot("past", dueIn: -50)
        past.request.earliestBegin = nil
        try await subject.save(retry, queued, repeating, subject.oneShot("at-a-time", dueIn: 70), past)
        let waits = await subject.identifiers(try subject.store.waitsForALength(after: subject.base))
        try await expect(
            waits == ["queued", "retry"], "the retry and the one-shot without a time, earliest first", waits)
    }

    static func historyAndPruning(_ subject: inout Subject) async throws {
        var job = subject.oneShot("job", dueIn: -100)
        job.request.earliestBegin = nil
        job.request.repetition = Repetition(every: .seconds(10))
        try await subject.save(job, subject.oneShot("old", dueIn: -90))
        var ended: [RunRecord] = []
        for attempt in 0..<3 {
            let started = try await subject.start("job", at: subject.at(-80 + Int64(attempt) * 10))
            let next = subject.at(-70 + Int64(attempt) * 10)
            await ended.append(
                try subject.end(started, .succeeded, at: subject.at(-75 + Int64(attempt) * 10)) {
                    $0.plan.anchor = next
                    $0.currentRunID = nil
                })
        }
        let oldRun = try await subject.end(try subject.start("old", at: subject.at(-60)), .failed, at: subject.at(-59))
        try await expect(
            try subject.store.history(identifier: "job", limit: 2) == [ended[2], ended[1]],
            "the two newest, newest first",
            try await subject.store.history(identifier: "job", limit: 2))
        try await expect(
            try subject.store.pruneHistory(endedBefore: nil, keepingPerIdentifier: 1) == 2, "two beyond one each")
        try await expect(try subject.store.history(identifier: "job", limit: 10) == [ended[2]], "the newest kept")
        try await expect(
            try subject.store.history(identifier: "old", limit: 10) == [oldRun], "another identifier's kept")
        // By age: the old one's attempt goes, then the finished request with nothing younger.
        try await expect(
            try subject.store.pruneHistory(endedBefore: subject.at(-58), keepingPerIdentifier: nil) == 1, "one old")
        try await expect(try subject.store.request("old") == nil, "the finished request gone with its history")
        try await expect(try subject.store.request("job") != nil, "the pending request stays")
        try await expect(
            try subject.store.history(identifier: "job", limit: 10) == [ended[2]], "the younger attempt stays")
    }

    static func finishedRequests(_ subject: inout Subject) async throws {
        for identifier in ["b.2", "a.1", "b.1", "c.1", "b.3"] {
            try await subject.save(
                subject.oneShot(identifier, dueIn: -10) { $0.tags = identifier == "b.3" ? [] : ["t"] })
        }
        try await subject.save(subject.oneShot("b.pending", dueIn: 100) { $0.tags = ["t"] })
        for identifier in ["b.2", "a.1", "b.1", "b.3"] {
            _ = try await subject.end(try subject.start(identifier, at: subject.at(-5)), .failed, at: subject.at(-4))
        }
        try await subject.write([.cancel("c.1", at: subject.at(-3))])
        let store = subject.store
        func found(_ after: String?, _ prefix: String?, _ tag: String?, _ limit: Int) async throws -> [String] {
            try await store.finishedRequests(after: after, prefix: prefix, tagged: tag, limit: limit)
                .map(\.request.identifier)
        }
        try await expect(
            try await found(nil, nil, nil, 10) == ["a.1", "b.1", "b.2", "b.3"], "every failed one by identifier",
            try await found(nil, nil, nil, 10))
        try await expect(
            try await found("a.1", nil, nil, 2) == ["b.1", "b.2"], "a page after 'a.1'",
            try await found("a.1", nil, nil, 2))
        try await expect(
            try await found(nil, "b.", "t", 10) == ["b.1", "b.2"], "by prefix and tag",
            try await found(nil, "b.", "t", 10))
        try await expect(try await found(nil, "b.1", nil, 10) == ["b.1"], "a prefix that is a whole identifier")
        try await expect(try await found(nil, "d", nil, 10).isEmpty, "none with another prefix")
    }

    static func operatorActions(_ subject: inout Subject) async throws {
        let first = OperatorAction(
            at: subject.at(-100), by: "alice", action: "retry-failed", subject: "tag t", count: 3,
            outcome: "submitted again 3 requests")
        let second = OperatorAction(
            at: subject.at(-10), by: "bob \u{1F600}", action: "cancel", subject: "job", count: 1, outcome: "cancelled")
        try await expect(try subject.store.operatorActions(limit: 10).isEmpty, "none in a new store")
        _ = try await subject.store.commit(ScheduleBatch(actions: [first]), lastRunID: try subject.store.lastRunID())
        _ = try await subject.store.commit(ScheduleBatch(actions: [second]), lastRunID: try subject.store.lastRunID())
        try await expect(
            try subject.store.operatorActions(limit: 10) == [second, first], "newest first, as written",
            try await subject.store.operatorActions(limit: 10))
        try await expect(try subject.store.operatorActions(limit: 1) == [second], "at most the limit")
        _ = try await subject.store.pruneHistory(endedBefore: subject.at(-50), keepingPerIdentifier: nil)
        try await expect(
            try subject.store.operatorActions(limit: 10) == [second], "the older one pruned",
            try await subject.store.operatorActions(limit: 10))
    }

    static func recovery(_ subject: inout Subject) async throws {
        guard subject.store.holderName == nil else { return }  // a fleet's claims lapse instead
        try await expect(subject.store.recovery.isClean, "a new store clean", subject.store.recovery)
        try await expect(subject.store.stallThreshold == nil && subject.store.claimsNoLongerSafe().isEmpty, "no claims")
        try await expect(subject.store.wallClock(subject.now) == subject.now, "the runtime's clock")
        try await subject.save(subject.oneShot("job", dueIn: -5), subject.oneShot("idle", dueIn: 5))
        let (record, _) = try await subject.start("job", at: subject.at(-1))
        try await expect(subject.store.isClaimHeld("job"), "its own run held")
        try subject.store.sync()
        try await subject.reopen()
        let interrupted = subject.store.recovery.interruptedRuns
        try await expect(
            interrupted.count == 1 && interrupted[0].runID == record.runID && interrupted[0].result == .interrupted
                && interrupted[0].endedAt == subject.now,
            "the run recorded interrupted", interrupted)
        try await expect(try subject.store.request("job")?.isRunning == false, "free to run again")
        try await expect(try subject.store.history(identifier: "job", limit: 10) == interrupted, "in its history")
        if try await subject.store.newRunID() == nil {
            try await expect(try subject.store.lastRunID() >= record.runID, "the run ID not given out again")
        }
        try await expect(subject.identifiers(try subject.store.pendingRequests()) == ["job", "idle"], "both kept")
    }

    static func closedStore(_ subject: inout Subject) async throws {
        try await subject.save(subject.oneShot("job", dueIn: 5))
        subject.store.close()
        func refused(_ what: String, _ call: () async throws -> Void) async throws {
            do {
                try await call()
            } catch is ScheduleStoreError {
                return
            }
            throw Failure(description: "expected \(what) refused by a closed store")
        }
        try await refused("a read") { _ = try await subject.store.request("job") }
        try await refused("a commit") { try await subject.write([.save(subject.oneShot("more", dueIn: 1))]) }
        try await refused("the history") { _ = try await subject.store.history(identifier: "job", limit: 1) }
        // Another store opens it again and finds what was written.
        subject.store = try await subject.database.openStore(Subject.context(subject.now))
        try await expect(try subject.store.request("job") != nil, "what was written before the close")
    }
}
