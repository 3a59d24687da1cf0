// What a scheduler promises whichever store keeps its schedule: one set of checks, run by
// the SQLite store's tests and (through a link to this file) the PostgreSQL store's.

import Foundation
import Overtime
import OvertimeScheduler
import Testing

/// A scheduler on the store under test, and time passing for it.
protocol SchedulerSemanticsFixture {
    /// A started scheduler on a new, empty schedule, whose handler serves every identifier
    /// that starts with `semantics.`: `answer` says whether each task succeeds, and
    /// `afterCompletion` is called once the handler has completed it.
    func makeScheduler(
        answer: @escaping @Sendable (ScheduledTask) -> Bool,
        afterCompletion: @escaping @Sendable (ScheduledTask) -> Void
    ) throws -> Scheduler
    /// Lets time pass (virtual or real) until `condition` holds; whether it came to hold.
    func until(_ condition: () throws -> Bool) rethrows -> Bool
    /// Ends what ``makeScheduler(answer:)`` made.
    func finish()
}

extension SchedulerSemanticsFixture {
    /// ``makeScheduler(answer:afterCompletion:)`` with nothing after completion.
    func makeScheduler(answer: @escaping @Sendable (ScheduledTask) -> Bool) throws -> Scheduler {
        try makeScheduler(answer: answer, afterCompletion: { _ in })
    }
}

/// The checks, each on a fixture's fresh scheduler.
enum SchedulerSemantics {
    /// A count of the tasks each identifier ran, as a handler sees them.
    final class Runs: @unchecked Sendable {
        private let lock = NSLock()
        private var counts: [String: Int] = [:]
        func count(_ identifier: String) -> Int { lock.withLock { counts[identifier] ?? 0 } }
        func note(_ identifier: String) { lock.withLock { counts[identifier, default: 0] += 1 } }
    }

    /// Only pending work is kept or updated: a finished one-shot (done, or failed for
    /// good) is replaced under every policy and runs again; the outcome says which happened.
    static func finishedWorkIsResubmittedUnderEveryPolicy(_ fixture: some SchedulerSemanticsFixture) throws {
        let runs = Runs()
        let scheduler = try fixture.makeScheduler { task in
            runs.note(task.identifier)
            return !task.identifier.hasSuffix(".failing")
        }
        defer { fixture.finish() }
        for policy in [ExistingRequestPolicy.keep, .update, .replace] {
            let done = "semantics.\(policy).done"
            #expect(try scheduler.submit(ScheduledTaskRequest(identifier: done), ifExists: policy) == .added)
            #expect(try fixture.until { try runs.count(done) == 1 && scheduler.pendingRequestCount() == 0 })
            #expect(try scheduler.submit(ScheduledTaskRequest(identifier: done), ifExists: policy) == .resubmitted)
            // Due now, it may have run already: what counts is that it runs again.
            #expect(try fixture.until { try runs.count(done) == 2 && scheduler.pendingRequestCount() == 0 })

            var failing = ScheduledTaskRequest(identifier: "semantics.\(policy).failing")
            failing.retry.maximumAttempts = 1
            #expect(try scheduler.submit(failing, ifExists: policy) == .added)
            #expect(
                try fixture.until { try runs.count(failing.identifier) == 1 && scheduler.pendingRequestCount() == 0 })
            #expect(try scheduler.history(failing.identifier).map(\.result) == [.failed])
            #expect(try scheduler.submit(failing, ifExists: policy) == .resubmitted, "\(policy): failed for good")
            #expect(
                try fixture.until { try runs.count(failing.identifier) == 2 && scheduler.pendingRequestCount() == 0 })
        }
    }

    /// Pending work: `.keep` keeps it as it was, `.update` takes the new settings (and an
    /// identical request changes nothing), `.replace` replaces it; each says so.
    static func pendingWorkFollowsThePolicy(_ fixture: some SchedulerSemanticsFixture) throws {
        let scheduler = try fixture.makeScheduler { _ in true }
        defer { fixture.finish() }
        var request = ScheduledTaskRequest(identifier: "semantics.later")
        request.earliestBegin = WallClockInstant(secondsSinceEpoch: 4_000_000_000)  // in 2096
        #expect(try scheduler.submit(request) == .added)
        var changed = request
        changed.maximumDuration = .seconds(42)
        #expect(try scheduler.submit(changed, ifExists: .keep) == .kept)
        #expect(scheduler.pendingRequests().first?.request.maximumDuration == request.maximumDuration)
        #expect(try scheduler.submit(changed, ifExists: .update) == .updated)
        #expect(try scheduler.submit(changed, ifExists: .update) == .kept, "the same request changes nothing")
        #expect(scheduler.pendingRequests().first?.request.maximumDuration == .seconds(42))
        #expect(try scheduler.submit(request, ifExists: .replace) == .replaced)
        #expect(scheduler.pendingRequests().map(\.request) == [request])
        let outcomes = try scheduler.submit(
            contentsOf: [request, ScheduledTaskRequest(identifier: "semantics.new")].map {
                var later = $0
                later.earliestBegin = request.earliestBegin
                return later
            })
        #expect(outcomes == [.kept, .added])
    }

    /// One limit on identifiers, one error, whichever store: at most 1,024 bytes of UTF-8
    /// and no control character. At the limit (in multi-byte characters too) a request is
    /// stored and runs; past it, or with a NUL, the submit names the field, and a batch
    /// holding one writes nothing. Looking up such an identifier finds nothing.
    static func identifiersAreCheckedAgainstOneLimit(_ fixture: some SchedulerSemanticsFixture) throws {
        let runs = Runs()
        let scheduler = try fixture.makeScheduler { task in
            runs.note(task.identifier)
            return true
        }
        defer { fixture.finish() }
        let prefix = "semantics."
        let longest =
            prefix + String(repeating: "é", count: (ScheduleLimits.maximumIdentifierBytes - prefix.utf8.count) / 2)
        #expect(longest.utf8.count == ScheduleLimits.maximumIdentifierBytes)
        #expect(try scheduler.submit(ScheduledTaskRequest(identifier: longest)) == .added)
        #expect(try fixture.until { try runs.count(longest) == 1 && scheduler.pendingRequestCount() == 0 })
        #expect(try scheduler.history(longest).map(\.result) == [.succeeded])

        for bad in [
            longest + "x", prefix + String(repeating: "a", count: 4000), prefix + "nul\u{0}byte", prefix + "new\nline",
        ] {
            do {
                try scheduler.submit(contentsOf: [
                    ScheduledTaskRequest(identifier: prefix + "fine"), ScheduledTaskRequest(identifier: bad),
                ])
                Issue.record("accepted an identifier of \(bad.utf8.count) bytes")
            } catch {
                #expect(error.code == .invalidRequest && error.field == "identifier", "\(error)")
            }
            #expect(try scheduler.pendingRequestCount() == 0, "nothing of the batch was written")
            #expect(try scheduler.history(bad).isEmpty)
            #expect(throws: SchedulerError.self) { try scheduler.cancel(bad) }
            #expect(throws: SchedulerError.self) { try scheduler.runNow(bad) }
        }
    }

    /// A one-shot submitted again right after its handler completed it — before its end is
    /// recorded — is finished work: it is resubmitted and runs again (the program that
    /// keeps one upload pending while it has something to send relies on it).
    static func aOneShotSubmittedRightAfterItsHandlerCompletedRunsAgain(_ fixture: some SchedulerSemanticsFixture)
        throws
    {
        let runs = Runs()
        let outcomes = Outcomes()
        let holder = SchedulerBox()
        let scheduler = try fixture.makeScheduler(
            answer: { task in
                runs.note(task.identifier)
                return true
            },
            afterCompletion: { task in
                guard runs.count(task.identifier) == 1, let scheduler = holder.scheduler else { return }
                // The synchronous form refuses on the loop: from a thread of its own, queued
                // behind the completion (a task on Swift's shared pool could wait behind
                // the tests that block its few threads).
                let identifier = task.identifier
                Thread.detachNewThread {
                    outcomes.note((try? scheduler.submit(ScheduledTaskRequest(identifier: identifier)))?.description)
                }
            })
        holder.scheduler = scheduler
        defer { fixture.finish() }
        #expect(try scheduler.submit(ScheduledTaskRequest(identifier: "semantics.again")) == .added)
        #expect(
            try fixture.until {
                try runs.count("semantics.again") == 2 && scheduler.pendingRequestCount() == 0
                    && outcomes.all.count == 1
            })
        #expect(outcomes.all == ["resubmitted"])
        #expect(try scheduler.history("semantics.again").map(\.result) == [.succeeded, .succeeded])
    }

    /// A calendar repetition is kept as submitted — read back with its expression, its flex
    /// and its drawn delay — and runs on its calendar: the next run planned for one of its
    /// times, never every second when it names every other one.
    static func aCalendarRepetitionIsKeptAndRunsOnItsCalendar(_ fixture: some SchedulerSemanticsFixture) throws {
        let runs = Runs()
        let scheduler = try fixture.makeScheduler { task in
            runs.note(task.identifier)
            return true
        }
        defer { fixture.finish() }
        var request = ScheduledTaskRequest(identifier: "semantics.calendar")
        request.repetition = Repetition(on: try CalendarSchedule("*:*:0/2 UTC"), flex: .milliseconds(500))
        request.randomizedDelay = .milliseconds(300)
        try scheduler.submit(request)
        #expect(fixture.until { runs.count("semantics.calendar") >= 3 })
        let pending = try #require(scheduler.pendingRequests().first { $0.request.identifier == "semantics.calendar" })
        #expect(pending.request.repetition?.calendar?.expression == "*:*:0/2 UTC")
        #expect(pending.request.repetition?.flex == .milliseconds(500))
        // Planned on the calendar's even seconds, moved by one drawn delay of at most 300 ms
        // (the next run may start from its flex window's opening, 500 ms before).
        let offset = (pending.nextRun + .milliseconds(500)).nanosecondsSinceEpoch % 2_000_000_000
        #expect(offset <= 300_000_000, "next run \(pending.nextRun)")
        let starts = try scheduler.history("semantics.calendar").map(\.startedAt).sorted()
        #expect(starts.count >= 3)
        if let first = starts.first, let last = starts.last, starts.count >= 3 {
            // Two seconds apart (less its flex): three runs take more than 2 s.
            #expect(last - first >= .seconds(2), "\(starts)")
        }
    }

    /// Tags are kept with their requests: found by tag (a tag inside another is another
    /// tag) and cancelled together, in one transaction.
    static func requestsAreFoundAndCancelledByTag(_ fixture: some SchedulerSemanticsFixture) throws {
        let scheduler = try fixture.makeScheduler { _ in true }
        defer { fixture.finish() }
        let later = WallClockInstant(secondsSinceEpoch: Int64(Date().timeIntervalSince1970) + 3600)
        for (identifier, tags) in [
            ("semantics.a", ["nightly", "eu"]), ("semantics.b", ["night"]), ("semantics.c", ["nightly"]),
        ] {
            var request = ScheduledTaskRequest(identifier: identifier)
            request.earliestBegin = later
            request.tags = Set(tags)
            try scheduler.submit(request)
        }
        #expect(scheduler.pendingRequests(tag: "nightly").map(\.request.identifier) == ["semantics.a", "semantics.c"])
        #expect(scheduler.pendingRequests(tag: "eu").first?.request.tags == ["nightly", "eu"])
        #expect(try scheduler.cancel(tag: "nightly") == 2)
        #expect(scheduler.pendingRequests().map(\.request.identifier) == ["semantics.b"])
        #expect(try scheduler.cancel(tag: "nightly") == 0)
    }

    /// A request's input (any bytes) reaches its run, and the run's output is kept with its
    /// attempt in the history, byte for byte.
    static func inputReachesTheRunAndItsOutputIsKept(_ fixture: some SchedulerSemanticsFixture) throws {
        let bytes = (0..<300).map { UInt8($0 % 256) }
        let inputs = Outcomes()
        let scheduler = try fixture.makeScheduler { task in
            inputs.note(task.input == bytes ? "same" : "different: \(task.input.count) bytes")
            try? task.setOutput(task.input.reversed())
            return true
        }
        defer { fixture.finish() }
        var request = ScheduledTaskRequest(identifier: "semantics.data")
        request.input = bytes
        try scheduler.submit(request)
        #expect(try fixture.until { try scheduler.history("semantics.data").first?.result == .succeeded })
        #expect(inputs.all == ["same"])
        #expect(try scheduler.history("semantics.data").first?.output == bytes.reversed())
    }

    /// Every request's state is there to ask for, finished or not: succeeded, failed for
    /// good, enqueued (and why), cancelled (kept, with its time, until submitted again); a
    /// finished request is left as it ended by a cancellation of everything.
    static func workInfoFollowsARequestAndCancellationsAreKept(_ fixture: some SchedulerSemanticsFixture) throws {
        let scheduler = try fixture.makeScheduler { task in task.identifier.hasSuffix(".ok") }
        defer { fixture.finish() }
        let later = WallClockInstant(secondsSinceEpoch: Int64(Date().timeIntervalSince1970) + 3600)
        var failing = ScheduledTaskRequest(identifier: "semantics.bad")
        failing.retry.maximumAttempts = 1
        var waiting = ScheduledTaskRequest(identifier: "semantics.later")
        waiting.earliestBegin = later
        waiting.wakesSystem = true
        try scheduler.submit(contentsOf: [ScheduledTaskRequest(identifier: "semantics.ok"), failing, waiting])
        #expect(
            try fixture.until {
                try scheduler.workInfo("semantics.ok")?.state == .succeeded
                    && scheduler.workInfo("semantics.bad")?.state == .failed
            })
        let done = try #require(try scheduler.workInfo("semantics.ok"))
        #expect(done.lastRun?.result == .succeeded && done.attempt == 1 && done.nextRun == nil)
        #expect(done.waitingFor == nil && done.cancelledAt == nil)
        #expect(try scheduler.workInfo("semantics.bad")?.lastRun?.result == .failed)
        let enqueued = try #require(try scheduler.workInfo("semantics.later"))
        #expect(enqueued.state == .enqueued && enqueued.waitingFor == .plannedTime(later) && enqueued.nextRun == later)
        #expect(enqueued.attempt == 1 && enqueued.lastRun == nil)
        #expect(enqueued.request.wakesSystem, "kept with the request")

        try scheduler.cancel("semantics.later")
        let cancelled = try #require(try scheduler.workInfo("semantics.later"))
        #expect(cancelled.state == .cancelled && cancelled.cancelledAt != nil && cancelled.nextRun == nil)
        #expect(try scheduler.pendingRequestCount() == 0)
        #expect(try scheduler.submit(waiting) == .resubmitted, "a cancelled request is finished")
        #expect(try scheduler.workInfo("semantics.later")?.state == .enqueued)
        #expect(try scheduler.workInfo("semantics.later")?.cancelledAt == nil)
        try scheduler.cancelAll()
        #expect(try scheduler.workInfo("semantics.later")?.state == .cancelled)
        #expect(try scheduler.workInfo("semantics.ok")?.state == .succeeded, "finished: left as it ended")
        #expect(try scheduler.workInfo("semantics.bad")?.state == .failed)
        #expect(try scheduler.workInfo("semantics.none") == nil)
        #expect(try scheduler.workInfo("") == nil, "no request can have it")
    }

    /// A chain runs link after link, each with its prerequisites' outputs; a failure and a
    /// cancellation pass down it; a link whose prerequisite is not submitted is refused.
    static func chainsHandOnOutputsAndPassOnFailuresAndCancellations(_ fixture: some SchedulerSemanticsFixture) throws {
        let handed = Outcomes()
        let scheduler = try fixture.makeScheduler { task in
            let inputs = task.prerequisiteOutputs.sorted { $0.key < $1.key }.map {
                String(decoding: $0.value, as: UTF8.self)
            }
            handed.note("\(task.identifier) <- \(inputs.joined(separator: ","))")
            try? task.setOutput(Array((inputs + [task.identifier]).joined(separator: "|").utf8))
            return !task.identifier.hasSuffix(".bad")
        }
        defer { fixture.finish() }
        func link(_ name: String, after: [String] = []) -> ScheduledTaskRequest {
            var request = ScheduledTaskRequest(identifier: "semantics.\(name)")
            request.prerequisites = Set(after.map { "semantics.\($0)" })
            request.retry.maximumAttempts = 1
            return request
        }
        try scheduler.submit(contentsOf: [link("a"), link("b", after: ["a"]), link("c", after: ["a", "b"])])
        #expect(try fixture.until { try scheduler.workInfo("semantics.c")?.state == .succeeded })
        #expect(
            handed.all == [
                "semantics.a <- ", "semantics.b <- semantics.a",
                "semantics.c <- semantics.a,semantics.a|semantics.b",
            ])
        #expect(
            try scheduler.history("semantics.c").first?.output
                == Array("semantics.a|semantics.a|semantics.b|semantics.c".utf8))

        try scheduler.submit(contentsOf: [link("x.bad"), link("y", after: ["x.bad"]), link("z", after: ["y"])])
        #expect(try fixture.until { try scheduler.workInfo("semantics.z")?.state == .failed })
        #expect(try scheduler.workInfo("semantics.y")?.stoppedBy == "semantics.x.bad")
        #expect(try scheduler.workInfo("semantics.z")?.stoppedBy == "semantics.y")
        #expect(try scheduler.history("semantics.z").isEmpty)

        var later = link("p")
        later.earliestBegin = WallClockInstant(secondsSinceEpoch: Int64(Date().timeIntervalSince1970) + 3600)
        try scheduler.submit(contentsOf: [later, link("q", after: ["p"])])
        #expect(try scheduler.workInfo("semantics.q")?.waitingFor == .prerequisite("semantics.p"))
        try scheduler.cancel("semantics.p")
        #expect(try scheduler.workInfo("semantics.q")?.state == .cancelled)
        #expect(throws: SchedulerError.self) { try scheduler.submit(link("r", after: ["nowhere"])) }
        #expect(try scheduler.workInfo("semantics.r") == nil)
    }

    /// What the checks' handlers saw, safe from any thread.
    final class Outcomes: @unchecked Sendable {
        private let lock = NSLock()
        private var values: [String?] = []
        var all: [String?] { lock.withLock { values } }
        func note(_ value: String?) { lock.withLock { values.append(value) } }
    }

    /// The scheduler, for a handler made before it.
    /// The scheduler a handler submits to, held weakly: a handler that held its own
    /// scheduler strongly would keep it (and a fleet store's connections) alive for good.
    final class SchedulerBox: @unchecked Sendable {
        private let lock = NSLock()
        private weak var value: Scheduler?
        var scheduler: Scheduler? {
            get { lock.withLock { value } }
            set { lock.withLock { value = newValue } }
        }
    }
}
