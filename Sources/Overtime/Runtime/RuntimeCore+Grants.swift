import Logging
import OvertimeSupport

/// A grant begun off the loop thread and queued for it: its ID was already returned; the
/// loop applies it.
struct QueuedBegin: Sendable {
    let id: BackgroundTaskID
    let name: String
    let callSite: CallSite
    let begunAt: MonotonicInstant
    let maximumDuration: Duration?
    let expirationHandler: (@Sendable () -> Void)?
    let endHandler: GrantEndHandler?
    /// Admitted while suspended: the loop resumes the program into the background first.
    var launches = false
}

/// How the runtime tells a grant's owner that it ended; the report is set for
/// `.terminated` (the public end handler sees only the reason).
package typealias GrantEndHandler = @Sendable (BackgroundTaskEndReason, TerminationReport?) -> Void

/// Wraps a public end handler (reason only) as a ``GrantEndHandler``.
func adaptEndHandler(_ handler: (@Sendable (BackgroundTaskEndReason) -> Void)?) -> GrantEndHandler? {
    guard let handler else { return nil }
    return { reason, _ in handler(reason) }
}

/// Performing grant decisions on the loop thread: ``GrantDecisions`` decides, the core
/// acts (stores and removes records, calls handlers, reports).
extension RuntimeCore {
    /// What a begin on the loop sees.
    @inline(__always)
    var admissionView: GrantDecisions.View {
        GrantDecisions.View(
            state: lifecycle.state, budgetDeadline: engine.deadlines.budget?.deadline,
            budgetExpirationPoint: engine.deadlines.budget?.expirationPoint)
    }

    /// Begins a grant on the loop thread (the fast path: no queue, no lock).
    @inline(__always)
    func beginLocal(
        name: String, maximumDuration: Duration?, callSite: CallSite,
        expirationHandler: (@Sendable () -> Void)?,
        endHandler: GrantEndHandler?
    ) -> Result<BackgroundTaskID, BackgroundTaskRefusal> {
        assertOnLoop()
        // The callback's start time saves a clock read per begin; a grant with a deadline
        // of its own reads the clock, so a long callback cannot shorten its time.
        let begunAt = maximumDuration == nil ? loopTime : now
        if let refusal = engine.decisions.refusal(admissionView, now: begunAt, maximumDuration: maximumDuration) {
            return .failure(refusal)
        }
        guard published.hasRoom(open: engine.grants.openCount, limit: configuration.maximumOpenBackgroundTasks) else {
            return .failure(.tooManyOpenTasks(limit: configuration.maximumOpenBackgroundTasks))
        }
        let slot = store(
            name: name, callSite: callSite, begunAt: begunAt, maximumDuration: maximumDuration,
            expirationHandler: expirationHandler, endHandler: endHandler, queuedID: .invalid)
        return .success(engine.grants.id(ofSlot: slot))
    }

    /// Applies a grant begun off the loop. It was admitted there, and its reservation kept
    /// the program from suspending or terminating since, so it is never refused here.
    func applyQueuedBegin(_ request: QueuedBegin) {
        if request.launches, lifecycle.state == .suspended {
            // Still holding its reservation, so the transition's settling does not suspend again.
            apply(.backgroundLaunch, from: "a background launch for '\(request.name)'")
        }
        published.releaseReservation()  // its place moves into the table with `store`
        let slot = store(
            name: request.name, callSite: request.callSite, begunAt: request.begunAt,
            maximumDuration: request.maximumDuration, expirationHandler: request.expirationHandler,
            endHandler: request.endHandler, queuedID: request.id)
        if let early = engine.grants.endsBeforeBegin.removeValue(forKey: request.id.rawValue),
            engine.grants.isOpen(slot: slot, generation: engine.grants.generation(ofSlot: slot))
        {
            finish(slot: slot, callSite: early.callSite, queued: early.queued)
        }
    }

    @inline(__always)
    private func store(
        name: String, callSite: CallSite, begunAt: MonotonicInstant, maximumDuration: Duration?,
        expirationHandler: (@Sendable () -> Void)?,
        endHandler: GrantEndHandler?, queuedID: BackgroundTaskID
    ) -> Int32 {
        let ownDeadline = maximumDuration.map { begunAt + $0 }
        var extended: GrantExtendedRecord?
        if endHandler != nil || ownDeadline != nil {
            extended = GrantExtendedRecord(endHandler: endHandler, ownDeadline: ownDeadline)
        }
        let slot = engine.grants.insert(
            name: name, callSite: callSite, begunAt: begunAt, queuedID: queuedID,
            expirationHandler: expirationHandler, extended: extended)
        if queuedID.isInvalid {
            published.setOpenOnLoop(engine.grants.openCount)
        } else {
            published.transferIn(open: engine.grants.openCount)  // its place was held off the loop
        }
        metrics.pendingBegun += 1
        let budgetExpirationDone = engine.deadlines.budget?.expirationDone ?? false
        if ownDeadline != nil || budgetExpirationDone {
            perform(
                engine.decisions.afterBegin(ownDeadline: ownDeadline, budgetExpirationDone: budgetExpirationDone),
                slot: slot, generation: engine.grants.generation(ofSlot: slot))
        }
        return slot
    }

    /// `endBackgroundTask` on the loop thread, or applied from the queue (`queued`: its
    /// place was already given up off the loop).
    @inline(__always)
    func end(_ id: BackgroundTaskID, callSite: CallSite, queued: Bool = false) {
        assertOnLoop()
        guard let slot = engine.grants.slot(for: id) else {
            if id.isQueued, engine.grants.endsBeforeBegin[id.rawValue] == nil {
                // Possibly begun on another thread and still queued: decided at turn end.
                engine.grants.endsBeforeBegin[id.rawValue] = (callSite, queued)
            } else {
                if queued { published.restoreQueuedEnd() }
                reportMisuse(id: id, callSite: callSite)
            }
            return
        }
        finish(slot: slot, callSite: callSite, queued: queued)
    }

    /// Ends the grant in `slot` at its owner's request.
    @inline(__always)
    private func finish(slot: Int32, callSite: CallSite, queued: Bool) {
        let id = engine.grants.id(ofSlot: slot)  // before the slot's generation moves on
        let record = engine.grants.remove(slot: slot)
        if queued {
            published.transferOut(open: engine.grants.openCount)
        } else {
            published.setOpenOnLoop(engine.grants.openCount)
        }
        if let stale = record.extended?.heapEntries, stale > 0 { engine.deadlines.noteEntriesStale(stale) }
        let reason: BackgroundTaskEndReason = record.phase == .open ? .completed : .expired
        if reason == .completed { metrics.pendingCompleted += 1 } else { metrics.pendingExpiredEnds += 1 }
        if let tracing { tracing.grantEnded(id, reason) }
        if let endHandler = record.extended?.endHandler {
            callUser(
                .endHandler(name: record.name, id: id, callSite: record.callSite), timer: metrics.endHandlerDuration
            ) {
                endHandler(reason, nil)
            }
        }
        checkIdle()
    }

    /// Queued IDs ended early whose begin never came were unknown after all.
    func reportEarlyQueuedEnds() {
        guard !engine.grants.endsBeforeBegin.isEmpty else { return }
        let unknown = engine.grants.endsBeforeBegin
        engine.grants.endsBeforeBegin = [:]
        for (raw, early) in unknown {
            if early.queued { published.restoreQueuedEnd() }
            reportMisuse(id: BackgroundTaskID(rawValue: raw), callSite: early.callSite)
        }
    }

    func reportMisuse(id: BackgroundTaskID, callSite: CallSite) {
        let kind = id.isInvalid ? "invalid_id" : "unknown_id"
        metrics.shared.countMisuse(kind)
        logger.warning(
            id.isInvalid
                ? "endBackgroundTask called with BackgroundTaskID.invalid"
                : "endBackgroundTask called with an unknown or already ended ID",
            metadata: ["id": "\(id)", "call_site": "\(callSite)"])
    }

    // MARK: Deadlines

    /// Runs everything due at `now`: the budget's expiration point, the grants' own
    /// checks, the budget's deadline, in that order.
    func processDeadlines(now: MonotonicInstant) {
        var terminated = perform(engine.decisions.atBudgetExpirationPoint(engine.deadlines.budget, now: now), now: now)
        while let entry = engine.deadlines.popNextDue(now: now) {
            guard engine.grants.isOpen(slot: entry.slot, generation: entry.generation) else { continue }
            engine.grants[entry.slot].extended?.heapEntries -= 1
            let ownDeadline = engine.grants[entry.slot].extended?.ownDeadline
            terminated += perform(
                engine.decisions.atOwnCheck(ownDeadline: ownDeadline, now: now), slot: entry.slot,
                generation: entry.generation, now: now)
        }
        terminated += perform(engine.decisions.atBudgetDeadline(engine.deadlines.budget, now: now), now: now)
        engine.deadlines.compact { engine.grants.isOpen(slot: $0.slot, generation: $0.generation) }
        perform(engine.decisions.afterTerminations(terminated), now: now)
    }

    /// Runs expiration handlers now and moves deadlines to now + lead time: for one
    /// grant, or for all (`id == nil`) in begin order. `false` when `id` is not open.
    @discardableResult
    func forceExpire(_ id: BackgroundTaskID?) -> Bool {
        let current = now
        let targets: [(slot: Int32, generation: UInt32)]
        if let id {
            guard let slot = engine.grants.slot(for: id) else {
                logger.warning("force-expire: no open background task with that ID", metadata: ["id": "\(id)"])
                return false
            }
            targets = [(slot, engine.grants.generation(ofSlot: slot))]
        } else {
            targets = engine.grants.openSlotsInBeginOrder()
        }
        for (slot, generation) in targets where engine.grants.isOpen(slot: slot, generation: generation) {
            let ownDeadline = engine.grants[slot].extended?.ownDeadline
            perform(
                engine.decisions.forcedExpiry(ownDeadline: ownDeadline, now: current), slot: slot,
                generation: generation)
        }
        return true
    }

    // MARK: Performing

    /// Performs actions that name no single grant; returns how many grants it terminated.
    @discardableResult
    private func perform(_ actions: [GrantDecisions.Action], now: MonotonicInstant) -> Int {
        var terminated = 0
        for action in actions {
            switch action {
            case .markBudgetExpired:
                engine.deadlines.markBudgetExpirationDone()
            case .clearBudget:
                engine.deadlines.clearBudget()
                published.setBudget(nil)
            case .settle:
                turnState.needsSettle = true
            case .expire(.all):
                for (slot, generation) in engine.grants.openSlotsInBeginOrder()
                where engine.grants.isOpen(slot: slot, generation: generation) {
                    expire(slot: slot, generation: generation)
                }
            case .terminate(.all):
                for (slot, generation) in engine.grants.openSlotsInBeginOrder()
                where engine.grants.isOpen(slot: slot, generation: generation) {
                    terminate(slot: slot, now: now)
                    terminated += 1
                }
            case .exitProcess(let status):
                logger.critical("exiting after terminating background tasks", metadata: ["status": "\(status)"])
                exitProcess(status: status)
            case .expire(.grant), .terminate(.grant), .checkAgain, .setOwnDeadline:
                assertionFailure("\(action) needs a grant")
            }
        }
        return terminated
    }

    /// Performs actions for the grant in `slot`, skipping what follows once it has ended;
    /// returns how many grants it terminated (0 or 1).
    @discardableResult
    private func perform(
        _ actions: [GrantDecisions.Action], slot: Int32, generation: UInt32, now: MonotonicInstant? = nil
    ) -> Int {
        for action in actions {
            guard engine.grants.isOpen(slot: slot, generation: generation) else { return 0 }
            switch action {
            case .expire:
                expire(slot: slot, generation: generation)
            case .checkAgain(let instant):
                engine.deadlines.schedule(at: instant, slot: slot, generation: generation)
                engine.grants[slot].extended?.heapEntries += 1
            case .setOwnDeadline(let instant):
                let extended = engine.grants[slot].extended ?? GrantExtendedRecord(endHandler: nil, ownDeadline: nil)
                extended.ownDeadline = instant
                engine.grants[slot].extended = extended
            case .terminate:
                terminate(slot: slot, now: now ?? self.now)
                return 1
            case .markBudgetExpired, .clearBudget, .settle, .exitProcess:
                perform([action], now: now ?? self.now)
            }
        }
        return 0
    }

    /// Runs the grant's expiration handler once.
    private func expire(slot: Int32, generation: UInt32) {
        guard engine.grants[slot].phase == .open else { return }
        metrics.pendingExpirations += 1
        if let tracing { tracing.grantExpiring(engine.grants.id(ofSlot: slot)) }
        guard let handler = engine.grants[slot].expirationHandler else {
            engine.grants[slot].phase = .expired
            return
        }
        engine.grants[slot].phase = .expiring
        let record = engine.grants[slot]
        let id = engine.grants.id(ofSlot: slot)
        let started = now
        callUser(
            .expirationHandler(name: record.name, id: id, callSite: record.callSite),
            timer: metrics.expirationHandlerDuration, handler)
        guard engine.grants.isOpen(slot: slot, generation: generation) else { return }
        let extended = engine.grants[slot].extended ?? GrantExtendedRecord(endHandler: nil, ownDeadline: nil)
        extended.expirationStartedAt = started
        extended.expirationDuration = now - started
        engine.grants[slot].extended = extended
        engine.grants[slot].phase = .expired
    }

    /// Ends a grant still open at its deadline, and reports it.
    private func terminate(slot: Int32, now: MonotonicInstant) {
        let id = engine.grants.id(ofSlot: slot)
        let record = engine.grants.remove(slot: slot)
        published.setOpenOnLoop(engine.grants.openCount)
        if let stale = record.extended?.heapEntries, stale > 0 { engine.deadlines.noteEntriesStale(stale) }
        metrics.pendingTerminated += 1
        if let tracing { tracing.grantEnded(id, .terminated) }
        let report = TerminationReport(
            name: record.name, id: id, callSite: record.callSite, begunAt: record.begunAt,
            terminatedAt: now, state: lifecycle.state,
            expirationHandlerRan: record.extended?.expirationStartedAt != nil,
            expirationHandlerDuration: record.extended?.expirationDuration ?? .zero)
        logger.critical(
            "\(report)",
            metadata: [
                "task": "\(report.name)", "id": "\(id)", "call_site": "\(report.callSite)",
                "age_seconds": "\(report.age.secondsValue)",
            ])
        if let endHandler = record.extended?.endHandler {
            callUser(
                .endHandler(name: record.name, id: id, callSite: record.callSite), timer: metrics.endHandlerDuration
            ) {
                endHandler(.terminated, report)
            }
        }
        if let onTermination = configuration.onTermination {
            callUser(.terminationHandler(name: record.name, id: id), timer: metrics.endHandlerDuration) {
                onTermination(report)
            }
        }
        checkIdle()
    }

    /// The open grants as ``Runtime/openBackgroundTasks`` lists them.
    func openTasks() -> [BackgroundTaskInfo] {
        let current = now
        return engine.grants.openSlotsInBeginOrder().map { slot, _ in
            let record = engine.grants[slot]
            var deadline = engine.deadlines.budget?.deadline
            if let own = record.extended?.ownDeadline { deadline = min(deadline ?? own, own) }
            return BackgroundTaskInfo(
                name: record.name, id: engine.grants.id(ofSlot: slot), callSite: record.callSite,
                age: current - record.begunAt,
                remaining: deadline.map { max($0 - current, .zero) } ?? Runtime.unlimitedTime,
                isExpired: record.phase != .open)
        }
    }
}
