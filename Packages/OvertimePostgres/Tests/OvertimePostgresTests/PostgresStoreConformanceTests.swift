import Foundation
import Overtime
import OvertimePostgres
@_spi(ScheduleStore) import OvertimeScheduler
@_spi(ScheduleStore) import OvertimeSchedulerTesting
import PostgresTestServer
import Testing

/// The store contract's checks on a real PostgreSQL 15: each on a database of its own of
/// one server, on the server's clock, the checks side by side.
@Suite("The PostgreSQL store keeps the store contract", .sharedPostgresServer, .blocking)
struct PostgresStoreConformanceTests {
    @Test(arguments: ScheduleStoreConformance.checks)
    func onADatabaseOfItsOwn(_ check: ScheduleStoreConformance.Check) async throws {
        let server = try #require(SharedPostgresServer.current)
        let index = try #require(ScheduleStoreConformance.checks.firstIndex { $0.name == check.name })
        let name = "conformance_\(index)"
        _ = try server.psql("CREATE DATABASE \(name)")
        var configuration = PostgresScheduleConfiguration(
            host: "127.0.0.1", port: server.port, username: "postgres", database: name)
        configuration.instanceName = "conformance"
        let now = WallClockInstant(nanosecondsSinceEpoch: Int64(Date().timeIntervalSince1970 * 1e9))
        try await ScheduleStoreConformance.run(check, on: .postgres(configuration), now: now)
    }
}
