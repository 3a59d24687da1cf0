import PostgresTestServer
import Testing

/// One PostgreSQL server for every test of the suite it marks, each test on a database of
/// its own: started before the suite's first test and stopped after its last, instead of a
/// server (initdb, start, stop) for each.
struct SharedPostgresServer: SuiteTrait, TestScoping {
    /// The marked suite's server, in its tests.
    @TaskLocal static var current: PostgresServer?

    var isRecursive: Bool { false }

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        let server = try PostgresServer()
        defer { server.stop() }
        try await Self.$current.withValue(server) { try await function() }
    }
}

extension Trait where Self == SharedPostgresServer {
    /// One server for the whole suite (``SharedPostgresServer``).
    static var sharedPostgresServer: Self { SharedPostgresServer() }
}
