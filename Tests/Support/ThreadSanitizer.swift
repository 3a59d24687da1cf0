// Under ThreadSanitizer (`swift test --sanitize=thread`) the tests run whose subject is
// concurrency in this process or in a child that exits by itself, where a race report fails
// the test (a child built with TSan exits with status 66). Tests where it has nothing to see
// are marked and left out there: pure computation checked against an oracle, and children
// killed with SIGKILL, whose reports no one reads.

import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Whether this process was built with ThreadSanitizer: its runtime is linked in.
package let runsUnderThreadSanitizer: Bool = dlsym(dlopen(nil, RTLD_NOW), "__tsan_init") != nil

extension Trait where Self == ConditionTrait {
    /// ThreadSanitizer has nothing to find in the test (`why` says what it checks instead):
    /// not run in a process built with it, where it would take minutes of the run.
    package static func notUnderThreadSanitizer(_ why: Comment) -> Self {
        .disabled(if: runsUnderThreadSanitizer, why)
    }
}
