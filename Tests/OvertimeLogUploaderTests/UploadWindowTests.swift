import Foundation
import Overtime
import OvertimeSupport
import OvertimeTestSupport
import OvertimeTesting
import Testing

@testable import OvertimeLogUploader

/// A sink that takes several stores at once and holds each until the test answers it.
final class GatedSink: LogSink, Sendable {
    private struct State {
        var waiting: [(name: String, answer: CheckedContinuation<SinkError?, Never>)] = []
        var mostAtOnce = 0
    }
    private let state = Locked(State())
    let concurrentStores: Int
    /// Every store call, by segment name, in the order they came.
    let attempts = Recorder<String>()
    /// Segments stored, in the order their stores returned.
    let stored = Recorder<String>()

    init(concurrentStores: Int) {
        self.concurrentStores = concurrentStores
    }

    var description: String { "gated" }

    func store(_ segment: SealedSegment) async throws(SinkError) {
        attempts.append(segment.name)
        let failure: SinkError? = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                state.withLock { state in
                    state.waiting.append((segment.name, continuation))
                    state.mostAtOnce = max(state.mostAtOnce, state.waiting.count)
                }
                if Task.isCancelled { _ = answer(segment.name, with: .cancelled) }
            }
        } onCancel: {
            _ = answer(segment.name, with: .cancelled)
        }
        if let failure { throw failure }
        stored.append(segment.name)
    }

    /// The segments whose stores wait for an answer, in the order they came.
    var waiting: [String] { state.withLock { $0.waiting.map(\.name) } }

    /// The most stores that waited at once.
    var mostAtOnce: Int { state.withLock { $0.mostAtOnce } }

    /// Ends the store of `name`: stored (`nil`) or failed; whether one was waiting.
    @discardableResult
    func answer(_ name: String, with failure: SinkError?) -> Bool {
        let waiter = state.withLock { state -> CheckedContinuation<SinkError?, Never>? in
            guard let index = state.waiting.firstIndex(where: { $0.name == name }) else { return nil }
            return state.waiting.remove(at: index).answer
        }
        waiter?.resume(returning: failure)
        return waiter != nil
    }
}

/// Several uploads in flight, decided in spool order: the checkpoint (a high-water mark)
/// never passes a segment the collector does not hold, whatever order the uploads end in.
@Suite("LogUploader: several uploads in flight", .timeLimit(.minutes(3)))
struct UploadWindowTests {
    struct Setup {
        let env: VirtualRuntime
        let spool: Spool
        let sink: GatedSink
        let uploader: LogUploader
        /// The sealed segments' names, oldest first, before anything was uploaded.
        let names: [String]
        let numbers: [String: UInt64]

        init(window: Int, sinkTakes: Int = 8) throws {
            env = try VirtualRuntime(budget: .seconds(30), lead: .seconds(5))
            var options = SpoolConfiguration()
            options.segmentBytes = 4096
            spool = try Spool(
                directory: "/spool", configuration: options, clock: env.clock, storage: .memory(InMemorySpoolVolume()))
            for index in 0..<400 { try spool.append("line \(index) " + String(repeating: "x", count: 60)) }
            try spool.sealActiveSegment()
            names = spool.sealedSegments.map(\.name)
            numbers = Dictionary(uniqueKeysWithValues: spool.sealedSegments.map { ($0.name, $0.number) })
            sink = GatedSink(concurrentStores: sinkTakes)
            var configuration = UploaderConfiguration()
            configuration.maximumUploadsInFlight = window
            configuration.initialRetryDelay = .milliseconds(5)
            configuration.maximumRetryDelay = .milliseconds(20)
            uploader = LogUploader(runtime: env.runtime, spool: spool, sink: sink, configuration: configuration)
            uploader.start()
        }

        /// Enters the background (which starts a drain) and drives it until `count` stores wait.
        func enterTheBackground(untilWaiting count: Int) async {
            env.runtime.requestBackground()
            await until { sink.waiting.count == count }
        }

        /// Drives the uploader (backoffs on virtual time) until `done()`.
        func until(_ done: () -> Bool) async {
            await uploader.drive(env.clock, until: done)
        }

        /// Real time for the drain's own steps (acknowledgements are written on a queue):
        /// what must not happen would have happened by then.
        func settle() async {
            try? await Task.sleep(for: .milliseconds(100))
        }

        /// Answers every store as stored until the drain ends.
        func storeTheRest() async {
            await until {
                for name in sink.waiting { sink.answer(name, with: nil) }
                return !uploader.isDraining
            }
        }

        var remaining: [String] { spool.sealedSegments.map(\.name) }

        func finish() {
            env.shutDown()
        }
    }

    @Test func youngerSegmentsStoredFirstWaitForTheOldestBeforeTheCheckpointPassesThem() async throws {
        let setup = try Setup(window: 3)
        #expect(setup.names.count >= 6)
        await setup.enterTheBackground(untilWaiting: 3)
        #expect(setup.sink.waiting == Array(setup.names.prefix(3)))
        let before = setup.spool.checkpoint
        setup.sink.answer(setup.names[2], with: nil)
        await setup.until { setup.sink.stored.count == 1 }
        setup.sink.answer(setup.names[1], with: nil)
        await setup.until { setup.sink.stored.count == 2 }
        await setup.settle()
        // Both stored, neither acknowledged: the oldest is still in flight, and the window
        // (three undecided) starts nothing more.
        #expect(setup.sink.stored.all == [setup.names[2], setup.names[1]])
        #expect(setup.spool.checkpoint == before)
        #expect(Array(setup.remaining.prefix(3)) == Array(setup.names.prefix(3)))
        #expect(setup.sink.waiting == [setup.names[0]])
        setup.sink.answer(setup.names[0], with: nil)
        // All three decided, in order (the acknowledgements are written on the uploader's
        // queue, so the checkpoint is waited for, not read at once); the next ones start.
        await setup.until {
            setup.spool.checkpoint.segment >= setup.numbers[setup.names[2]]!
                && !setup.names.prefix(3).contains(where: setup.remaining.contains)
        }
        await setup.until { setup.sink.waiting.count == 3 }
        #expect(setup.sink.waiting == Array(setup.names[3..<6]))
        await setup.storeTheRest()
        #expect(setup.remaining.isEmpty && setup.spool.pendingLines == 0)
        #expect(setup.uploader.statistics.uploadedSegments == setup.names.count)
        #expect(setup.sink.attempts.all.sorted() == setup.names.sorted())  // each sent once
        #expect(setup.sink.mostAtOnce == 3)
        setup.finish()
    }

    @Test func anOldestThatFailsIsRetriedWhileAYoungerOneKeepsItsOutcome() async throws {
        let setup = try Setup(window: 2)
        await setup.enterTheBackground(untilWaiting: 2)
        let before = setup.spool.checkpoint
        setup.sink.answer(setup.names[1], with: nil)
        setup.sink.answer(setup.names[0], with: .retryable("503 Service Unavailable", retryAfter: nil))
        // Retried after its backoff; the younger one, stored, is not sent again meanwhile.
        await setup.until { setup.sink.waiting == [setup.names[0]] }
        #expect(setup.spool.checkpoint == before && Array(setup.remaining.prefix(2)) == Array(setup.names.prefix(2)))
        setup.sink.answer(setup.names[0], with: nil)
        await setup.storeTheRest()
        #expect(setup.remaining.isEmpty)
        let attempts = setup.sink.attempts.all
        #expect(attempts.filter { $0 == setup.names[0] }.count == 2)
        #expect(attempts.filter { $0 == setup.names[1] }.count == 1)
        #expect(setup.uploader.statistics.failedAttempts == 1)
        #expect(setup.uploader.statistics.uploadedSegments == setup.names.count)
        setup.finish()
    }

    @Test func youngerOnesThatFailAreSentAgainOnlyInTheirTurnWithoutBackoffsOfTheirOwn() async throws {
        let setup = try Setup(window: 3)
        await setup.enterTheBackground(untilWaiting: 3)
        // The collector is down: the younger ones fail first, then the oldest.
        setup.sink.answer(setup.names[2], with: .retryable("503 Service Unavailable", retryAfter: nil))
        setup.sink.answer(setup.names[1], with: .retryable("503 Service Unavailable", retryAfter: nil))
        await setup.settle()
        #expect(setup.sink.waiting == [setup.names[0]])  // nothing younger sent meanwhile
        setup.sink.answer(setup.names[0], with: .retryable("503 Service Unavailable", retryAfter: nil))
        // One backoff (the oldest's), then only the oldest again: the window is full of
        // the younger ones waiting their turn.
        await setup.until { setup.sink.waiting == [setup.names[0]] }
        await setup.settle()
        #expect(setup.sink.waiting == [setup.names[0]])
        setup.sink.answer(setup.names[0], with: nil)
        // Its turn: the next one goes again at once, with a new one beside it.
        await setup.until { setup.sink.waiting.count == 2 }
        #expect(setup.sink.waiting == [setup.names[1], setup.names[3]])
        await setup.storeTheRest()
        #expect(setup.remaining.isEmpty)
        #expect(setup.uploader.statistics.failedAttempts == 3)
        let attempts = setup.sink.attempts.all
        #expect(setup.names.prefix(3).map { name in attempts.filter { $0 == name }.count } == [2, 2, 2])
        setup.finish()
    }

    @Test func aRefusedOldestIsDeadLetteredAndTheStoredOnesAfterItAreAcknowledged() async throws {
        let setup = try Setup(window: 3)
        await setup.enterTheBackground(untilWaiting: 3)
        setup.sink.answer(setup.names[2], with: nil)
        setup.sink.answer(setup.names[0], with: .permanent("413 Content Too Large"))
        setup.sink.answer(setup.names[1], with: nil)
        await setup.storeTheRest()
        #expect(setup.remaining.isEmpty && setup.spool.deadLetterCount == 1)
        #expect(setup.uploader.statistics.deadLetteredSegments == 1)
        #expect(setup.uploader.statistics.uploadedSegments == setup.names.count - 1)
        #expect(!setup.sink.stored.all.contains(setup.names[0]))
        setup.finish()
    }

    @Test func expirationCancelsEveryUploadInFlightAndTheCheckpointStopsBeforeTheFirstOfThem() async throws {
        let setup = try Setup(window: 3)
        await setup.enterTheBackground(untilWaiting: 3)
        setup.sink.answer(setup.names[0], with: nil)
        setup.sink.answer(setup.names[2], with: nil)  // stored, but behind one in flight
        await setup.until { setup.sink.waiting == [setup.names[1], setup.names[3]] }
        setup.env.clock.advance(by: .seconds(25))  // the expiration point
        await setup.until { !setup.uploader.isDraining }
        setup.env.waitForQueuedRequests()
        #expect(setup.sink.waiting.isEmpty)  // nothing left running
        #expect(setup.uploader.statistics.expiredDrains == 1)
        // Only the oldest was acknowledged; the one stored behind the aborted one is sent again.
        #expect(setup.remaining.first == setup.names[1])
        #expect(setup.spool.checkpoint.segment + 1 == setup.numbers[setup.names[1]]!)
        #expect(setup.env.runtime.state == .suspended)
        #expect(setup.env.counter("overtime_background_tasks_ended_total", [("reason", "terminated")]) == 0)
        setup.finish()
    }

    @Test func theWindowIsTheSmallerOfTheUploadersAndTheSinks() async throws {
        for (window, sinkTakes, expected) in [(4, 1, 1), (1, 8, 1), (4, 2, 2), (4, 8, 4)] {
            let setup = try Setup(window: window, sinkTakes: sinkTakes)
            setup.env.runtime.requestBackground()
            await setup.until { setup.sink.waiting.count == expected }
            await setup.settle()
            #expect(setup.sink.waiting.count == expected, "window \(window), sink \(sinkTakes)")
            await setup.storeTheRest()
            #expect(setup.sink.mostAtOnce == expected && setup.remaining.isEmpty)
            setup.finish()
        }
    }
}

/// The window's bookkeeping alone, as transcripts: what may start, what an ended upload
/// means, what is decided on.
@Suite("UploadWindow: which uploads run and which is decided on")
struct UploadWindowBookkeepingTests {
    private let unavailable = SinkError.retryable("503 Service Unavailable", retryAfter: nil)

    /// Starts what the window lets start of `waiting` (the oldest first); their names.
    private func startWhatMay(_ window: inout UploadWindow, _ waiting: [String]) -> [String] {
        window.align(waitingPaths: Set(waiting), oldest: waiting[0])
        let started = window.toStart(waiting) { $0 }
        for path in started { window.started(path) }
        return started
    }

    @Test func youngerOutcomesWaitTheirTurnAndTheWindowCountsThemAll() {
        var window = UploadWindow(size: 3)
        #expect(startWhatMay(&window, ["a", "b", "c", "d", "e"]) == ["a", "b", "c"])
        #expect(window.ended("c", .stored(took: .milliseconds(3)), oldest: "a") == .kept)
        #expect(window.ended("b", .failed(unavailable), oldest: "a") == .later(unavailable))
        // Three undecided (one in flight, one stored, one to send again): nothing more starts.
        #expect(startWhatMay(&window, ["a", "b", "c", "d", "e"]) == [])
        #expect(
            window.ended("a", .stored(took: .milliseconds(5)), oldest: "a") == .decide(.stored(took: .milliseconds(5))))
        // "a" decided: "b" is the oldest and goes again; "c" keeps its outcome; room for "d".
        #expect(startWhatMay(&window, ["b", "c", "d", "e"]) == ["b", "d"])
        #expect(window.takeStored("b") == nil)
        #expect(window.ended("d", .failed(.cancelled), oldest: "b") == .later(nil))  // cancelled: nothing to report
        #expect(
            window.ended("b", .stored(took: .milliseconds(4)), oldest: "b") == .decide(.stored(took: .milliseconds(4))))
        // "c" stored earlier: decided at once, without a second upload.
        #expect(startWhatMay(&window, ["c", "d", "e"]) == ["e"])
        #expect(window.takeStored("c") == .stored(took: .milliseconds(3)))
        #expect(window.inFlight == ["e"])
    }

    @Test func theOldestAlwaysGoesAndWhatLeftTheSpoolHoldsNoPlace() {
        var window = UploadWindow(size: 2)
        #expect(startWhatMay(&window, ["a", "b", "c"]) == ["a", "b"])
        #expect(window.ended("b", .stored(took: .zero), oldest: "a") == .kept)
        #expect(window.ended("a", .failed(unavailable), oldest: "a") == .decide(.failed(unavailable)))
        // After its backoff the oldest goes again although the window is full ("b" stored).
        #expect(startWhatMay(&window, ["a", "b", "c"]) == ["a"])
        // The quota dropped "b": its place is free.
        #expect(startWhatMay(&window, ["a", "c"]) == ["c"])
        #expect(window.takeStored("b") == nil)
    }

    @Test func aWindowOfLessThanOneIsOne() {
        for size in [0, -3, 1] {
            var window = UploadWindow(size: size)
            #expect(window.size == 1)
            #expect(startWhatMay(&window, ["a", "b"]) == ["a"])
        }
    }
}
