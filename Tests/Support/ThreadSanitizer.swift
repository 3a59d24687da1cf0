// Under ThreadSanitizer (scripts/test instruments this package's own modules, not its
// dependencies: OVERTIME_SANITIZE_OWN_MODULES=thread in Package.swift) the tests run whose
// subject is concurrency in this process or in a child that exits by itself, where a race
// report fails the test (a child built with TSan exits with status 66). Tests where it has
// nothing to see are marked and left out there: pure computation checked against an oracle,
// and children killed with SIGKILL, whose reports no one reads.
//
// There every thread of the process that runs Swift code waits on the same few locks, which
// is why the suites whose tests compute the most have hang guards of minutes. The Swift
// runtime's `swift::once` skips its lock-free check when ThreadSanitizer is loaded (the flag
// it leaves is 1 rather than -1, so that every call takes the lock and ThreadSanitizer sees
// the order), and the standard library's generic code, which unoptimized code calls
// unspecialized (`contains`, `reduce`, `first(where:)`, a dictionary's subscript), looks its
// metadata up through a `once` on each call. Past two threads computing at once on two cores
// they queue on that lock's futex: 16 threads calling `Array.contains` made 99,000 calls a
// second together, one thread alone 846,000 (a plain build: 2.6 million a thread, 5.7 million
// together past two). A test whose work is on a queue's thread or the loop's waits as long:
// `aOneShotRunsAtItsEarliestBegin…` took 0.03 s alone and 12.6 s in a whole run, its
// scheduler's queue thread stopped in `once_slow` in most of gdb's samples.
//
// Swift Testing's own steps for a test (starting it, ending it, its time limit) run on the
// same two shared threads, behind every other test's work queued there: in this stage with
// both cores busy, a suite of pure functions (Base64's) ended 50–82 s after the stage began,
// and the control socket client's test, whose body took 28–68 ms on its own thread (marks
// printed from it), was reported ending 45–77 s after it started. A time limit counts that
// wait, so no suite run here is guarded by less than two minutes. What held those threads
// longest (gdb, ten samples a run) was a spool test writing and recovering 120 spools one
// after another, eight samples in ten: it runs in the plain stage only.

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
