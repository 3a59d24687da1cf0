import Foundation
import Testing

/// Runs each test case of the suite it marks on a thread of its own, as many at once as the
/// machine has processors (the others wait without holding a thread).
///
/// These tests block: they drive worker processes, poll sockets, sleep through claims.
/// Swift Testing runs every test body on Swift's shared threads, two on a two-core machine,
/// so two such bodies held back every other test of the package, the async ones too (under
/// ThreadSanitizer, sixteen tests of a few seconds each ended together after 63 s, and the
/// inspector's tests took 110 s). Every suite of the package is marked, the async ones too,
/// so that they count among those at once: with twice as many, calls to a database starved
/// of the processor missed their 5 s deadline (with the fleets' workers instrumented, and
/// with plain workers when other processes kept both cores busy).
///
/// Fleets' tests (``blockingFleet``) go first when they wait: their suites run one test at a
/// time and are the longest, and at the back of the line each of their tests waited its turn
/// anew behind every other test of the package.
struct BlockingTests: SuiteTrait, TestTrait, TestScoping {
    /// Whether the marked tests go before the others waiting.
    let first: Bool

    var isRecursive: Bool { true }

    func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        testCase == nil ? nil : self
    }

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        await Self.admission.enter(first: first)
        let thread = BodyThread()
        defer {
            thread.finish()
            Self.admission.leave()
        }
        try await withTaskExecutorPreference(thread) { try await function() }
    }

    private static let admission = Admission(width: ProcessInfo.processInfo.activeProcessorCount)
}

extension Trait where Self == BlockingTests {
    /// Each test case on a thread of its own (``BlockingTests``).
    static var blocking: Self { BlockingTests(first: false) }

    /// Each test case on a thread of its own, before the others when it waits (``BlockingTests``).
    static var blockingFleet: Self { BlockingTests(first: true) }
}

/// A task executor that runs its jobs on one thread, started for it and ended by `finish()`.
private final class BodyThread: TaskExecutor, @unchecked Sendable {
    // Guarded by `condition`.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var finished = false

    init() {
        let thread = Thread { [self] in serve() }
        thread.stackSize = 8 << 20
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    func finish() {
        condition.lock()
        finished = true
        condition.signal()
        condition.unlock()
    }

    private func serve() {
        while true {
            condition.lock()
            while jobs.isEmpty && !finished { condition.wait() }
            let batch = jobs
            let done = finished
            jobs.removeAll()
            condition.unlock()
            for job in batch { job.runSynchronously(on: asUnownedTaskExecutor()) }
            if done && batch.isEmpty { return }
        }
    }
}

/// Lets at most `width` callers in at once; the rest suspend until one leaves, in order, those
/// who asked to go first before the others.
private final class Admission: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var free: Int
    private var waitingFirst: [CheckedContinuation<Void, Never>] = []
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(width: Int) { free = max(1, width) }

    func enter(first: Bool) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            lock.lock()
            if free > 0 {
                free -= 1
                lock.unlock()
                continuation.resume()
            } else {
                if first { waitingFirst.append(continuation) } else { waiting.append(continuation) }
                lock.unlock()
            }
        }
    }

    func leave() {
        lock.lock()
        if !waitingFirst.isEmpty {
            let next = waitingFirst.removeFirst()
            lock.unlock()
            next.resume()
        } else if !waiting.isEmpty {
            let next = waiting.removeFirst()
            lock.unlock()
            next.resume()
        } else {
            free += 1
            lock.unlock()
        }
    }
}
