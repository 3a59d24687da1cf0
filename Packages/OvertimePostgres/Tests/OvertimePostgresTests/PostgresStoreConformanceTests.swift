import Foundation
import Overtime
import OvertimePostgres
@_spi(ScheduleStore) import OvertimeScheduler
@_spi(ScheduleStore) import OvertimeSchedulerTesting
import PostgresTestServer
import Testing

/// The store contract's checks on a real PostgreSQL 15: each on a database of its own, on
/// the server's clock.
@Suite("The PostgreSQL store keeps the store contract")
struct PostgresStoreConformanceTests {
    @Test func everyCheckOnItsOwnDatabase() async throws {
        let server = try PostgresServer()
        defer { server.stop() }
        for (index, check) in ScheduleStoreConformance.checks.enumerated() {
            let name = "conformance_\(index)"
            _ = try server.psql("CREATE DATABASE \(name)")
            var configuration = PostgresScheduleConfiguration(
                host: "127.0.0.1", port: server.port, username: "postgres", database: name)
            configuration.instanceName = "conformance"
            let now = WallClockInstant(nanosecondsSinceEpoch: Int64(Date().timeIntervalSince1970 * 1e9))
            do {
                try await ScheduleStoreConformance.run(check, on: .postgres(configuration), now: now)
            } catch {
                Issue.record("\(error)")
            }
        }
    }
}
