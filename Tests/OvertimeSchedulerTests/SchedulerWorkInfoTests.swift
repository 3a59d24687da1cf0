import Foundation
import Overtime
import OvertimeSchedulerTesting
import OvertimeSupport
import OvertimeTestSupport
import OvertimeTesting
import Testing

@_spi(ScheduleStore) @testable import OvertimeScheduler

/// Work info: where a request stands through its whole life, asked for and observed as it
/// changes, cancellations kept; on virtual time against a real SQLite file.
@Suite("Scheduler work info", .serialized, .timeLimit(.minutes(2)))
struct SchedulerWorkInfoTests {
    @Test func aRequestIsEnqueuedThenBlockedThenRunningThenRetriedThenSucceeded() async throws {
        try await onOwnThread {
            let network = ManualConditionSource(SystemConditions(networkAvailable: false))
            let h = try SchedulerHarness(configure: { $0.conditions = network })
            defer { h.finish() }
            h.script.withLock { $0 = { _ in .hang } }
            try h.current.start()
            var request = ScheduledTaskRequest(identifier: "job")
            let begin = h.now + .seconds(60)
            request.earliestBegin = begin
            request.requirements = [.network]
            request.retry.maximumAttempts = 3
            request.retry.initialDelay = .seconds(30)
            try h.current.submit(request)
            var info = try #require(try h.current.workInfo("job"))
            #expect(info.state == .enqueued && info.waitingFor == .plannedTime(begin) && info.nextRun == begin)
            #expect(info.attempt == 1 && info.lastRun == nil && info.progress == nil)

            h.advance(by: .seconds(60))
            info = try #require(try h.current.workInfo("job"))
            #expect(info.state == .blocked && info.waitingFor == .requirement(.network), "due, but no network")
            #expect(SchedulerTestControl.answer(h, "work", ["job"])?.contains("requirement 'network'") == true)

            network.update { $0.networkAvailable = true }
            h.settle()
            let first = try #require(h.hanging.all.first)
            first.setProgress(0.25, message: "a quarter")
            info = try #require(try h.current.workInfo("job"))
            #expect(info.state == .running && info.attempt == 1 && info.waitingFor == .running)
            #expect(info.progress == RunProgress(fraction: 0.25, message: "a quarter"))
            let gauge = try h.env.metrics.expectGauge("overtime_scheduler_run_progress_ratio", [("handler", "job")])
            #expect(gauge.lastValue == 0.25, "progress in metrics")

            first.setTaskCompleted(success: false)
            h.settle()
            info = try #require(try h.current.workInfo("job"))
            #expect(info.state == .enqueued && info.attempt == 2, "a retry waits for its backoff")
            #expect(info.waitingFor == .retry(at: h.now + .seconds(30)) && info.lastRun?.result == .failed)
            #expect(info.progress == nil, "progress is the run's, gone with it")

            h.advance(by: .seconds(30))
            let second = try #require(h.hanging.all.last)
            #expect(second.attempt == 2)
            #expect(try h.current.workInfo("job")?.state == .running)
            try second.setOutput(Array("done".utf8))
            second.setTaskCompleted(success: true)
            h.settle()
            info = try #require(try h.current.workInfo("job"))
            #expect(info.state == .succeeded && info.state.isFinished && info.attempt == 2)
            #expect(info.nextRun == nil && info.waitingFor == nil && info.lastRun?.output == Array("done".utf8))
            let text = SchedulerTestControl.answer(h, "work", ["job"]) ?? ""
            #expect(text.contains("succeeded") && text.contains("2 of 3") && text.contains("\"done\""), "\(text)")

            try h.open()  // the next process reads the same
            try h.current.start()
            #expect(try h.current.workInfo("job")?.state == .succeeded)
            #expect(SchedulerTestControl.answer(h, "work", ["nope"]) == "work: no request 'nope'")
        }
    }

    @Test func aRequestFailedForGoodIsFailedAndTheConcurrencyLimitBlocks() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(
                identifiers: ["a", "b", "bad"], configure: { $0.maximumConcurrentRuns = 1 })
            defer { h.finish() }
            h.script.withLock { $0 = { attempt in attempt.identifier == "bad" ? .fail : .hang } }
            try h.current.start()
            try h.current.submit(ScheduledTaskRequest(identifier: "a"))
            h.settle()
            try h.current.submit(ScheduledTaskRequest(identifier: "b"))
            h.settle()
            #expect(try h.current.workInfo("a")?.state == .running)
            let b = try #require(try h.current.workInfo("b"))
            #expect(b.state == .blocked && b.waitingFor == .concurrencyLimit)
            h.hanging.all.first?.setTaskCompleted(success: true)
            h.settle()
            #expect(try h.current.workInfo("b")?.state == .running, "its turn came")
            h.hanging.all.last?.setTaskCompleted(success: true)

            var failing = ScheduledTaskRequest(identifier: "bad")
            failing.retry.maximumAttempts = 2
            failing.retry.initialDelay = .seconds(10)
            try h.current.submit(failing)
            h.advance(by: .seconds(60))
            let bad = try #require(try h.current.workInfo("bad"))
            #expect(bad.state == .failed && bad.attempt == 2 && bad.lastRun?.result == .failed)
        }
    }

    @Test func cancellationsAreKeptWithTheirTimeWhileRunningAndByTagAndGoWithRetention() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness(
                prefixes: ["job."],
                configure: {
                    $0.historyRetention = HistoryRetention(
                        maximumAge: .seconds(600), maximumAttemptsPerRequest: nil, checkInterval: .seconds(60))
                })
            defer { h.finish() }
            h.script.withLock { $0 = { attempt in attempt.identifier == "job.running" ? .hang : .succeed } }
            try h.current.start()
            // Retention prunes when runs end (it arms no timer of its own): one every minute.
            var tick = ScheduledTaskRequest(identifier: "job.tick")
            tick.repetition = Repetition(every: .seconds(60))
            try h.current.submit(tick)
            var tagged = ScheduledTaskRequest(identifier: "job.tagged")
            tagged.earliestBegin = h.now + .seconds(3600)
            tagged.tags = ["batch"]
            try h.current.submit(tagged)
            try h.current.submit(ScheduledTaskRequest(identifier: "job.running"))
            h.settle()
            let task = try #require(h.hanging.all.first)
            let stopped = Locked(false)
            task.expirationHandler = {
                stopped.withLock { $0 = true }
                task.setTaskCompleted(success: false)
            }
            let cancelledAt = h.now
            try h.current.cancel("job.running")
            h.settle()
            #expect(stopped.withLock { $0 }, "the run in progress was told to stop")
            let info = try #require(try h.current.workInfo("job.running"))
            #expect(info.state == .cancelled && info.cancelledAt == cancelledAt)
            #expect(info.lastRun?.result == .expired && info.attempt == 1, "its attempt is kept")
            #expect(try h.current.cancel(tag: "batch") == 1)
            #expect(try h.current.workInfo("job.tagged")?.state == .cancelled)
            #expect(SchedulerTestControl.answer(h, "work", ["job.tagged"])?.contains("cancelled") == true)

            try h.current.cancel("job.running")  // cancelled already: left as it is
            #expect(try h.current.workInfo("job.running")?.cancelledAt == cancelledAt)
            h.advance(by: .seconds(3600 * 2))
            #expect(
                h.attempts.all.filter { $0.identifier != "job.tick" }.count == 1, "nothing cancelled ran again")
            #expect(try h.current.workInfo("job.running") == nil, "pruned with its history after the age")
            #expect(try h.current.workInfo("job.tagged") == nil)

            // One cancelled later than it was submitted stays the age from its cancellation.
            var late = ScheduledTaskRequest(identifier: "job.late")
            late.earliestBegin = h.now + .seconds(3600 * 24)
            try h.current.submit(late)
            h.advance(by: .seconds(3600))
            try h.current.cancel("job.late")
            h.advance(by: .seconds(300))
            #expect(try h.current.workInfo("job.late")?.state == .cancelled, "cancelled 5 minutes ago: kept")
            h.advance(by: .seconds(400))
            #expect(try h.current.workInfo("job.late") == nil)
        }
    }

    @Test func updatesArriveAsTheRequestChangesAndStopWithTheConsumer() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness()
            defer { h.finish() }
            h.script.withLock { $0 = { _ in .hang } }
            try h.current.start()
            let seen = Recorder<WorkInfo>()
            let scheduler = h.current
            let consumer = taskOnOwnThread {
                for await info in scheduler.workInfoUpdates("job") { seen.append(info) }
            }
            defer { consumer.cancel() }
            let firstOnly = taskOnOwnThread { () -> WorkInfo? in
                for await info in scheduler.workInfoUpdates("job") { return info }
                return nil
            }
            #expect(waitFor { scheduler.watching.load(ordering: .relaxed) == 2 }, "both watch")
            var request = ScheduledTaskRequest(identifier: "job")
            request.earliestBegin = h.now + .seconds(10)
            try await h.current.submit(request)
            h.advance(by: .seconds(10))
            let task = try #require(h.hanging.all.first)
            task.setProgress(0.5, message: "half")
            h.settle()
            task.setTaskCompleted(success: true)
            h.settle()
            #expect(waitFor { seen.all.last?.state == .succeeded }, "\(seen.all.map(\.state))")
            var states: [WorkInfo.State] = []
            for info in seen.all where states.last != info.state { states.append(info.state) }
            #expect(states == [.enqueued, .running, .succeeded], "\(states)")
            #expect(seen.all.contains { $0.progress == RunProgress(fraction: 0.5, message: "half") })
            #expect(zip(seen.all, seen.all.dropFirst()).allSatisfy { $0 != $1 }, "only changes are yielded")

            let first = try await firstOnly.value
            #expect(first != nil)
            #expect(waitFor { h.current.watching.load(ordering: .relaxed) == 1 }, "the one that stopped is let go")
            consumer.cancel()
            #expect(waitFor { h.current.watching.load(ordering: .relaxed) == 0 })
            let impossible = h.current.workInfoUpdates("")
            let count = await Task { () -> Int in
                var count = 0
                for await _ in impossible { count += 1 }
                return count
            }.value
            #expect(count == 0, "an identifier no request can have: the sequence ends at once")
        }
    }

    @Test func theSequenceEndsWhenTheSchedulerIsLetGo() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness()
            defer { h.finish() }
            try h.current.start()
            let updates = h.current.workInfoUpdates("job")
            let ended = Locked(false)
            let consumer = taskOnOwnThread {
                for await _ in updates {}
                ended.withLock { $0 = true }
            }
            defer { consumer.cancel() }
            h.current.abandon()
            #expect(waitFor { ended.withLock { $0 } })
        }
    }

    /// Waits (real time, at most 10 s) until `condition` holds.
    private func waitFor(_ condition: () -> Bool) -> Bool {
        for _ in 0..<1000 {
            if condition() { return true }
            usleep(10_000)
        }
        return condition()
    }
}
