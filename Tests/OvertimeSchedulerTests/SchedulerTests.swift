import Foundation
import Overtime
import OvertimeSupport
import OvertimeTestSupport
import OvertimeTesting
import Testing

@_spi(ScheduleStore) @testable import OvertimeScheduler

@Suite(
    "Scheduler on virtual time: when runs start, retries, restarts, misuse", .serialized,
    // Minutes: under ThreadSanitizer its queue threads wait on the Swift runtime's locks
    // (ThreadSanitizer.swift).
    .timeLimit(.minutes(5)))
struct SchedulerTests {
    private func hourly(_ identifier: String = "job", flex: Duration = .seconds(600)) -> ScheduledTaskRequest {
        var request = ScheduledTaskRequest(identifier: identifier)
        request.repetition = Repetition(every: .seconds(3600), flex: flex)
        return request
    }

    @Test func aOneShotRunsAtItsEarliestBeginNotANanosecondEarlierAndNeverAgainAfterARestart() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness()
            defer { h.finish() }
            try h.current.start()
            var request = ScheduledTaskRequest(identifier: "job")
            let earliest = h.now + .seconds(100)
            request.earliestBegin = earliest
            try h.current.submit(request)
            h.advance(to: earliest - .nanoseconds(1))
            #expect(h.attempts.count == 0)
            h.advance(by: .nanoseconds(1))
            #expect(h.attempts.all.map(\.at) == [earliest])
            let history = try h.current.history("job")
            #expect(history.map(\.result) == [.succeeded] && history.first?.endedAt == earliest)
            // A restart: the completed run is never repeated.
            try h.open()
            try h.current.start()
            h.advance(by: .seconds(86_400))
            #expect(h.attempts.count == 1)
            #expect(h.current.pendingRequests().isEmpty)
        }
    }

    /// BGTaskScheduler's pattern, a handler that refers to its own task, keeps neither the
    /// task nor (through it) the scheduler and its store alive once the run has ended:
    /// completed, or expired and then completed.
    @Test func aTaskWhoseExpirationHandlerRefersToItIsLetGoOnceItsRunEnds() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness()
            defer { h.finish() }
            struct Held: @unchecked Sendable { weak var task: ScheduledTask? }
            let seen = Locked<[Held]>([])
            try h.current.register("completes") { task in
                task.expirationHandler = { task.setTaskCompleted(success: false) }
                seen.withLock { $0.append(Held(task: task)) }
                task.setTaskCompleted(success: true)
            }
            try h.current.register("expires") { task in
                task.expirationHandler = { task.setTaskCompleted(success: false) }
                seen.withLock { $0.append(Held(task: task)) }
            }
            try h.current.start()
            try h.current.submit(ScheduledTaskRequest(identifier: "completes"))
            var expiring = ScheduledTaskRequest(identifier: "expires")
            expiring.maximumDuration = .seconds(10)
            expiring.retry.maximumAttempts = 1
            try h.current.submit(expiring)
            h.advance(by: .seconds(30))
            #expect(try h.current.history("completes").map(\.result) == [.succeeded])
            #expect(try h.current.history("expires").first?.result == .expired)
            #expect(seen.withLock { $0.count } == 2)
            #expect(seen.withLock { $0.allSatisfy { $0.task == nil } }, "both tasks were let go")
        }
    }

    @Test func aWeekOfAnHourlyRequestWithFlexWhereEveryFifthRunFailsOnce() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness()
            defer { h.finish() }
            let runs = Recorder<Int>()
            h.script.withLock {
                $0 = { attempt in
                    if attempt.attempt > 1 { return .succeed }
                    runs.append(1)
                    return runs.count % 5 == 0 ? .fail : .succeed
                }
            }
            try h.current.start()
            var request = hourly()
            request.retry.initialDelay = .seconds(60)
            let start = h.now
            try h.current.submit(request)
            h.advance(to: start + .seconds(7 * 24 * 3600))
            // Expected: the first run at submission, then each at ten minutes before the hour
            // (the flex window opens), the grid never drifting; every fifth run's first attempt
            // fails and its retry comes 60 s later, under the same run ID.
            var expected: [(WallClockInstant, Int)] = []
            for hour in 0...(7 * 24) {
                let time = hour == 0 ? start : start + .seconds(hour * 3600 - 600)
                guard time <= start + .seconds(7 * 24 * 3600) else { break }
                expected.append((time, 1))
                if (hour + 1) % 5 == 0 { expected.append((time + .seconds(60), 2)) }
            }
            let seen = h.attempts.all
            #expect(seen.count == expected.count)
            #expect(seen.map(\.at) == expected.map(\.0), "planned times and backoff delays, exactly")
            #expect(seen.map(\.attempt) == expected.map(\.1))
            for (index, attempt) in seen.enumerated() where attempt.attempt == 2 {
                #expect(seen[index - 1].runID == attempt.runID, "a retry keeps its run's ID")
            }
            let history = try h.current.history("job", limit: 1000)
            #expect(history.filter { $0.result == .failed }.count == expected.filter { $0.1 == 2 }.count)
            #expect(history.allSatisfy { $0.endedAt != nil }, "no overlap: each attempt ended before the next began")
        }
    }

    @Test func keepReplaceAndUpdateAnExistingRequest() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness()
            defer { h.finish() }
            try h.current.start()
            let start = h.now
            try h.current.submit(hourly())
            h.advance(by: .seconds(1800))
            #expect(h.attempts.count == 1)
            var other = hourly(flex: .zero)
            other.repetition = Repetition(every: .seconds(7200))
            try h.current.submit(other)  // keep: the default
            #expect(h.current.pendingRequests().first?.request.repetition?.interval == .seconds(3600))
            try h.current.submit(other, ifExists: .update)  // new settings, same schedule
            let updated = try #require(h.current.pendingRequests().first)
            #expect(updated.request.repetition?.interval == .seconds(7200))
            #expect(updated.nextRun == start + .seconds(3600), "the planned time is kept")
            try h.current.submit(other, ifExists: .replace)  // a new schedule from now: due at once
            h.settle()
            #expect(h.attempts.count == 2 && h.attempts.all.last?.at == start + .seconds(1800))
            #expect(h.current.pendingRequests().first?.nextRun == start + .seconds(1800 + 7200))
            // The scope (meaningful in a fleet's store) is kept like every other setting.
            other.scope = .perInstance
            try h.current.submit(other, ifExists: .update)
            try h.open()
            try h.current.start()
            let reopened = try #require(h.current.pendingRequests().first)
            #expect(reopened.request == other && reopened.nextRun == start + .seconds(1800 + 7200))
        }
    }

    @Test func theConcurrencyLimitHoldsAndAQueueDueNowIsNotSpaced() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(identifiers: ["a", "b", "c"]) {
                $0.maximumConcurrentRuns = 1
                $0.startSpacing = .seconds(2)
            }
            defer { h.finish() }
            h.script.withLock { $0 = { _ in .hang } }
            try h.current.start()
            let start = h.now
            for identifier in ["a", "b", "c"] { try h.current.submit(ScheduledTaskRequest(identifier: identifier)) }
            h.advance(by: .seconds(10))
            #expect(h.attempts.all.map(\.identifier) == ["a"], "one at a time")
            let waiting = h.current.pendingRequests().filter { $0.request.identifier != "a" }
            #expect(waiting.map(\.waitingFor) == [.concurrencyLimit, .concurrencyLimit])
            h.script.withLock { $0 = { _ in .succeed } }
            h.hanging.all.first?.setTaskCompleted(success: true)
            h.settle()
            // Fell due while the scheduler ran: b and c follow a as soon as a slot frees.
            #expect(h.attempts.all.map(\.identifier) == ["a", "b", "c"])
            #expect(h.attempts.all.map(\.at) == [start, start + .seconds(10), start + .seconds(10)])
        }
    }

    /// A queue of one-shots submitted due now runs as fast as the concurrency limit allows
    /// at the default spacing: spacing paces only the backlog a start finds.
    @Test func defaultSpacingDoesNotThrottleAQueueOfOneShots() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(prefixes: ["q."]) {
                $0.startSpacing = SchedulerConfiguration(storePath: "/x").startSpacing
            }
            defer { h.finish() }
            try h.current.start()
            let start = h.now
            try h.current.submit(contentsOf: (0..<200).map { ScheduledTaskRequest(identifier: "q.\($0)") })
            // Four at a time (the default limit), each four after the last ended: no time passes.
            for _ in 0..<100 {
                guard h.attempts.count < 200 else { break }
                h.settle()
            }
            #expect(h.attempts.count == 200, "all ran without time passing")
            #expect(h.attempts.all.allSatisfy { $0.at == start })
        }
    }

    /// Runs that fell due while the process was not running (a backlog) start spaced after
    /// the next start; one submitted due after the start does not wait behind the spacing.
    @Test func theBacklogAStartFindsIsSpaced() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(identifiers: ["a", "b", "c"]) { $0.startSpacing = .seconds(2) }
            defer { h.finish() }
            try h.current.start()
            for identifier in ["a", "b", "c"] {
                var request = ScheduledTaskRequest(identifier: identifier)
                request.earliestBegin = h.now + .seconds(60)
                try h.current.submit(request)
            }
            h.current.abandon()  // the process ends; an hour later it starts again
            h.clock.advance(by: .seconds(3600))
            try h.open(identifiers: ["a", "b", "c"]) { $0.startSpacing = .seconds(2) }
            let restart = h.now
            try h.current.start()
            h.advance(by: .seconds(10))
            #expect(h.attempts.all.map(\.at) == [restart, restart + .seconds(2), restart + .seconds(4)])
        }
    }

    @Test func aWallClockStepForwardCatchesUpOnceAndBackwardNeverRunsEarly() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness()
            defer { h.finish() }
            try h.current.start()
            let start = h.now
            try h.current.submit(hourly(flex: .zero))
            h.settle()
            #expect(h.attempts.count == 1)
            h.clock.stepWallClock(by: .seconds(5 * 3600 + 60))  // NTP jumps five hours ahead
            h.settle()
            #expect(h.attempts.count == 2, "one catch-up run for the missed hours")
            #expect(h.attempts.all.last?.at == start + .seconds(5 * 3600 + 60))
            #expect(h.current.pendingRequests().first?.nextRun == start + .seconds(6 * 3600), "back on the grid")
            h.clock.stepWallClock(by: .seconds(-3 * 3600))  // and three hours back
            h.settle()
            let next = try #require(h.current.pendingRequests().first?.nextRun)
            #expect(next > h.now && next - h.now <= .seconds(3600), "within an interval, on the grid")
            h.advance(to: next - .nanoseconds(1))
            #expect(h.attempts.count == 2, "never early")
            h.advance(by: .nanoseconds(1))
            #expect(h.attempts.count == 3 && h.attempts.all.last?.at == next)
        }
    }

    /// Start spacing is measured on the monotonic clock: after the wall clock goes back
    /// three hours, a one-shot due now starts after the spacing, not three hours later.
    @Test func aBackwardWallClockStepDoesNotHoldStartsForTheSizeOfTheStep() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(identifiers: ["first", "second"]) { $0.startSpacing = .milliseconds(500) }
            defer { h.finish() }
            try h.current.start()
            try h.current.submit(ScheduledTaskRequest(identifier: "first"))
            h.settle()
            #expect(h.attempts.count == 1)
            h.clock.stepWallClock(by: .seconds(-3 * 3600))
            h.settle()
            try h.current.submit(ScheduledTaskRequest(identifier: "second"))
            h.settle()
            h.advance(by: .milliseconds(500))
            #expect(h.attempts.all.map(\.identifier) == ["first", "second"], "held back by the step")
        }
    }

    /// Every attempt of a run stands for its planned time (`dueTime`), across a failure's
    /// retry and a restart that interrupted it; each attempt's own time is `attemptDueTime`.
    @Test func retriesKeepThePlannedTimeTheirRunStandsFor() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness()
            defer { h.finish() }
            h.script.withLock { $0 = { _ in .hang } }
            try h.current.start()
            var request = hourly(flex: .zero)
            request.retry.initialDelay = .seconds(60)
            request.retry.maximumAttempts = 5
            let planned = h.now
            try h.current.submit(request)
            h.settle()
            let first = try #require(h.hanging.all.first)
            #expect(first.dueTime == planned && first.attemptDueTime == planned)
            h.advance(by: .seconds(10))
            first.setTaskCompleted(success: false)
            h.advance(by: .seconds(60))
            let second = try #require(h.hanging.all.dropFirst().first)
            #expect(second.attempt == 2 && second.dueTime == planned, "the planned time, not the retry's")
            #expect(second.attemptDueTime == planned + .seconds(70))
            // The process ends during the second attempt: the next start retries it.
            try h.open()
            try h.current.start()
            h.settle()
            let third = try #require(h.hanging.all.dropFirst(2).first)
            #expect(third.attempt == 3 && third.runID == first.runID && third.dueTime == planned)
            #expect(third.attemptDueTime == h.now)
        }
    }

    @Test func aRunInProgressWhenTheProcessEndedIsRetriedOnceUnderItsRunID() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness()
            defer { h.finish() }
            h.script.withLock { $0 = { _ in .hang } }
            try h.current.start()
            try h.current.submit(ScheduledTaskRequest(identifier: "job"))
            h.settle()
            let first = try #require(h.attempts.all.first)
            // The process ends while the run is in progress; the next start finds it.
            h.script.withLock { $0 = { _ in .succeed } }
            try h.open()
            #expect(h.current.recovery.interruptedRuns.map(\.runID) == [first.runID])
            try h.current.start()
            h.settle()
            let retry = try #require(h.attempts.all.last)
            #expect(h.attempts.count == 2 && retry.runID == first.runID && retry.attempt == 2)
            let history = try h.current.history("job")
            #expect(history.map(\.result) == [.succeeded, .interrupted])
        }
    }

    /// A run interrupted twice in a row counts as a failed attempt; with none left, it is
    /// given up and the repeating request goes on with its grid. Its next run takes a run
    /// ID of its own: the interrupted attempts stay in the history as they were.
    @Test func aRunGivenUpAfterTwoInterruptionsLeavesItsRunIDAndItsHistoryBehind() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness()
            defer { h.finish() }
            h.script.withLock { $0 = { _ in .hang } }
            try h.current.start()
            var request = hourly(flex: .zero)
            request.retry.maximumAttempts = 1
            try h.current.submit(request)
            h.settle()
            let first = try #require(h.attempts.all.first)
            // The process ends during the run, then during its retry.
            try h.open()
            try h.current.start()
            h.settle()
            let retry = try #require(h.attempts.all.last)
            #expect(h.attempts.count == 2 && retry.runID == first.runID && retry.attempt == 2)
            h.script.withLock { $0 = { _ in .succeed } }
            try h.open()
            try h.current.start()
            h.settle()
            #expect(h.attempts.count == 2, "given up: not retried")
            h.advance(by: .seconds(3600))
            let next = try #require(h.attempts.all.last)
            #expect(h.attempts.count == 3 && next.runID != first.runID && next.attempt == 1)
            let history = try h.current.history("job").map {
                "\($0.runID == first.runID ? "first" : "next") \($0.attempt) \($0.result)"
            }
            #expect(history == ["next 1 succeeded", "first 2 interrupted", "first 1 interrupted"])
        }
    }

    @Test func aRunNeverCompletedIsTerminatedRecordedAndRetried() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness()
            defer { h.finish() }
            h.script.withLock { $0 = { attempt in attempt.attempt == 1 ? .hang : .succeed } }
            try h.current.start()
            var request = ScheduledTaskRequest(identifier: "job")
            request.maximumDuration = .seconds(60)
            let start = h.now
            try h.current.submit(request)
            h.advance(by: .seconds(60))
            let history = try h.current.history("job")
            #expect(history.first?.result == .terminated)
            #expect(history.first?.stopReason?.contains("job") == true, "the termination report")
            h.advance(by: .seconds(30))  // the first backoff
            #expect(h.attempts.all.map(\.attempt) == [1, 2])
            #expect(h.attempts.all.last?.at == start + .seconds(90))
        }
    }

    @Test func misuseIsATypedErrorNeverATrap() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness()
            defer { h.finish() }
            func code(_ body: () throws -> Void) -> SchedulerError.Code? {
                do {
                    try body()
                    return nil
                } catch let error as SchedulerError {
                    return error.code
                } catch {
                    return nil
                }
            }
            #expect(code { try h.current.register("job", handler: { _ in }) } == .alreadyRegistered)
            #expect(code { try h.current.register(prefix: "", handler: { _ in }) } == .invalidRequest)
            try h.current.register(prefix: "kind.", handler: { _ in })
            #expect(code { try h.current.register(prefix: "kind.", handler: { _ in }) } == .alreadyRegistered)
            #expect(code { try h.current.submit(ScheduledTaskRequest(identifier: "nobody")) } == .notRegistered)
            var bad = hourly()
            bad.repetition = Repetition(every: .seconds(60), flex: .seconds(120))
            #expect(code { try h.current.submit(bad) } == .invalidRequest)
            try h.current.start()
            #expect(code { try h.current.start() } == .alreadyStarted)
            #expect(code { try h.current.register("late", handler: { _ in }) } == .registeredAfterStart)
            #expect(code { try h.current.cancel("nothing") } == .unknownIdentifier)
            // Completing twice warns, counts, and changes nothing.
            h.script.withLock { $0 = { _ in .hang } }
            try h.current.submit(ScheduledTaskRequest(identifier: "job"))
            h.settle()
            let task = try #require(h.hanging.all.first)
            task.setTaskCompleted(success: true)
            task.setTaskCompleted(success: false)
            h.settle()
            #expect(try h.current.history("job").map(\.result) == [.succeeded])
            #expect(h.env.logs.entries.all.contains { $0.message.contains("setTaskCompleted called again") })
        }
    }

    /// Every duration is range-checked at submission, naming the field and the range:
    /// intervals that overflowed a plan (and ran every 0.5 s) or that no store could keep
    /// up with are refused, and nothing is stored.
    @Test func durationsOutOfRangeAreRefusedNamingTheField() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness()
            defer { h.finish() }
            let years250 = Duration.seconds(250 * 365 * 86_400)
            let cases: [(String, (inout ScheduledTaskRequest) -> Void)] = [
                ("repetition.interval", { $0.repetition = Repetition(every: .seconds(Int64.max)) }),
                ("repetition.interval", { $0.repetition = Repetition(every: years250, flex: years250) }),
                ("repetition.interval", { $0.repetition = Repetition(every: .nanoseconds(1)) }),
                ("repetition.interval", { $0.repetition = Repetition(every: .zero) }),
                ("repetition.flex", { $0.repetition = Repetition(every: .seconds(60), flex: .seconds(-1)) }),
                ("randomizedDelay", { $0.randomizedDelay = years250 }),
                ("randomizedDelay", { $0.randomizedDelay = .seconds(-1) }),
                ("maximumDuration", { $0.maximumDuration = .seconds(Int64.max) }),
                ("maximumDuration", { $0.maximumDuration = .seconds(1) }),
                ("retry.initialDelay", { $0.retry.initialDelay = .seconds(-5) }),
                ("retry.maximumDelay", { $0.retry.maximumDelay = years250 }),
                ("retry.maximumAttempts", { $0.retry.maximumAttempts = 0 }),
            ]
            for (field, change) in cases {
                var request = ScheduledTaskRequest(identifier: "job")
                change(&request)
                do throws(SchedulerError) {
                    try h.current.submit(request)
                    Issue.record("\(field) out of range was accepted")
                } catch {
                    #expect(error.code == .invalidRequest)
                    #expect(error.field == field, "\(error)")
                    #expect(error.message.contains(field) && error.message.contains("between"), "\(error)")
                }
            }
            try h.current.start()
            h.clock.advance(by: .seconds(1800))
            h.settle()
            #expect(h.attempts.count == 0, "nothing refused was stored or run")
            var shortest = ScheduledTaskRequest(identifier: "job")
            shortest.repetition = Repetition(every: ScheduleLimits.minimumInterval)
            try h.current.submit(shortest)
            var configuration = SchedulerConfiguration(storePath: h.folder.path + "/other.db")
            configuration.startSpacing = .seconds(-1)
            #expect(throws: SchedulerError.self) { try Scheduler(runtime: h.env.runtime, configuration: configuration) }
        }
    }

    /// The scheduler's metrics go to the runtime's metrics factory, labelled by the
    /// handler that serves the run (its identifier or its prefix), so a million
    /// `thumbnail.N` one-shots are one series, not a million.
    @Test func metricsGoToTheRuntimesFactoryLabelledByHandler() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(identifiers: ["job"], prefixes: ["thumbnail."])
            defer { h.finish() }
            try h.current.start()
            for identifier in ["job", "thumbnail.4711", "thumbnail.4712", "thumbnail.4713"] {
                try h.current.submit(ScheduledTaskRequest(identifier: identifier))
            }
            h.settle()
            h.clock.advance(by: .seconds(5))
            h.settle()
            #expect(h.attempts.count == 4)
            let runs = "overtime_scheduler_runs_total"
            #expect(h.env.counter(runs, [("handler", "thumbnail."), ("result", "succeeded")]) == 3)
            #expect(h.env.counter(runs, [("handler", "job"), ("result", "succeeded")]) == 1)
            let series = h.env.metrics.counters.filter { $0.label == runs }
            #expect(series.count == 2, "one series per handler and result: \(series.map(\.dimensions))")
            #expect(!series.contains { $0.dimensions.contains { $0.1.hasPrefix("thumbnail.47") } })
        }
    }

    @Test func theScheduleTableNamesTheInstanceHoldingARunInAFleet() {
        let held = PendingRequest(
            request: ScheduledTaskRequest(identifier: "report"), nextRun: WallClockInstant(secondsSinceEpoch: 0),
            attempt: 1, waitingFor: .running, holder: "worker-7:4242")
        let local = PendingRequest(
            request: ScheduledTaskRequest(identifier: "sync"), nextRun: WallClockInstant(secondsSinceEpoch: 0),
            attempt: 1, waitingFor: .running, holder: nil)
        let table = Scheduler.scheduleTable([held, local]).split(separator: "\n")
        #expect(table.count == 3 && table[1].hasSuffix("running on worker-7:4242"), "\(table)")
        #expect(table[2].hasSuffix("running") && !table[2].contains(" on "), "\(table)")
    }
}
