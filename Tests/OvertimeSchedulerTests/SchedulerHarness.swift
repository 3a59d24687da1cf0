import Overtime
import OvertimeSchedulerTesting
import OvertimeSupport
import OvertimeTestSupport
import OvertimeTesting

@_spi(ScheduleStore) @testable import OvertimeScheduler

/// A scheduler on a virtual runtime, its schedule in memory (or, for what is about the
/// file, in a SQLite store in a temporary folder), and a handler that records every attempt
/// and completes it as the test scripts.
final class SchedulerHarness: Sendable {
    /// Where the schedule is kept.
    enum Store: Sendable {
        /// An ``InMemorySchedule``: the scheduler's behaviour, nothing on disk.
        case inMemory
        /// The SQLite file at ``SchedulerHarness/path``: what is about the file.
        case sqlite
    }

    struct Attempt: Sendable, Equatable {
        let identifier: String
        let runID: Int64
        let attempt: Int
        let at: WallClockInstant
    }

    /// What the handler does with an attempt.
    enum Answer: Sendable { case succeed, fail, hang }

    let env: VirtualRuntime
    let folder: TemporaryDirectory
    let attempts = Recorder<Attempt>()
    let script: Locked<@Sendable (Attempt) -> Answer>
    let hanging = Recorder<ScheduledTask>()
    let store: Store
    /// The schedule of a harness on ``Store/inMemory``, which restarts (``open``) find again.
    let schedule = InMemorySchedule()
    private let scheduler: Locked<Scheduler?>

    var path: String { folder.path + "/schedule.db" }
    var clock: ManualClock { env.clock }
    var now: WallClockInstant { env.clock.wallClockNow }

    init(
        identifiers: [String] = ["job"], prefixes: [String] = [], store: Store = .inMemory,
        configure: (inout SchedulerConfiguration) -> Void = { _ in },
        folder: TemporaryDirectory? = nil, env: VirtualRuntime? = nil
    ) throws {
        self.store = store
        self.env = try env ?? VirtualRuntime(budget: .seconds(3600), lead: .seconds(5))
        self.folder = folder ?? TemporaryDirectory("scheduler")
        script = Locked({ _ in .succeed })
        scheduler = Locked(nil)
        try open(identifiers: identifiers, prefixes: prefixes, configure: configure)
    }

    /// A new scheduler on the same store (what a restart of the program makes); the
    /// handler serves `identifiers` one by one and every identifier with one of `prefixes`.
    func open(
        identifiers: [String] = ["job"], prefixes: [String] = [],
        configure: (inout SchedulerConfiguration) -> Void = { _ in }
    ) throws {
        var configuration = SchedulerConfiguration(storePath: path)
        if store == .inMemory { configuration.database = .inMemory(schedule) }
        configuration.startSpacing = .zero
        configuration.logger = env.logs.logger
        configure(&configuration)
        scheduler.withLock { $0 }?.abandon()  // the previous process ends here
        let made = try Scheduler(runtime: env.runtime, configuration: configuration)
        let handler: @Sendable (ScheduledTask) -> Void = { [self] task in
            let attempt = Attempt(identifier: task.identifier, runID: task.runID, attempt: task.attempt, at: now)
            attempts.append(attempt)
            switch script.withLock({ $0 })(attempt) {
            case .succeed: task.setTaskCompleted(success: true)
            case .fail: task.setTaskCompleted(success: false)
            case .hang: hanging.append(task)
            }
        }
        for identifier in identifiers { try made.register(identifier, handler: handler) }
        for prefix in prefixes { try made.register(prefix: prefix, handler: handler) }
        scheduler.withLock { $0 = made }
    }

    var current: Scheduler { scheduler.withLock { $0! } }

    /// Lets the scheduler act on everything asked of it.
    func settle() { current.waitUntilIdle() }

    /// Moves virtual time to `target` one wake-up at a time, letting the scheduler act at
    /// each, so every run starts at exactly the instant it was due.
    func advance(to target: WallClockInstant) {
        settle()
        for _ in 0..<100_000 {
            let monotonicTarget = clock.now + max(target - now, .zero)
            guard let next = clock.nextWakeup, next <= monotonicTarget else { break }
            clock.advance(to: next)
            settle()
        }
        clock.advance(to: clock.now + max(target - now, .zero))
        settle()
    }

    func advance(by duration: Duration) { advance(to: now + duration) }

    func finish() {
        env.shutDown()
        folder.remove()
    }
}
