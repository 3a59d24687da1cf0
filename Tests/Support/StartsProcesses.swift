// Tests that start processes or servers (daemons, nginx, rsyslog, SeaweedFS, PostgreSQL,
// dbus-daemon) and wait on them: each case runs on a thread of its own, and
// `scripts/test --quick` (OVERTIME_QUICK set) leaves them out.

import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Marks a test, or every test of a suite, that starts processes or servers.
///
/// Such a test blocks while it waits on them (spawning, polling a socket, waiting for an
/// exit), so each of its cases runs as ``OwnThreadTrait`` runs one: on a thread of its own,
/// at most twice as many at once as the machine has processors. On Swift's shared threads
/// (one per core), two of them at once held back every other test: suites started many
/// seconds late, and trivial tests measured tens of seconds.
package struct StartsProcessesTrait: TestTrait, SuiteTrait, TestScoping {
    package var isRecursive: Bool { true }

    package var comments: [Comment] { ["starts processes or servers"] }

    package func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        getenv("OVERTIME_QUICK") != nil || testCase != nil ? self : nil
    }

    package func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        if getenv("OVERTIME_QUICK") != nil {
            try Test.cancel("starts processes or servers: left out of scripts/test --quick")
        }
        try await runAsBlockingBody(function)
    }
}

extension Trait where Self == StartsProcessesTrait {
    /// The test starts processes or servers (``StartsProcessesTrait``): each case runs on a
    /// thread of its own, and `scripts/test --quick` leaves it out.
    package static var startsProcesses: Self { StartsProcessesTrait() }
}
