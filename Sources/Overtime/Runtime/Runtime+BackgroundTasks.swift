import Logging

/// Background-task grants, shaped like UIApplication's.
extension Runtime {
    /// Begins a grant of background time and returns its ID at once, from any thread.
    ///
    /// In the background the grant lasts until the budget deadline; its expiration
    /// handler runs once, on the loop thread, `expirationLeadTime` before it. A grant
    /// still open at the deadline is terminated and reported. Grants begun in the
    /// foreground do not expire until the program is in the background (unless they
    /// have a `maximumDuration`, counted from now, whichever deadline is earlier).
    ///
    /// - Parameters:
    ///   - name: Shown in logs, reports and ``openBackgroundTasks``.
    ///   - maximumDuration: An optional limit of the grant's own, longer than the lead time.
    ///   - fileID: The file that begins the grant, for reports (leave the default).
    ///   - line: The line that begins the grant, for reports (leave the default).
    ///   - expirationHandler: Stops the work and ends the grant. Runs on the loop thread.
    ///   - endHandler: Told why the grant ended. Runs on the loop thread (inside
    ///     ``endBackgroundTask(_:fileID:line:)`` when that is called there).
    /// - Returns: The grant's ID, or ``BackgroundTaskID/invalid`` when refused (the
    ///   reason is logged: terminated, suspended, too little time left, too many open).
    @discardableResult
    public func beginBackgroundTask(
        name: String = "",
        maximumDuration: Duration? = nil,
        fileID: StaticString = #fileID,
        line: UInt = #line,
        expirationHandler: (@Sendable () -> Void)? = nil,
        endHandler: (@Sendable (BackgroundTaskEndReason) -> Void)? = nil
    ) -> BackgroundTaskID {
        let result = begin(
            name: name, maximumDuration: maximumDuration, callSite: CallSite(fileID: fileID, line: line),
            expirationHandler: expirationHandler, endHandler: adaptEndHandler(endHandler))
        switch result {
        case .success(let id): return id
        case .failure: return .invalid
        }
    }

    /// Ends a grant. Ending an unknown, already ended or invalid ID logs a warning with
    /// the ID and this call site and counts a misuse; it never traps.
    public func endBackgroundTask(_ id: BackgroundTaskID, fileID: StaticString = #fileID, line: UInt = #line) {
        let callSite = CallSite(fileID: fileID, line: line)
        if id.isInvalid {
            metrics.countMisuse("invalid_id")
            configuration.logger.warning(
                "endBackgroundTask called with BackgroundTaskID.invalid",
                metadata: ["id": "\(id)", "call_site": "\(callSite)"])
        } else if isOnLoopThread {
            core.end(id, callSite: callSite)
        } else {
            published.noteQueuedEnd()
            if !queue.enqueue(.end(id, callSite)) {
                published.restoreQueuedEnd()
                // After termination every grant has already ended.
                configuration.logger.debug("endBackgroundTask after termination", metadata: ["id": "\(id)"])
            }
        }
    }

    /// Time left before the background budget's expiration handlers run: `nil` in the
    /// foreground, zero once they are due, suspended or terminated. What a piece of work
    /// must fit in; a lead time short of ``backgroundTimeRemaining``, or less in a budget
    /// cut short (a sleep).
    package var timeBeforeExpiration: Duration? {
        switch published.state {
        case .active, .inactive:
            return nil
        case .background:
            guard let point = published.expirationPoint else { return .zero }
            return max(point - clock.now, .zero)
        case .suspended, .terminated:
            return .zero
        }
    }

    /// Time left before the background deadline: ``unlimitedTime`` in the foreground,
    /// `deadline − now` in the background, zero once suspended or terminated.
    public var backgroundTimeRemaining: Duration {
        switch published.state {
        case .active, .inactive:
            return Self.unlimitedTime
        case .background:
            guard let deadline = published.deadline else { return .zero }
            return max(deadline - clock.now, .zero)
        case .suspended, .terminated:
            return .zero
        }
    }

    /// The open grants in begin order: name, ID, age, call site, time left.
    ///
    /// Off the loop thread this waits for the loop; it is empty before the loop runs
    /// and after termination.
    public var openBackgroundTasks: [BackgroundTaskInfo] {
        onLoopAndWait { core in core.openTasks() } ?? []
    }

    /// Runs every open grant's expiration handler now (those not yet run) and moves
    /// each grant's deadline to now + `expirationLeadTime`. What a second SIGTERM does.
    public func expireBackgroundTasks() {
        onLoop { core in core.forceExpire(nil) }
    }

    /// Like ``expireBackgroundTasks()`` for one grant.
    public func expireBackgroundTask(_ id: BackgroundTaskID) {
        onLoop { core in core.forceExpire(id) }
    }

    /// Begins a grant on the loop directly, or reserves it and queues it from another thread.
    /// Package-level for drivers that need the refusal and the termination report (the
    /// scheduler records both in a run's history).
    ///
    /// `launching`: work the program did not start itself (a scheduled run). While the
    /// program is suspended it is not refused: the loop resumes the program into the
    /// background for it (`didEnterBackground`, a fresh budget), and it suspends again once
    /// no grant is open — as iOS resumes a suspended app for a background refresh.
    @inline(__always)
    package func begin(
        name: String, maximumDuration: Duration?, callSite: CallSite,
        expirationHandler: (@Sendable () -> Void)?, endHandler: GrantEndHandler?, launching: Bool = false
    ) -> Result<BackgroundTaskID, BackgroundTaskRefusal> {
        let result: Result<BackgroundTaskID, BackgroundTaskRefusal>
        if isOnLoopThread, !launching || published.state != .suspended {
            result = core.beginLocal(
                name: name, maximumDuration: maximumDuration, callSite: callSite,
                expirationHandler: expirationHandler, endHandler: endHandler)
        } else {
            // Queued on the loop thread too when it launches: the resume is a transition of its own.
            result = beginQueued(
                QueuedBegin(
                    id: .invalid, name: name, callSite: callSite, begunAt: clock.now,
                    maximumDuration: maximumDuration, expirationHandler: expirationHandler, endHandler: endHandler,
                    launches: launching))
        }
        if let tracing = core.tracing, case .success(let id) = result {
            tracing.grantBegan(id, name: name, callSite: callSite)
        }
        if case .failure(let refusal) = result {
            metrics.countRefusal(refusal)
            configuration.logger.warning(
                "background task refused: \(refusal)",
                metadata: ["task": "\(name)", "call_site": "\(callSite)"])
        }
        return result
    }

    private func beginQueued(_ draft: QueuedBegin) -> Result<BackgroundTaskID, BackgroundTaskRefusal> {
        var view = GrantDecisions.View(
            state: published.state, budgetDeadline: published.deadline,
            budgetExpirationPoint: published.expirationPoint)
        if draft.launches, view.state == .suspended {
            view = GrantDecisions.View(state: .background, budgetDeadline: nil)  // a fresh budget is coming
        }
        if let refusal = core.engine.decisions.refusal(view, now: draft.begunAt, maximumDuration: draft.maximumDuration)
        {
            return .failure(refusal)
        }
        if let refusal = published.reserveQueuedGrant(
            limit: configuration.maximumOpenBackgroundTasks, resuming: draft.launches)
        {
            if case .tooManyOpenTasks = refusal {
                // The loop may have put off suspending for this reservation: let it look again.
                let core = self.core
                _ = queue.enqueue(.run { core.checkIdle() })
            }
            return .failure(refusal)
        }
        let id = BackgroundTaskID.queued(published.lastQueuedNumber.wrappingAdd(1, ordering: .relaxed).newValue)
        let request = QueuedBegin(
            id: id, name: draft.name, callSite: draft.callSite, begunAt: draft.begunAt,
            maximumDuration: draft.maximumDuration, expirationHandler: draft.expirationHandler,
            endHandler: draft.endHandler, launches: draft.launches)
        guard queue.enqueue(.begin(request)) else {
            published.releaseQueuedGrant()
            return .failure(.terminated)
        }
        return .success(id)
    }
}
