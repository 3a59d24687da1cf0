import Foundation
import Overtime
import OvertimeSupport

/// Runs `body` — a test body that blocks: waits on semaphores, spins, sleeps, drives a
/// child process — on a thread of its own instead of one of the few threads Swift Testing
/// runs every test on. Blocking bodies running in parallel would otherwise starve the
/// other tests (under ThreadSanitizer on two cores, trivial tests waited over a minute).
/// The body stays in the test's task, so its expectations are the test's.
package func onOwnThread<T: Sendable>(_ body: () throws -> T) async throws -> T {
    let executor = OwnThreadExecutor()
    defer { executor.shutDown() }
    return try await withTaskExecutorPreference(executor) { try body() }
}

/// Runs an async `body` whose every resumption must come promptly — a step that races a
/// timeout of the code under test — on a thread of its own: resumed on Swift's shared
/// pool, it can wait behind other tests' blocking bodies for longer than that timeout.
package func onOwnThread<T: Sendable>(resuming body: () async throws -> T) async throws -> T {
    let executor = OwnThreadExecutor()
    defer { executor.shutDown() }
    return try await withTaskExecutorPreference(executor) { try await body() }
}

/// Polls `condition` every 10 ms on a thread of its own until it holds (`true`) or
/// `timeout` passes (`false`): for what another process or the loop does in real time.
package func eventually(_ timeout: Duration = .seconds(15), _ condition: @escaping @Sendable () -> Bool)
    async throws -> Bool
{
    try await onOwnThread {
        let deadline = ContinuousClock.now + timeout
        while !condition() {
            if ContinuousClock.now > deadline { return false }
            usleep(10_000)
        }
        return true
    }
}

/// A task executor with one thread.
private final class OwnThreadExecutor: TaskExecutor, Sendable {
    private let jobs = Locked<(queue: [UnownedJob], stopping: Bool)>(([], false))

    init() {
        let thread = Thread { [self] in run() }
        thread.stackSize = 8 << 20
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        jobs.withLock { $0.queue.append(unowned) }
        jobs.broadcast()
    }

    func shutDown() {
        jobs.withLock { $0.stopping = true }
        jobs.broadcast()
    }

    private func run() {
        while true {
            let (batch, stop) = jobs.withLock(waitingUntil: { !$0.queue.isEmpty || $0.stopping }) { state, _ in
                defer { state.queue = [] }
                return (state.queue, state.stopping)
            }
            for job in batch { job.runSynchronously(on: asUnownedTaskExecutor()) }
            if stop, batch.isEmpty { return }
        }
    }
}

/// Runs `body(index)` on `count` threads of their own, released together (a race), and
/// returns when every one has finished.
package func raceOnThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let start = DispatchGroup()
    start.enter()
    let done = DispatchGroup()
    for index in 0..<count {
        done.enter()
        Thread {
            start.wait()
            body(index)
            done.leave()
        }.start()
    }
    start.leave()
    done.wait()
}
