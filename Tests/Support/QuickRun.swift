// `scripts/test --quick` runs the tests that stay in the test process: those that start
// processes or servers (daemons, nginx, rsyslog, SeaweedFS, PostgreSQL, dbus-daemon) are
// marked and left out when OVERTIME_QUICK is set.

import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

extension Trait where Self == ConditionTrait {
    /// The test starts processes or servers: not run by `scripts/test --quick`.
    package static var startsProcesses: Self {
        .disabled(
            if: getenv("OVERTIME_QUICK") != nil, "starts processes or servers: left out of scripts/test --quick")
    }
}
