import Foundation
import Overtime
import OvertimeSupport
import OvertimeTestSupport
import OvertimeTesting
import Testing
import Tracing

@testable import OvertimeLogUploader

@Suite("LogUploader: uploads inside a grant", .timeLimit(.minutes(3)))
struct UploaderTests {
    struct Setup {
        let env: VirtualRuntime
        let folder: TemporaryDirectory
        let spool: Spool
        let uploader: LogUploader

        init(
            sink: (TemporaryDirectory) -> any LogSink, lines: Int = 300, budget: Duration = .seconds(30),
            lead: Duration = .seconds(5), tracer: (any Tracer)? = nil,
            volume: InMemorySpoolVolume = InMemorySpoolVolume()
        ) throws {
            env = try VirtualRuntime(budget: budget, lead: lead) { $0.tracer = tracer }
            folder = TemporaryDirectory("uploader")
            var options = SpoolConfiguration()
            options.segmentBytes = 4096
            // The spool in memory, on the runtime's virtual clock: nothing here waits for a disk.
            spool = try Spool(
                directory: "/spool", configuration: options, clock: env.clock, storage: .memory(volume))
            for index in 0..<lines { try spool.append("line \(index) " + String(repeating: "x", count: 60)) }
            var configuration = UploaderConfiguration()
            configuration.initialRetryDelay = .milliseconds(5)
            configuration.maximumRetryDelay = .milliseconds(20)
            uploader = LogUploader(
                runtime: env.runtime, spool: spool, sink: sink(folder), configuration: configuration,
                logger: env.logs.logger)
            uploader.start()
        }

        /// Drives the drain task to its end (backoffs on virtual time). Waits for queued
        /// requests first, so that a drain started by an observer of one has started.
        func waitForDrain() async {
            env.waitForQueuedRequests()
            await uploader.drive(env.clock) { !uploader.isDraining }
            env.waitForQueuedRequests()
        }

        func finish() {
            env.shutDown()
            folder.remove()
        }
    }

    @Test func enteringTheBackgroundUploadsEverythingToTheDirectorySinkAndSuspends() async throws {
        let setup = try Setup(sink: { DirectorySink(root: $0.path + "/collector") })
        let pendingBefore = setup.spool.pendingLines
        setup.env.runtime.requestBackground()
        setup.env.waitForQueuedRequests()
        await setup.waitForDrain()
        let statistics = setup.uploader.statistics
        #expect(statistics.uploadedLines == 300 && pendingBefore == 300)
        #expect(setup.spool.sealedSegments.isEmpty && setup.spool.pendingLines == 0)
        #expect(setup.env.runtime.state == .suspended)  // the grant ended, nothing else open
        // Stored byte for byte under stable names; every sequence exactly once.
        let streamFolder = setup.folder.path + "/collector/\(setup.spool.streamID)"
        let files = try FileManager.default.contentsOfDirectory(atPath: streamFolder).sorted()
        #expect(files.count == statistics.uploadedSegments && files.allSatisfy { $0.hasSuffix(".log") })
        let sequences = try files.flatMap {
            SegmentFormat.parse(Array(try Data(contentsOf: URL(fileURLWithPath: streamFolder + "/" + $0)))).records
        }.map(\.sequence)
        #expect(sequences == Array(1...300))
        #expect(setup.spool.checkpoint.sequence == 300)
        #expect(setup.env.counter("overtime_background_tasks_ended_total", [("reason", "completed")]) == 1)
        setup.finish()
    }

    @Test func terminationUploadsInsideTheBudgetBeforeTheRuntimeEnds() async throws {
        let sink = ScriptedSink([])
        let setup = try Setup(sink: { _ in sink })
        setup.env.runtime.requestTermination()
        await setup.uploader.drive(setup.env.clock) { setup.env.runtime.state == .terminated }
        #expect(sink.stored.count == setup.uploader.statistics.uploadedSegments)
        #expect(setup.uploader.statistics.uploadedLines == 300)
        #expect(setup.env.logs.messages(at: .critical).isEmpty)  // nothing terminated
        setup.folder.remove()
    }

    @Test func expirationAbortsTheUploadInFlightKeepsTheCheckpointAndEndsTheGrantInTime() async throws {
        let sink = ScriptedSink([.store, .hangUntilCancelled])
        let setup = try Setup(sink: { _ in sink })
        setup.env.runtime.requestBackground()
        await setup.uploader.drive(setup.env.clock) { sink.attempts.count >= 2 }
        setup.env.clock.advance(by: .seconds(25))  // the expiration point
        await setup.waitForDrain()
        #expect(setup.uploader.statistics.expiredDrains == 1)
        // Only the first segment was acknowledged: the checkpoint ends right before the
        // segment whose upload was aborted, which stays.
        let remaining = try #require(setup.spool.sealedSegments.first)
        #expect(setup.spool.checkpoint.sequence > 0)
        #expect(setup.spool.checkpoint.segment + 1 == remaining.number)
        #expect(setup.spool.checkpoint.sequence + 1 == remaining.firstSequence)
        #expect(sink.stored.count == 1)
        #expect(setup.env.runtime.state == .suspended)
        #expect(setup.env.counter("overtime_background_tasks_ended_total", [("reason", "expired")]) == 1)
        #expect(setup.env.counter("overtime_background_tasks_ended_total", [("reason", "terminated")]) == 0)
        setup.finish()
    }

    @Test func aCollectorDownLongerThanTheBudgetLosesNothingAndTheNextBackgroundEntryResumes() async throws {
        let sink = ScriptedSink([], then: .fail(.retryable("connection refused", retryAfter: nil)))
        let setup = try Setup(sink: { _ in sink })
        setup.env.runtime.requestBackground()
        await setup.uploader.drive(setup.env.clock) { sink.attempts.count >= 3 }
        setup.env.clock.advance(by: .seconds(25))  // expiration while retrying
        await setup.waitForDrain()
        #expect(setup.env.counter("overtime_background_tasks_ended_total", [("reason", "terminated")]) == 0)
        #expect(setup.spool.pendingLines == 300)
        #expect(setup.uploader.statistics.failedAttempts >= 3)
        setup.env.runtime.requestForeground()
        setup.env.waitForQueuedRequests()
        // The collector is back.
        let healthy = ScriptedSink([])
        let second = LogUploader(runtime: setup.env.runtime, spool: setup.spool, sink: healthy)
        setup.uploader.stop()
        second.start()
        setup.env.runtime.requestBackground()
        setup.env.waitForQueuedRequests()  // the observer has started the drain
        await second.drive(setup.env.clock) { !second.isDraining && setup.spool.pendingLines == 0 }
        #expect(second.statistics.uploadedLines == 300)
        #expect(setup.spool.checkpoint.sequence == 300)
        setup.finish()
    }

    /// A `Retry-After` in the first answer of a stop drain is waited out: the retry comes
    /// no sooner than the collector asked, though the stop woke every backoff.
    @Test func aRetryAfterInAStopDrainsFirstAnswerIsHonoured() async throws {
        let sink = ScriptedSink([.fail(.retryable("503", retryAfter: .seconds(2)))])
        let setup = try Setup(sink: { _ in sink })
        sink.timeAttempts(on: setup.env.clock)
        setup.env.runtime.requestTermination()
        await setup.uploader.drive(setup.env.clock) { setup.env.runtime.state == .terminated }
        let times = sink.attemptTimes.all
        try #require(times.count >= 2, "retried in the stop drain")
        #expect(times[1] - times[0] >= .seconds(2), "retried \(times[1] - times[0]) after Retry-After: 2")
        #expect(setup.uploader.statistics.uploadedLines == 300)
        setup.folder.remove()
    }

    /// A foreground drain's `Retry-After` still holds in the stop drain that follows: the
    /// stop waits out what is left of it, not retrying at once.
    @Test
    func aRetryAfterFromAnEarlierDrainHoldsInTheStopDrain() async throws {
        let sink = ScriptedSink([.fail(.retryable("503", retryAfter: .seconds(3)))])
        let setup = try Setup(sink: { _ in sink })
        sink.timeAttempts(on: setup.env.clock)
        setup.uploader.drainInGrant(reason: "foreground")
        await setup.uploader.drive(setup.env.clock) { setup.uploader.isBackingOff }
        setup.env.clock.advance(by: .seconds(1))
        setup.env.runtime.requestTermination()
        await setup.uploader.drive(setup.env.clock) { setup.env.runtime.state == .terminated }
        let times = sink.attemptTimes.all
        try #require(times.count >= 2, "retried in the stop drain")
        #expect(times[1] - times[0] >= .seconds(3))
        #expect(setup.uploader.statistics.uploadedLines == 300)
        setup.folder.remove()
    }

    /// A `Retry-After` that ends past the last moment an upload fits stops the drain at
    /// once, the segments kept: the stop does not sit out its budget for nothing. Also
    /// when a foreground drain was waiting it out when the stop came.
    @Test(arguments: [false, true])
    func aRetryAfterPastTheLastUsefulMomentStopsAtOnce(waitingInTheForeground: Bool) async throws {
        let sink = ScriptedSink([.fail(.retryable("503", retryAfter: .seconds(60)))])
        let setup = try Setup(sink: { _ in sink }, budget: .seconds(10), lead: .seconds(2))
        sink.timeAttempts(on: setup.env.clock)
        if waitingInTheForeground {
            setup.uploader.drainInGrant(reason: "foreground")
            await setup.uploader.drive(setup.env.clock) { setup.uploader.isBackingOff }
            setup.env.clock.advance(by: .seconds(1))
        }
        let stop = setup.env.clock.now
        setup.env.runtime.requestTermination()
        await setup.uploader.drive(setup.env.clock) { setup.env.runtime.state == .terminated }
        #expect(setup.env.clock.now - stop < .milliseconds(100), "the stop waited for nothing")
        #expect(sink.attempts.count == 1)
        #expect(setup.spool.pendingLines == 300, "every line kept for the next run")
        #expect(setup.uploader.statistics.stoppedForTime >= 1)
        #expect(setup.env.logs.messages(at: .notice).contains { $0.message.contains("Retry-After") })
        setup.folder.remove()
    }

    @Test func tooLittleTimeLeftBeforeExpirationStartsNoUpload() async throws {
        let sink = ScriptedSink([])
        let setup = try Setup(sink: { _ in sink })
        setup.uploader.stop()  // drains only when the test says
        let hold = setup.env.runtime.beginBackgroundTask(name: "hold")
        setup.env.runtime.requestBackground()
        setup.env.clock.advance(by: .seconds(24.8))  // 5.2 s left: 0.2 s before the expiration point
        setup.uploader.drainInGrant(reason: "test")  // its estimate of one upload is 1 s
        await setup.waitForDrain()
        #expect(setup.uploader.statistics.stoppedForTime == 1)
        #expect(sink.attempts.count == 0)
        #expect(setup.spool.pendingLines == 300)
        setup.env.runtime.endBackgroundTask(hold)
        setup.finish()
    }

    @Test func retriesWithBackoffThenStoresAndDeadLettersPermanentRefusals() async throws {
        let sink = ScriptedSink([
            .fail(.retryable("503", retryAfter: .milliseconds(10))), .fail(.retryable("reset", retryAfter: nil)),
            .store, .fail(.permanent("413 Payload Too Large")),
        ])
        let setup = try Setup(sink: { _ in sink }, lines: 100)
        setup.env.runtime.requestBackground()
        await setup.waitForDrain()
        let statistics = setup.uploader.statistics
        #expect(statistics.failedAttempts == 2)
        #expect(statistics.deadLetteredSegments == 1)
        #expect(statistics.uploadedSegments + statistics.deadLetteredSegments == sink.attempts.all.uniqued().count)
        #expect(setup.spool.deadLetterCount == 1)
        #expect(setup.spool.sealedSegments.isEmpty)
        setup.finish()
    }

    /// A full disk refuses lines whole; the drain that follows frees room (the checkpoint is
    /// written in place, needing no free block, and what it passed is deleted), and lines
    /// are taken again, numbered on with no gap.
    @Test func aFullDiskIsDrainedAndTakesLinesAgainNumberedOn() async throws {
        let volume = InMemorySpoolVolume()
        let sink = ScriptedSink([])
        let setup = try Setup(sink: { _ in sink }, volume: volume)
        volume.capacityBytes = volume.usedBytes
        #expect {
            try setup.spool.append("refused while the disk is full")
        } throws: { error in
            (error as? SpoolError)?.isDiskFull == true
        }
        #expect(setup.spool.pendingLines == 300)
        setup.env.runtime.requestBackground()
        await setup.waitForDrain()
        #expect(setup.uploader.statistics.uploadedLines == 300)
        #expect(setup.spool.checkpoint.sequence == 300)
        #expect(volume.usedBytes < volume.capacityBytes, "the drain freed room")
        #expect(try setup.spool.append("taken again") == 301)
        #expect(setup.env.runtime.state == .suspended)
        setup.finish()
    }

    /// A program's own sink may block its thread (plain file or socket I/O): it is called
    /// off the loop, which meanwhile applies requests; the drain decides on the loop once
    /// the store returns. The built-in sinks that never block are called on the loop.
    @Test func aProgramsSinkThatBlocksItsThreadNeverHoldsTheLoop() async throws {
        let sink = ThreadBlockingSink()
        let setup = try Setup(sink: { _ in sink }, lines: 10)
        sink.runtime.withLock { $0 = setup.env.runtime }
        setup.env.runtime.requestBackground()
        try #require(try await onOwnThread { sink.entered.wait(timeout: .now() + 30) == .success })
        let applied = DispatchSemaphore(value: 0)
        setup.env.runtime.execute { applied.signal() }
        let loopAnswered = try await onOwnThread { applied.wait(timeout: .now() + 10) == .success }
        sink.release.signal()
        #expect(loopAnswered, "the loop waited for a sink blocking its thread")
        #expect(sink.calledOnLoop.withLock { $0 } == false)
        await setup.waitForDrain()
        #expect(setup.uploader.statistics.uploadedLines == 10)
        #expect(setup.spool.pendingLines == 0)
        setup.finish()

        #expect(!(sink is any NonBlockingLogSink))
        #expect((DirectorySink(root: "/nonexistent") as any LogSink) is any NonBlockingLogSink)
    }
}

/// A sink that blocks its thread in its first store until released, as blocking I/O does.
private final class ThreadBlockingSink: LogSink {
    let entered = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    let calledOnLoop = Locked<Bool?>(nil)
    let runtime = Locked<Runtime?>(nil)
    var description: String { "thread-blocking" }

    func store(_ segment: SealedSegment) async throws(SinkError) {
        let onLoop = runtime.withLock { $0?.isOnLoopThread ?? true }
        let first = calledOnLoop.withLock { called in
            defer { called = (called ?? false) || onLoop }
            return called == nil
        }
        if first {
            entered.signal()
            release.wait()
        }
    }
}
