import Overtime
@_spi(ScheduleStore) import OvertimeScheduler
@_spi(ScheduleStore) import OvertimeSchedulerTesting
import OvertimeTestSupport
import Testing

/// The store contract's checks on the embedded stores: the SQLite file and the in-memory
/// schedule tests use (the PostgreSQL package runs them on its server).
@Suite("Every schedule store keeps the store contract")
struct ScheduleStoreConformanceTests {
    /// A fixed time, so that the checks' times are the same on every run.
    static let now = WallClockInstant(secondsSinceEpoch: 1_790_000_000)

    @Test(arguments: ScheduleStoreConformance.checks)
    func theSQLiteStore(_ check: ScheduleStoreConformance.Check) async throws {
        let folder = TemporaryDirectory("conformance")
        defer { folder.remove() }
        try await ScheduleStoreConformance.run(check, on: .sqlite(path: folder.path + "/schedule.db"), now: Self.now)
    }

    @Test(arguments: ScheduleStoreConformance.checks)
    func theInMemoryStore(_ check: ScheduleStoreConformance.Check) async throws {
        try await ScheduleStoreConformance.run(check, on: .inMemory(InMemorySchedule()), now: Self.now)
    }

    @Test func oneSchedulerAtATimeHasAnInMemorySchedule() async throws {
        let schedule = InMemorySchedule()
        let database = ScheduleDatabase.inMemory(schedule)
        let context = ScheduleStoreContext(now: Self.now, wallClock: { Self.now }, logger: .init(label: "test"))
        let first = try await database.openStore(context)
        await #expect(throws: ScheduleStoreError.self) { try await database.openStore(context) }
        first.close()
        let second = try await database.openStore(context)
        await #expect(throws: ScheduleStoreError.self, "the first, closed, refused") { try await first.pendingCount() }
        second.close()
    }
}
