import Dispatch
import Overtime
import OvertimeSupport
import OvertimeTestSupport
import OvertimeTesting
import Synchronization
import Testing

/// A begin off the loop thread returns an ID that holds, or `.invalid`: never an ID the
/// loop refuses later because the program suspended (or terminated) meanwhile.
@Suite("Grants: begins racing suspension and termination", .timeLimit(.minutes(2)))
struct ConcurrentBeginTests {
    /// The published state says "background" while the loop runs the observers of
    /// `didEnterBackground` (or `willTerminate`); with no grant open, the loop suspends
    /// (or finishes terminating) right after them. A begin made meanwhile on another
    /// thread must hold: the program waits for that grant.
    @Test(arguments: [false, true])
    func aBeginDuringTheLastObserverBeforeSuspensionHolds(terminating: Bool) async throws {
        try await onOwnThread {
            for _ in 0..<50 {
                let env = try VirtualRuntime(budget: .seconds(3600), lead: .seconds(1))
                let runtime = env.runtime
                let inObserver = DispatchSemaphore(value: 0)
                let begun = DispatchSemaphore(value: 0)
                let reasons = Recorder<BackgroundTaskEndReason>()
                let id = Locked<BackgroundTaskID>(.invalid)
                let trigger: LifecycleEvent = terminating ? .willTerminate : .didEnterBackground
                let beganInTime = Locked(true)
                let token = runtime.observe { event in
                    guard event == trigger else { return }
                    inObserver.signal()
                    // Holds the loop until the other thread has begun. That thread is its
                    // own, so only a begin that waits for the loop can keep it past the guard.
                    if begun.wait(timeout: .now() + 5) == .timedOut { beganInTime.withLock { $0 = false } }
                }
                spawnThread(name: "racer") {
                    inObserver.wait()
                    id.withLock { $0 = runtime.beginBackgroundTask(name: "racer", endHandler: { reasons.append($0) }) }
                    begun.signal()
                }
                if terminating { runtime.requestTermination() } else { runtime.requestBackground() }
                env.waitForQueuedRequests()
                let racer = id.withLock { $0 }
                #expect(beganInTime.withLock { $0 }, "a begin while the loop runs an observer returns without the loop")
                #expect(!racer.isInvalid)
                #expect(runtime.state == .background, "waits for the grant begun meanwhile")
                runtime.endBackgroundTask(racer)
                env.waitForQueuedRequests()
                #expect(reasons.all == [.completed])
                #expect(runtime.state == (terminating ? .terminated : .suspended))
                #expect(env.counter("overtime_misuse_total", [("kind", "unknown_id")]) == 0)
                token.cancel()
                env.shutDown()
            }
        }
    }

    /// Round after round, a thread begins a grant just as the last grant in the background
    /// ends, at randomly spread moments on both sides.
    @Test func aBeginRacingTheLastEndHoldsOrIsRefusedUpFront() async throws {
        try await onOwnThread {
            let env = try VirtualRuntime(budget: .seconds(3600), lead: .seconds(1))
            let runtime = env.runtime
            // A fifth as many under ThreadSanitizer: it reports a race the first time the
            // accesses meet, and 5,000 rounds of threads spinning on each other took 193 s
            // there with both cores busy.
            let rounds = runsUnderThreadSanitizer ? 1_000 : 5_000
            let go = RoundHandOff()
            let finishedRound = RoundHandOff()
            let reasons = Recorder<BackgroundTaskEndReason>()
            let ids = Locked<[BackgroundTaskID]>([])
            spawnThread(name: "racer") {
                var generator = SystemRandomNumberGenerator()
                for round in 1...rounds {
                    go.wait(for: round)
                    spread(Int.random(in: 0..<3_000, using: &generator))
                    let id = runtime.beginBackgroundTask(name: "racer", endHandler: { reasons.append($0) })
                    ids.withLock { $0.append(id) }
                    finishedRound.publish(round)
                }
            }
            var valid = 0
            var generator = SystemRandomNumberGenerator()
            for round in 1...rounds {
                runtime.requestForeground()
                let anchor = runtime.beginBackgroundTask(name: "anchor")
                runtime.requestBackground()
                runtime.waitForQueuedRequests()
                go.publish(round)
                spread(Int.random(in: 0..<3_000, using: &generator))
                runtime.endBackgroundTask(anchor)
                finishedRound.wait(for: round)
                let id = ids.withLock { $0[round - 1] }
                if !id.isInvalid {
                    valid += 1
                    runtime.endBackgroundTask(id)
                }
            }
            env.waitForQueuedRequests()
            let counts = Dictionary(grouping: reasons.all, by: { $0 }).mapValues(\.count)
            #expect(reasons.count == valid, "every valid ID's end handler runs once")
            #expect(counts[.terminated, default: 0] == 0, "refused after the ID was returned: \(counts)")
            #expect(env.counter("overtime_misuse_total", [("kind", "unknown_id")]) == 0)
            #expect(!env.logs.entries.all.contains { $0.message.contains("after its ID was returned") })
            env.shutDown()
        }
    }
}

/// Spins `count` atomic loads: a random spread of a thread's moment within a round, short
/// enough (microseconds) that the two threads' calls still meet.
private func spread(_ count: Int) {
    let spin = Atomic<Int>(0)
    for _ in 0..<count { _ = spin.load(ordering: .relaxed) }
}

/// A round number one thread publishes and another waits for. The waiter spins first, for
/// up to a millisecond, so that on an idle machine it sets off within moments of the publish
/// (the race needs both threads' calls to meet); then it sleeps on a lock's condition, so
/// that on a busy machine it gives its core to the thread it waits for. Spinning for the
/// whole wait held a core out of two for whole time slices: on one core beside one
/// `yes > /dev/null`, the 5,000 rounds took 63 s rather than 0.6 s alone.
private final class RoundHandOff: Sendable {
    private let published = Atomic<Int>(0)
    private let round = Locked(0)

    func publish(_ value: Int) {
        round.withLock {
            $0 = value
            published.store(value, ordering: .releasing)
        }
        round.broadcast()
    }

    func wait(for value: Int) {
        let spinUntil = ContinuousClock.now + .milliseconds(1)
        var spins = 0
        while published.load(ordering: .acquiring) < value {
            spins += 1
            guard spins % 64 != 0 || ContinuousClock.now < spinUntil else {
                round.withLock(waitingUntil: { $0 >= value }) { _, _ in }
                return
            }
        }
    }
}
