import Foundation
import Overtime
import OvertimeSupport
import Testing

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

/// Starts `operation` as an unstructured task on a thread of its own: for a task a test
/// starts and then waits for in real time. `Task {}` runs on Swift's shared pool, where under
/// ThreadSanitizer with both cores busy it queued behind every test's work for longer than
/// the test waited (fresh-clone run 42: a sleeper that had not begun to sleep after 15 s).
package func taskOnOwnThread<T: Sendable>(
    _ operation: @escaping @Sendable () async throws -> T
) -> Task<T, any Error> {
    let executor = OwnThreadExecutor()
    return Task(executorPreference: executor) {
        defer { executor.shutDown() }
        return try await operation()
    }
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

/// The threads test bodies run on now (``onOwnThread(_:)``, ``OwnThreadTrait``).
private let ownThreads = Locked<Set<UInt>>([])

/// Whether the caller runs on a thread of its own (``onOwnThread(_:)``, ``OwnThreadTrait``)
/// rather than one of the threads every test shares.
package func runsOnOwnThread() -> Bool {
    ownThreads.withLock { $0.contains(UInt(pthread_self())) }
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
        ownThreads.withLock { _ = $0.insert(UInt(pthread_self())) }
        defer { ownThreads.withLock { _ = $0.remove(UInt(pthread_self())) } }
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

/// Runs every test case of the suite or test it marks on a thread of its own — for tests
/// whose bodies block (drive child processes, wait on sockets, sleep): run on the two
/// threads Swift Testing shares between every test on this machine, two such bodies would
/// hold back every other test, and trivial tests would wait past their time limits.
///
/// At most twice as many as the machine has processors run at once; the others wait, without
/// holding a thread. Those shared threads used to bound them, and unbounded, every marked
/// suite's child processes at once overran two cores (under ThreadSanitizer a run took
/// over twenty minutes rather than three).
package struct OwnThreadTrait: TestTrait, SuiteTrait, TestScoping {
    /// Whether a test case waits for a slot of ``blockingBodies`` (``onOwnThread``) or runs at
    /// once (``blocksBriefly``).
    let takesASlot: Bool

    /// The longest a test case's body may run, counted from its start: not from the test's,
    /// as Swift Testing's `.timeLimit` counts, which would count its wait for a slot too.
    let runningAtMost: Duration?

    package var isRecursive: Bool { true }

    package func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        if test.isSuite { return takesASlot && test.traits.contains { $0 is ParallelizationTrait } ? self : nil }
        return testCase == nil ? nil : self
    }

    package func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        if test.isSuite { return try await runAsChain(test.name, function) }
        @Sendable func body() async throws {
            guard let runningAtMost else { return try await function() }
            try await runLimited(to: runningAtMost, at: test.sourceLocation, function)
        }
        try await takesASlot ? runAsBlockingBody(test.name, body) : runAsBriefBody(body)
    }
}

/// Runs a test case's `body` and records an issue when it runs longer than `limit` from its
/// start, cancelling it if it is still running then (as Swift Testing's `.timeLimit` does).
/// Swift Testing's limit counts from the test's start, and a test that waits for a slot of
/// ``blockingBodies`` counts its wait too: in busy run 119, under ThreadSanitizer with both
/// cores busy, 20 tests of milliseconds ran out of their three minutes waiting behind tests
/// that drive daemons. The limit is the body's own, however long the queue before it.
private func runLimited(
    to limit: Duration, at location: SourceLocation, _ body: @Sendable () async throws -> Void
) async throws {
    // The group below ends only once its tasks have: `body` does not outlive this call.
    try await withoutActuallyEscaping(body) { body in try await runLimited(to: limit, at: location, escaping: body) }
}

private func runLimited(
    to limit: Duration, at location: SourceLocation, escaping body: @escaping @Sendable () async throws -> Void
) async throws {
    let started = ContinuousClock.now
    let state = Locked(BodyState.running)
    // Recorded by whichever sees it first: the timer while the body still runs, or the body's
    // end when the timer is late (its task waits on Swift's shared pool, which a busy run holds).
    let overran: @Sendable () -> Void = {
        let first = state.withLock { state in
            defer { state = .overran }
            return state == .running
        }
        guard first else { return }
        let ran = (ContinuousClock.now - started).secondsValue
        Issue.record(
            "ran \(String(format: "%.1f", ran)) s, past its limit of \(limit) (counted from its start)",
            sourceLocation: location)
    }
    do {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                defer {
                    if ContinuousClock.now - started > limit { overran() }
                    state.withLock { if $0 == .running { $0 = .ended } }
                }
                try await body()
            }
            group.addTask {
                try await Task.sleep(until: started + limit, clock: .continuous)
                guard state.withLock({ $0 == .running }) else { return }
                overran()
                throw BodyRanPastItsLimit()
            }
            try await group.next()
            group.cancelAll()
        }
    } catch is BodyRanPastItsLimit {}
}

/// Runs `body` as a test case marked `.onOwnThread(runningAtMost: limit)` runs, with `gate` in
/// place of the slots every marked test shares: for the harness's own tests.
package func runAsMarkedTestCase(
    through gate: AsyncGate, runningAtMost limit: Duration, _ body: @escaping @Sendable () async throws -> Void,
    sourceLocation: SourceLocation = #_sourceLocation
) async throws {
    try await runAsBlockingBody(
        "a harness test", { try await runLimited(to: limit, at: sourceLocation, body) }, through: gate)
}

private enum BodyState: Sendable { case running, ended, overran }
private struct BodyRanPastItsLimit: Error {}

/// Runs a marked suite that runs its tests one at a time (`.serialized`: only such a suite
/// has a scope) holding one slot of ``blockingBodies`` from its first test to its last, taken
/// before the other marked tests waiting. Such a suite is a chain: its next test asked for a
/// slot only once the one before it ended, and waited anew behind every other marked test
/// (the daemon-hardening suite's first test waited 56 s for a slot, and under
/// ThreadSanitizer its last twelve tests ran alone for 23 s after every other test had
/// ended). Its tests run on threads of their own in its slot.
private func runAsChain(_ name: String, _ function: @Sendable () async throws -> Void) async throws {
    guard !BlockingSlot.held else { return try await function() }
    await enterSlot(of: blockingBodies, first: true, for: name)
    defer { blockingBodies.leave() }
    try await BlockingSlot.$held.withValue(true) { try await function() }
}

/// Runs a marked test case's body on a thread of its own once one of the slots of
/// ``blockingBodies`` is free, or in its chain's slot (``runAsChain(_:)``). A test marked
/// twice (by its suite and by itself) takes one slot, not two: nested, every slot could be
/// held by a body waiting for a second.
private func runAsBlockingBody(
    _ name: String, _ function: @Sendable () async throws -> Void, through gate: AsyncGate = blockingBodies
) async throws {
    if runsOnOwnThread() { return try await function() }  // marked twice: the outer mark moved it
    if BlockingSlot.held { return try await onOwnThread(resuming: function) }  // its chain's slot
    await enterSlot(of: gate, first: false, for: name)
    defer { gate.leave() }
    try await BlockingSlot.$held.withValue(true) { try await onOwnThread(resuming: function) }
}

/// Runs a test case marked ``blocksBriefly`` on a thread of its own at once, taking no slot.
private func runAsBriefBody(_ function: @Sendable () async throws -> Void) async throws {
    if runsOnOwnThread() { return try await function() }  // marked twice: the outer mark moved it
    try await onOwnThread(resuming: function)
}

/// Waits for a slot of `gate`. A wait of 10 s or more is printed (`⧗ slot wait …`), and
/// `scripts/test` reports the longest: what a test's own time does not show, and what the
/// order of the marked suites and the width of the gate are judged by.
private func enterSlot(of gate: AsyncGate, first: Bool, for name: String) async {
    let asked = ContinuousClock.now
    await gate.enter(first: first)
    let waited = (ContinuousClock.now - asked).secondsValue
    guard waited >= 10 else { return }
    FileHandle.standardError.write(Data("⧗ slot wait \(String(format: "%.1f", waited)) s: \(name)\n".utf8))
}

private enum BlockingSlot {
    /// Whether the running test case, or its chain, holds a slot of ``blockingBodies``.
    @TaskLocal static var held = false
}

/// The marked test bodies running now (``OwnThreadTrait``). A test that waits here would
/// count the wait against a `.timeLimit`: marked suites limit their bodies instead
/// (``OwnThreadTrait/runningAtMost``).
private let blockingBodies = AsyncGate(width: 2 * ProcessInfo.processInfo.activeProcessorCount)

/// Lets at most `width` callers in at once; the others suspend, first come first in, those
/// that ask to go `first` before the rest.
package final class AsyncGate: Sendable {
    private typealias Waiting = [CheckedContinuation<Void, Never>]
    private let state: Locked<(free: Int, waitingFirst: Waiting, waiting: Waiting)>

    /// A gate that lets `width` callers in at once (at least one).
    package init(width: Int) { state = Locked((max(1, width), [], [])) }

    /// Returns once the caller is in: at once while fewer than `width` are.
    package func enter(first: Bool) async {
        await withCheckedContinuation { continuation in
            let admitted = state.withLock { state in
                guard state.free > 0 else {
                    if first { state.waitingFirst.append(continuation) } else { state.waiting.append(continuation) }
                    return false
                }
                state.free -= 1
                return true
            }
            if admitted { continuation.resume() }
        }
    }

    /// Lets the next caller waiting in, or frees a place.
    package func leave() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if !state.waitingFirst.isEmpty { return state.waitingFirst.removeFirst() }
            if !state.waiting.isEmpty { return state.waiting.removeFirst() }
            state.free += 1
            return nil
        }
        next?.resume()
    }
}

extension Trait where Self == OwnThreadTrait {
    /// Each test case runs on a thread of its own (``OwnThreadTrait``), once a slot is free.
    package static var onOwnThread: Self { OwnThreadTrait(takesASlot: true, runningAtMost: nil) }

    /// Each test case runs on a thread of its own once a slot is free, and fails when its body
    /// runs longer than `limit` (``runLimited(to:at:_:)``): in place of `.timeLimit`, which
    /// would count its wait for the slot.
    package static func onOwnThread(runningAtMost limit: Duration) -> Self {
        OwnThreadTrait(takesASlot: true, runningAtMost: limit)
    }

    /// Each test case runs on a thread of its own at once, taking no slot: for bodies that
    /// block only for moments (waiting on a runtime's loop thread on virtual time) and start
    /// no process. In the slots, such suites waited behind tests that drive daemons for a
    /// minute and more each: under ThreadSanitizer with both cores busy the runtime's suites
    /// of tests of milliseconds ended 159–188 s into the stage, and in busy run 117, 43 of
    /// their tests ran out of their three minutes there.
    package static var blocksBriefly: Self { OwnThreadTrait(takesASlot: false, runningAtMost: nil) }
}

extension Duration {
    /// `minutes` minutes: the unit of `.timeLimit`, for ``OwnThreadTrait/runningAtMost``.
    package static func minutes(_ minutes: Int64) -> Duration { .seconds(minutes * 60) }
}
