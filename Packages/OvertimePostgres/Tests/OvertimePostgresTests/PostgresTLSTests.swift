import Foundation
import NIOConcurrencyHelpers
import Overtime
import OvertimePostgres
import OvertimeScheduler
import PostgresTestServer
import Testing

/// TLS to a real PostgreSQL server that takes TLS connections only and authenticates
/// clients by certificate; libpq's TLS parameters read or refused.
@Suite("The fleet's database over TLS", .blocking)
struct PostgresTLSTests {
    static func scheduler(_ database: PostgresScheduleConfiguration) throws -> Scheduler {
        var configuration = SchedulerConfiguration(database: .postgres(database))
        configuration.startSpacing = .zero
        return try Scheduler(runtime: try PostgresSchedulerTests.runtime(), configuration: configuration)
    }

    static func url(_ server: PostgresServer, _ query: String, host: String = "127.0.0.1") -> String {
        "postgres://postgres@\(host):\(server.port)/postgres?\(query)"
    }

    @Test func aFleetReachesItsDatabaseOverTLSWithCertificatesOnBothSides() throws {
        let server = try PostgresServer(tls: true)
        defer { server.stop() }
        let files = try #require(server.tls)
        let url = Self.url(
            server,
            "sslmode=verify-full&sslrootcert=\(files.authority)&sslcert=\(files.clientCertificate)"
                + "&sslkey=\(files.clientKey)")
        let scheduler = try Self.scheduler(try PostgresScheduleConfiguration(url: url))
        let ran = NIOLockedValueBox(0)
        try scheduler.register("tls.once") { task in
            ran.withLockedValue { $0 += 1 }
            task.setTaskCompleted(success: true)
        }
        try scheduler.start()
        try scheduler.submit(ScheduledTaskRequest(identifier: "tls.once"))
        let done = try PostgresSchedulerTests.eventually(30) {
            try scheduler.history("tls.once").map(\.result) == [.succeeded]
        }
        #expect(done && ran.withLockedValue { $0 } == 1)
        // The server saw the connection encrypted, from the client certificate's subject.
        let encrypted = try server.psql(
            "SELECT count(*) FROM pg_stat_ssl WHERE ssl AND client_dn = '/CN=postgres' AND pid <> pg_backend_pid()")
        #expect((Int(encrypted) ?? 0) >= 1, "encrypted connections: \(encrypted)")
        scheduler.runtime.requestTermination()
    }

    @Test func aServerThatDemandsTLSRefusesWhatItShouldWithTheReasonNamed() throws {
        let server = try PostgresServer(tls: true)
        defer { server.stop() }
        let files = try #require(server.tls)
        let attempts: [(query: String, reason: String)] = [
            // In the clear: the server's rule asks for TLS.
            ("sslmode=disable", "no encryption"),
            // The server's certificate is signed by an authority this client does not trust.
            ("sslmode=verify-ca&sslrootcert=\(files.strangerAuthority)", "CERTIFICATE_VERIFY_FAILED"),
            // A trusted server, but no client certificate to show it.
            ("sslmode=verify-full&sslrootcert=\(files.authority)", "certificate"),
        ]
        let client = "sslcert=\(files.clientCertificate)&sslkey=\(files.clientKey)&sslrootcert=\(files.authority)"
        // The server's certificate names 127.0.0.1, not 127.0.0.2, where it listens too:
        // verify-full compares the address, verify-ca does not.
        let named = try PostgresScheduleConfiguration(
            url: Self.url(server, "sslmode=verify-ca&" + client, host: "127.0.0.2"))
        let scheduler = try Self.scheduler(named)
        #expect(try scheduler.pendingRequestCount() == 0)
        scheduler.runtime.requestTermination()
        do {
            _ = try Self.scheduler(
                try PostgresScheduleConfiguration(
                    url: Self.url(server, "sslmode=verify-full&" + client, host: "127.0.0.2")))
            Issue.record("verify-full took a certificate for another address")
        } catch let error as SchedulerError {
            #expect(error.message.contains("failedToValidateHostname"), "\(error)")
        }
        for attempt in attempts {
            var database = try PostgresScheduleConfiguration(url: Self.url(server, attempt.query))
            database.operationTimeout = .seconds(5)
            do {
                _ = try Self.scheduler(database)
                Issue.record("\(attempt.query): connected")
            } catch let error as SchedulerError {
                #expect(error.code == .store, "\(attempt.query): \(error)")
                #expect(error.message.contains(attempt.reason), "\(attempt.query): \(error)")
            }
        }
    }

    @Test func libpqsTLSParametersAreReadOrRefusedWithTheReasonNamed() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("overtime-tls-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let files = try Certificates(in: folder)
        let base = "postgres://app@db.example/fleet?"
        let secured = try PostgresScheduleConfiguration(url: base + "sslmode=require")
        #expect(secured.tls.isEnforced)
        let preferred = try PostgresScheduleConfiguration(url: base + "sslmode=prefer&sslrootcert=\(files.authority)")
        #expect(preferred.tls.isAllowed && !preferred.tls.isEnforced)
        #expect(!(try PostgresScheduleConfiguration(url: "postgres://app@db.example/fleet")).tls.isAllowed)
        let refused: [(query: String, reason: String)] = [
            ("sslmode=bogus", "'bogus' is not one of disable, prefer, require, verify-ca, verify-full"),
            ("sslmode=allow", "'allow' is not one of"),
            ("sslmod=require", "'sslmod' is not understood"),
            ("sslmode=verify-ca&sslrootcert=\(folder)/none.pem", "does not exist"),
            ("sslmode=verify-ca&sslrootcert=\(files.clientKey)", "is not a PEM file"),
            ("sslmode=require&sslcert=\(files.clientCertificate)", "without its private key"),
            ("sslmode=require&sslkey=\(files.clientKey)", "without its certificate"),
            ("sslmode=require&sslcert=\(files.clientCertificate)&sslkey=\(files.serverKey)", "match"),
            ("sslmode=disable&sslrootcert=\(files.authority)", "uses no TLS"),
            ("sslrootcert=\(files.authority)", "without sslmode"),
        ]
        for attempt in refused {
            do {
                _ = try PostgresScheduleConfiguration(url: base + attempt.query)
                Issue.record("\(attempt.query) was taken")
            } catch {
                #expect(error.message.contains(attempt.reason), "\(attempt.query): \(error)")
            }
        }
        // A URL's password is not repeated in its errors (they are logged).
        do {
            _ = try PostgresScheduleConfiguration(url: "postgres://app:hunter2@db.example/fleet?sslmode=bogus")
        } catch {
            #expect(!error.message.contains("hunter2"), "\(error)")
        }
        // The environment: as psql reads it, libpq's default root certificate included.
        let environment = try PostgresScheduleConfiguration.environment([
            "PGUSER": "app", "PGSSLMODE": "verify-full", "PGSSLROOTCERT": files.authority,
        ])
        #expect(environment.tls.isEnforced)
        do {
            _ = try PostgresScheduleConfiguration.environment([
                "PGUSER": "app", "PGSSLMODE": "verify-full", "HOME": folder,
            ])
            Issue.record("verify-full without a root certificate was taken")
        } catch {
            #expect(error.message.contains("\(folder)/.postgresql/root.crt does not exist"), "\(error)")
        }
        try FileManager.default.createDirectory(atPath: folder + "/.postgresql", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: files.authority, toPath: folder + "/.postgresql/root.crt")
        let fromHome = try PostgresScheduleConfiguration.environment([
            "PGUSER": "app", "PGSSLMODE": "verify-ca", "HOME": folder,
        ])
        #expect(fromHome.tls.isEnforced)
        do {
            _ = try PostgresScheduleConfiguration.environment(["PGUSER": "app", "PGSSLMODE": "Require"])
            Issue.record("PGSSLMODE 'Require' was taken")
        } catch {
            #expect(error.message.contains("PGSSLMODE 'Require' is not one of"), "\(error)")
        }
    }
}
