// A schedule that lives in memory: what a test gives a scheduler instead of a file, so that
// its behaviour runs on virtual time with nothing on disk.

@_spi(ScheduleStore) import OvertimeScheduler
import OvertimeSupport

/// A schedule kept in memory, for tests: requests, plans and history as a `Scheduler`
/// keeps them in its SQLite file, with the same answers, and nothing written to disk.
///
/// It outlives the schedulers that open it, as a file does: a scheduler made again on the
/// same schedule (what a restart of the program makes) finds every request, and the runs
/// that were in progress recorded as interrupted. One scheduler at a time has it open.
///
/// ```swift
/// let schedule = InMemorySchedule()
/// var configuration = SchedulerConfiguration(database: .inMemory(schedule))
/// let scheduler = try Scheduler(runtime: runtime, configuration: configuration)
/// ```
///
/// What is about a file it does not have: nothing is synced (no `fdatasync` to wait for),
/// and it cannot be inspected beside its scheduler (`ScheduleDatabase.inspector()`
/// refuses).
public final class InMemorySchedule: Sendable {
    let tables = Locked(InMemoryTables())

    /// An empty schedule.
    public init() {}

    /// How many requests it holds, finished ones included.
    public var requestCount: Int { tables.withLock { $0.rows.count } }

    /// How many attempts its history holds.
    public var historyCount: Int { tables.withLock { $0.history.count } }
}

extension ScheduleDatabase {
    /// The schedule `schedule` keeps in memory (see ``InMemorySchedule``), for tests.
    public static func inMemory(_ schedule: InMemorySchedule) -> ScheduleDatabase {
        ScheduleDatabase(
            description: "in-memory schedule",
            open: { context throws(ScheduleStoreError) in
                try InMemoryScheduleStore(schedule: schedule, now: context.now)
            })
    }
}
