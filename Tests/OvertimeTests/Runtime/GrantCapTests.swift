import Foundation
import Overtime
import OvertimeSupport
import OvertimeTestSupport
import OvertimeTesting
import Synchronization
import Testing

/// The cap on open grants counts what the owners hold: a begin is refused only when the
/// grants begun and not yet ended by their owners already fill it, whatever the loop has
/// applied so far and however the threads are scheduled.
@Suite(
    "Grants: the cap under churn", .serialized,
    // Minutes: under ThreadSanitizer its threads wait on the Swift runtime's locks
    // (ThreadSanitizer.swift).
    .timeLimit(.minutes(5)))
struct GrantCapTests {
    /// Threads begin and end grants off the loop, never holding more than the cap
    /// together, while other threads keep both cores busy: no begin is refused. (The
    /// churning threads run below normal priority and the busy ones at the lowest: they
    /// fill every idle moment, so the loop thread is preempted mid-move, without starving
    /// the tests that run beside this one — under ThreadSanitizer this one takes minutes.)
    @Test(arguments: [2, 100_000])
    func threadsHoldingAtMostTheCapAreNeverRefused(perThread: Int) async throws {
        try await onOwnThread {
            let threads = 2
            let cap = perThread == 100_000 ? 100_000 : perThread * threads
            let held = cap / threads
            // ThreadSanitizer reports a race the first time its accesses meet: there, where
            // each begin costs many times as much, a tenth of them.
            let begins = runsUnderThreadSanitizer ? 100_000 : 1_000_000
            let env = try VirtualRuntime(budget: .seconds(3600), lead: .seconds(1), maximumOpen: cap)
            let runtime = env.runtime
            let refused = Atomic<Int>(0)
            let busy = Atomic<Bool>(true)
            let load = (0..<2).map { _ in
                Thread {
                    setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19)  // on Linux: this thread only
                    var spin = 0
                    while busy.load(ordering: .relaxed) { spin &+= 1 }
                    _ = spin
                }
            }
            for thread in load { thread.start() }
            defer { busy.store(false, ordering: .relaxed) }

            let done = DispatchGroup()
            for _ in 0..<threads {
                done.enter()
                Thread {
                    setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 10)  // on Linux: this thread only
                    var ids: [BackgroundTaskID] = []
                    ids.reserveCapacity(held)
                    var begun = 0
                    // Batches of varied size, so the threads' holdings rise and fall out of step.
                    var size = 1
                    while begun < begins / threads {
                        for _ in 0..<min(size, held) {
                            let id = runtime.beginBackgroundTask(name: "churn")
                            if id.isInvalid { refused.add(1, ordering: .relaxed) } else { ids.append(id) }
                            begun += 1
                        }
                        for id in ids { runtime.endBackgroundTask(id) }
                        ids.removeAll(keepingCapacity: true)
                        size = size % held + 1
                        if held > 64 { size = held }  // at the default cap: whole batches
                    }
                    done.leave()
                }.start()
            }
            done.wait()
            env.waitForQueuedRequests()
            #expect(refused.load(ordering: .relaxed) == 0, "begins refused below the cap of \(cap)")
            #expect(!env.logs.entries.all.contains { $0.message.contains("cap of") })
            #expect(runtime.openBackgroundTasks.isEmpty)
            env.shutDown()
        }
    }

    /// The cap still holds: with the cap held, from the loop and off it, the next begin
    /// is refused, and one place frees as soon as its owner ends a grant.
    @Test func theNextBeginOverTheCapIsRefusedOnAndOffTheLoop() async throws {
        try await onOwnThread {
            let env = try VirtualRuntime(budget: .seconds(3600), lead: .seconds(1), maximumOpen: 3)
            let runtime = env.runtime
            let ids = (0..<3).map { _ in runtime.beginBackgroundTask(name: "held") }
            #expect(ids.allSatisfy { !$0.isInvalid })
            #expect(runtime.beginBackgroundTask(name: "over").isInvalid, "off the loop")
            let onLoop = Locked<BackgroundTaskID>(.invalid)
            runtime.execute { onLoop.withLock { $0 = runtime.beginBackgroundTask(name: "over") } }
            env.waitForQueuedRequests()
            #expect(onLoop.withLock { $0 }.isInvalid, "on the loop")
            runtime.endBackgroundTask(ids[0])
            let again = runtime.beginBackgroundTask(name: "again")  // before the loop applied the end
            #expect(!again.isInvalid)
            #expect(runtime.beginBackgroundTask(name: "over").isInvalid)
            env.waitForQueuedRequests()
            #expect(runtime.openBackgroundTasks.count == 3)
            env.shutDown()
        }
    }
}
