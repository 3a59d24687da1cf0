import Logging

/// A grant begun off the loop: its ID was already returned; the loop applies it.
struct RemoteBegin: Sendable {
    let id: BackgroundTaskID
    let name: String
    let callSite: CallSite
    let begunAt: MonotonicInstant
    let maximumDuration: Duration?
    let expirationHandler: (@Sendable () -> Void)?
    let endHandler: GrantEndHandler?
}

/// How the runtime tells a grant's owner that it ended; the report is set for
/// `.terminated` (the public end handler sees only the reason).
typealias GrantEndHandler = @Sendable (BackgroundTaskEndReason, TerminationReport?) -> Void

/// Wraps a public end handler (reason only) as a ``GrantEndHandler``.
func adaptEndHandler(_ handler: (@Sendable (BackgroundTaskEndReason) -> Void)?) -> GrantEndHandler? {
    guard let handler else { return nil }
    return { reason, _ in handler(reason) }
}

/// Beginning, ending, expiring and terminating grants, on the loop thread.
extension RuntimeCore {
    /// Why a grant begun at `now` would be refused, reading only loop-owned state.
    @inline(__always)
    func refusal(now: MonotonicInstant, maximumDuration: Duration?) -> BackgroundTaskRefusal? {
        switch lifecycle.state {
        case .terminated: return .terminated
        case .suspended: return .suspended
        case .background:
            if let budget = deadlines.budget, now >= budget.expirationPoint {
                return .insufficientTimeRemaining(
                    remaining: max(budget.deadline - now, .zero), leadTime: configuration.expirationLeadTime)
            }
        case .active, .inactive: break
        }
        if let maximumDuration, maximumDuration <= configuration.expirationLeadTime {
            return .maximumDurationTooShort(requested: maximumDuration, leadTime: configuration.expirationLeadTime)
        }
        return nil
    }

    /// Begins a grant on the loop thread (the fast path: no queue, no lock).
    @inline(__always)
    func beginLocal(
        name: String, maximumDuration: Duration?, callSite: CallSite,
        expirationHandler: (@Sendable () -> Void)?,
        endHandler: GrantEndHandler?
    ) -> Result<BackgroundTaskID, BackgroundTaskRefusal> {
        // The callback's start time saves a clock read per begin; a grant with a deadline
        // of its own reads the clock, so a long callback cannot shorten its time.
        let begunAt = maximumDuration == nil ? loopTime : now
        if let refusal = refusal(now: begunAt, maximumDuration: maximumDuration) { return .failure(refusal) }
        guard published.hasRoom(open: grants.openCount, limit: configuration.maximumOpenBackgroundTasks) else {
            return .failure(.tooManyOpenTasks(limit: configuration.maximumOpenBackgroundTasks))
        }
        let slot = store(
            name: name, callSite: callSite, begunAt: begunAt, maximumDuration: maximumDuration,
            expirationHandler: expirationHandler, endHandler: endHandler, remoteID: .invalid)
        return .success(grants.id(ofSlot: slot))
    }

    /// Applies a grant begun off the loop, whose place was already reserved.
    func applyRemoteBegin(_ request: RemoteBegin) {
        if let refusal = refusal(now: request.begunAt, maximumDuration: request.maximumDuration) {
            // The caller already holds a valid ID: refuse late, visibly.
            published.releaseRemoteGrant()
            metrics.shared.countRefusal(refusal)
            logger.warning(
                "background task refused after its ID was returned: \(refusal)",
                metadata: ["task": "\(request.name)", "id": "\(request.id)", "call_site": "\(request.callSite)"])
            earlyRemoteEnds.removeValue(forKey: request.id.rawValue)
            request.endHandler?(.terminated, nil)
            return
        }
        let slot = store(
            name: request.name, callSite: request.callSite, begunAt: request.begunAt,
            maximumDuration: request.maximumDuration, expirationHandler: request.expirationHandler,
            endHandler: request.endHandler, remoteID: request.id)
        published.releaseRemoteGrant()  // counted in the table now
        if let callSite = earlyRemoteEnds.removeValue(forKey: request.id.rawValue) {
            finish(slot: slot, callSite: callSite)
        }
    }

    @inline(__always)
    private func store(
        name: String, callSite: CallSite, begunAt: MonotonicInstant, maximumDuration: Duration?,
        expirationHandler: (@Sendable () -> Void)?,
        endHandler: GrantEndHandler?, remoteID: BackgroundTaskID
    ) -> Int32 {
        let ownDeadline = maximumDuration.map { begunAt + $0 }
        var extras: GrantExtras?
        if endHandler != nil || ownDeadline != nil {
            extras = GrantExtras(endHandler: endHandler, ownDeadline: ownDeadline)
        }
        let slot = grants.insert(
            name: name, callSite: callSite, begunAt: begunAt, remoteID: remoteID,
            expirationHandler: expirationHandler, extras: extras)
        if let ownDeadline {
            schedule(slot: slot, at: ownDeadline - configuration.expirationLeadTime)
        }
        published.setOpenOnLoop(grants.openCount)
        metrics.pendingBegun += 1
        return slot
    }

    /// `endBackgroundTask` on the loop thread, or applied from the queue.
    @inline(__always)
    func end(_ id: BackgroundTaskID, callSite: CallSite) {
        guard let slot = grants.slot(for: id) else {
            if id.isRemote, earlyRemoteEnds[id.rawValue] == nil {
                // Possibly begun on another thread and still queued: decided at turn end.
                earlyRemoteEnds[id.rawValue] = callSite
            } else {
                reportMisuse(id: id, callSite: callSite)
            }
            return
        }
        finish(slot: slot, callSite: callSite)
    }

    /// Ends the grant in `slot` at its owner's request.
    @inline(__always)
    private func finish(slot: Int32, callSite: CallSite) {
        let id = grants.id(ofSlot: slot)  // before the slot's generation moves on
        let record = grants.remove(slot: slot)
        published.setOpenOnLoop(grants.openCount)
        if let stale = record.extras?.heapEntries, stale > 0 { deadlines.noteEntriesStale(stale) }
        let reason: BackgroundTaskEndReason = record.phase == .open ? .completed : .expired
        if reason == .completed { metrics.pendingCompleted += 1 } else { metrics.pendingExpiredEnds += 1 }
        if let endHandler = record.extras?.endHandler {
            callUser(
                .endHandler(name: record.name, id: id, callSite: record.callSite), timer: metrics.endHandlerDuration
            ) {
                endHandler(reason, nil)
            }
        }
        grantRemoved()
    }

    /// Remote IDs ended early whose begin never came were unknown after all.
    func reportEarlyRemoteEnds() {
        guard !earlyRemoteEnds.isEmpty else { return }
        let unknown = earlyRemoteEnds
        earlyRemoteEnds = [:]
        for (raw, callSite) in unknown { reportMisuse(id: BackgroundTaskID(rawValue: raw), callSite: callSite) }
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

    /// Runs everything due at `now`: budget expiration, per-grant deadlines, budget deadline.
    func processDeadlines(now: MonotonicInstant) {
        var terminated = false
        if let budget = deadlines.budget, !budget.expirationDone, now >= budget.expirationPoint {
            deadlines.markBudgetExpirationDone()
            for (slot, generation) in grants.openSlotsInBeginOrder()
            where grants.isOpen(slot: slot, generation: generation) {
                expire(slot: slot, generation: generation)
            }
        }
        var due = deadlines.popDue(now: now)
        while !due.isEmpty {
            for entry in due where grants.isOpen(slot: entry.slot, generation: entry.generation) {
                grants[entry.slot].extras?.heapEntries -= 1
                guard let ownDeadline = grants[entry.slot].extras?.ownDeadline else { continue }
                if now >= ownDeadline {
                    terminate(slot: entry.slot, now: now)
                    terminated = true
                } else if now >= ownDeadline - configuration.expirationLeadTime {
                    expire(slot: entry.slot, generation: entry.generation)
                    if grants.isOpen(slot: entry.slot, generation: entry.generation) {
                        schedule(slot: entry.slot, at: ownDeadline)
                    }
                } else {
                    schedule(slot: entry.slot, at: ownDeadline - configuration.expirationLeadTime)
                }
            }
            due = deadlines.popDue(now: now)
        }
        if let budget = deadlines.budget, now >= budget.deadline {
            deadlines.clearBudget()
            published.setDeadline(nil)
            for (slot, generation) in grants.openSlotsInBeginOrder()
            where grants.isOpen(slot: slot, generation: generation) {
                terminate(slot: slot, now: now)
                terminated = true
            }
            needsSettle = true
        }
        deadlines.compact { grants.isOpen(slot: $0.slot, generation: $0.generation) }
        if terminated, case .exitProcess(let status) = configuration.terminationPolicy {
            logger.critical("exiting after terminating background tasks", metadata: ["status": "\(status)"])
            exitProcess(status: status)
        }
    }

    /// Adds a heap entry for the grant in `slot` (which has extras), counted in them.
    private func schedule(slot: Int32, at instant: MonotonicInstant) {
        deadlines.schedule(at: instant, slot: slot, generation: grants.generation(ofSlot: slot))
        grants[slot].extras?.heapEntries += 1
    }

    /// Runs the grant's expiration handler once.
    func expire(slot: Int32, generation: UInt32) {
        guard grants[slot].phase == .open else { return }
        metrics.pendingExpirations += 1
        guard let handler = grants[slot].expirationHandler else {
            grants[slot].phase = .expired
            return
        }
        grants[slot].phase = .expiring
        let record = grants[slot]
        let id = grants.id(ofSlot: slot)
        let started = now
        callUser(
            .expirationHandler(name: record.name, id: id, callSite: record.callSite),
            timer: metrics.expirationHandlerDuration, handler)
        guard grants.isOpen(slot: slot, generation: generation) else { return }
        let extras = grants[slot].extras ?? GrantExtras(endHandler: nil, ownDeadline: nil)
        extras.expirationStartedAt = started
        extras.expirationDuration = now - started
        grants[slot].extras = extras
        grants[slot].phase = .expired
    }

    /// Ends a grant still open at its deadline, and reports it.
    func terminate(slot: Int32, now: MonotonicInstant) {
        let id = grants.id(ofSlot: slot)
        let record = grants.remove(slot: slot)
        published.setOpenOnLoop(grants.openCount)
        if let stale = record.extras?.heapEntries, stale > 0 { deadlines.noteEntriesStale(stale) }
        metrics.pendingTerminated += 1
        let report = TerminationReport(
            name: record.name, id: id, callSite: record.callSite, begunAt: record.begunAt,
            terminatedAt: now, state: lifecycle.state,
            expirationHandlerRan: record.extras?.expirationStartedAt != nil,
            expirationHandlerDuration: record.extras?.expirationDuration ?? .zero)
        logger.critical(
            "\(report)",
            metadata: [
                "task": "\(report.name)", "id": "\(id)", "call_site": "\(report.callSite)",
                "age_seconds": "\(report.age.secondsValue)",
            ])
        if let endHandler = record.extras?.endHandler {
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
        grantRemoved()
    }

    /// Runs expiration handlers now and moves deadlines to now + lead time: for one
    /// grant, or for all (`id == nil`) in begin order.
    func forceExpire(_ id: BackgroundTaskID?) {
        let current = now
        let deadline = current + configuration.expirationLeadTime
        let targets: [(slot: Int32, generation: UInt32)]
        if let id {
            guard let slot = grants.slot(for: id) else {
                logger.warning("force-expire: no open background task with that ID", metadata: ["id": "\(id)"])
                return
            }
            targets = [(slot, grants.generation(ofSlot: slot))]
        } else {
            targets = grants.openSlotsInBeginOrder()
        }
        for (slot, generation) in targets where grants.isOpen(slot: slot, generation: generation) {
            let extras = grants[slot].extras ?? GrantExtras(endHandler: nil, ownDeadline: nil)
            extras.ownDeadline = min(extras.ownDeadline ?? deadline, deadline)
            grants[slot].extras = extras
            expire(slot: slot, generation: generation)
            if grants.isOpen(slot: slot, generation: generation) {
                schedule(slot: slot, at: extras.ownDeadline!)
            }
        }
    }

    /// The open grants as ``Runtime/openBackgroundTasks`` lists them.
    func openTasks() -> [BackgroundTaskInfo] {
        let current = now
        return grants.openSlotsInBeginOrder().map { slot, _ in
            let record = grants[slot]
            var deadline = deadlines.budget?.deadline
            if let own = record.extras?.ownDeadline { deadline = min(deadline ?? own, own) }
            return BackgroundTaskInfo(
                name: record.name, id: grants.id(ofSlot: slot), callSite: record.callSite,
                age: current - record.begunAt,
                remaining: deadline.map { max($0 - current, .zero) } ?? Runtime.unlimitedTime,
                isExpired: record.phase != .open)
        }
    }
}
