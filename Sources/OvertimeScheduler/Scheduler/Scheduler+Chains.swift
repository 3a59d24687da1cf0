// Chains: a request due once its prerequisites succeeded, with their outputs; failed or
// cancelled when one fails or is cancelled. The rules are `ChainDecisions`; this reads
// the prerequisites and writes the links, on the queue.

import Overtime

extension Scheduler {
    /// Checks what a request's prerequisites can be checked for alone: how many, their
    /// identifiers, and that the request is a one-shot in the shared scope.
    func validatePrerequisites(of request: ScheduledTaskRequest) throws(SchedulerError) {
        let identifier = request.identifier
        let prerequisites = request.prerequisites
        guard !prerequisites.isEmpty else { return }
        func refuse(_ problem: String) -> SchedulerError {
            SchedulerError(code: .invalidRequest, message: "'\(identifier)': \(problem)", field: "prerequisites")
        }
        guard prerequisites.count <= ScheduleLimits.maximumPrerequisites else {
            throw refuse("\(prerequisites.count) prerequisites; at most \(ScheduleLimits.maximumPrerequisites)")
        }
        for prerequisite in prerequisites.sorted() {
            try ScheduleLimits.check(identifier: prerequisite, field: "prerequisites")
        }
        guard !prerequisites.contains(identifier) else { throw refuse("a request cannot wait on itself") }
        guard request.repetition == nil else {
            throw refuse("a repeating request cannot wait on prerequisites (a link of a chain is a one-shot)")
        }
        guard request.scope == .shared else { throw refuse("a link of a chain is in the shared scope") }
    }

    /// What becomes of `request`'s link as it is submitted: its prerequisites as they stand
    /// (those submitted before it in the same batch, `earlier`, are pending); `nil` without
    /// prerequisites. On the queue.
    ///
    /// - Throws: ``SchedulerError/Code/invalidRequest`` for a prerequisite not submitted, one
    ///   that repeats, or one that waits (through others) on `request` itself.
    func initialChain(of request: ScheduledTaskRequest, earlier: [String: ScheduledTaskRequest])
        async throws(SchedulerError) -> ChainAction?
    {
        let identifier = request.identifier
        guard !request.prerequisites.isEmpty else { return nil }
        func refuse(_ problem: String) -> SchedulerError {
            SchedulerError(code: .invalidRequest, message: "'\(identifier)': \(problem)", field: "prerequisites")
        }
        var outcomes: [String: PrerequisiteOutcome] = [:]
        for prerequisite in request.prerequisites.sorted() {
            if let submitted = earlier[prerequisite] {
                guard submitted.repetition == nil else { throw refuse("prerequisite '\(prerequisite)' repeats") }
                if try await waits(submitted, on: identifier, earlier: earlier) {
                    throw refuse("prerequisite '\(prerequisite)' waits on it: a chain cannot go round")
                }
                outcomes[prerequisite] = .pending
                continue
            }
            let stored = try await fromStore { () async throws(ScheduleStoreError) in
                try await store.request(prerequisite)
            }
            guard let stored else { throw refuse("prerequisite '\(prerequisite)' is not submitted") }
            guard stored.request.repetition == nil else { throw refuse("prerequisite '\(prerequisite)' repeats") }
            let outcome = try await outcome(of: prerequisite, stored: stored)
            if outcome == .pending, try await waits(stored.request, on: identifier, earlier: earlier) {
                throw refuse("prerequisite '\(prerequisite)' waits on it: a chain cannot go round")
            }
            outcomes[prerequisite] = outcome
        }
        return ChainDecisions.decide(ChainState(waitingOn: request.prerequisites), outcomes: outcomes)
    }

    /// Whether `request` waits, directly or through its prerequisites, on `identifier`.
    private func waits(_ request: ScheduledTaskRequest, on identifier: String, earlier: [String: ScheduledTaskRequest])
        async throws(SchedulerError) -> Bool
    {
        var next = Array(request.prerequisites)
        var seen = Set(next)
        while let current = next.popLast() {
            if current == identifier { return true }
            let prerequisites: Set<String>
            if let submitted = earlier[current] {
                prerequisites = submitted.prerequisites
            } else {
                let stored = try await fromStore { () async throws(ScheduleStoreError) in
                    try await store.request(current)
                }
                guard let stored, !stored.plan.isFinished else { continue }
                prerequisites = stored.chain?.waitingOn ?? []
            }
            for prerequisite in prerequisites where seen.insert(prerequisite).inserted { next.append(prerequisite) }
        }
        return false
    }

    /// How the prerequisite `identifier` stands (`stored`: its request as read, if it was).
    func outcome(of identifier: String, stored: StoredRequest?? = nil) async throws(SchedulerError)
        -> PrerequisiteOutcome
    {
        let read = try await fromStore { () async throws(ScheduleStoreError) -> (StoredRequest?, RunRecord?) in
            let request: StoredRequest?
            if let stored { request = stored } else { request = try await store.request(identifier) }
            guard let request, request.plan.isFinished else { return (request, nil) }
            return (request, try await store.history(identifier: identifier, limit: 2).first { $0.result != .running })
        }
        return ChainDecisions.outcome(of: read.0, lastRun: read.1)
    }

    /// Brings links up to date: `links` (identifiers of requests with prerequisites) are
    /// decided again from their prerequisites as they stand now, and the requests waiting
    /// on `concluded` (identifiers that finished, or were cancelled) too — a link that
    /// fails or is cancelled in turn passes that on to its own dependents. Each round of
    /// changes is one commit. On the queue; a store error is logged, and the start of the
    /// next process decides again what is left.
    func settleChains(links: [String] = [], concluded: [String]) async {
        guard !links.isEmpty || !concluded.isEmpty else { return }
        var concluded = concluded
        var candidates: [StoredRequest] = []
        do throws(SchedulerError) {
            for link in links {
                if let stored = try await fromStore({ () async throws(ScheduleStoreError) in
                    try await store.request(link)
                }) {
                    candidates.append(stored)
                }
            }
            var rounds = 0
            while !candidates.isEmpty || !concluded.isEmpty {
                rounds += 1
                if !concluded.isEmpty {
                    let waiting = concluded
                    candidates += try await fromStore { () async throws(ScheduleStoreError) in
                        try await store.dependents(of: waiting)
                    }
                    concluded = []
                }
                if candidates.isEmpty { break }
                var writes: [RequestWrite] = []
                var seen = Set<String>()
                let now = wallClockNow
                for var stored in candidates where seen.insert(stored.request.identifier).inserted {
                    guard let chain = stored.chain, chain.isWaiting, !stored.plan.isFinished else { continue }
                    var outcomes: [String: PrerequisiteOutcome] = [:]
                    for prerequisite in chain.waitingOn { outcomes[prerequisite] = try await outcome(of: prerequisite) }
                    let action = ChainDecisions.decide(chain, outcomes: outcomes)
                    guard case .wait(let state) = action, state == chain else {
                        if stored.take(action, now: now) { concluded.append(stored.request.identifier) }
                        writes.append(.save(stored))
                        continue
                    }
                }
                candidates = []
                if !writes.isEmpty {
                    _ = try await write(ScheduleBatch(writes: writes))
                    syncSoon()
                }
                if rounds > 10_000 { break }  // a chain is finite; this only bounds a damaged store
            }
        } catch {
            logger.error("cannot update the links of chains: \(error)")
        }
    }

    /// What a process that ended between a prerequisite's end and its dependents' update
    /// left: decided again at the start.
    func settleChainsLeftWaiting() async {
        do {
            let left = try await store.waitingOnFinishedPrerequisites()
            guard !left.isEmpty else { return }
            logger.notice("chains: \(left.count) links waited on prerequisites that had finished; deciding them")
            await settleChains(links: left.map(\.request.identifier), concluded: [])
        } catch {
            logger.error("cannot read the links of chains: \(error)")
        }
    }
}
