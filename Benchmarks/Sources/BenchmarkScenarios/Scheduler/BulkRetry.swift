// `scheduler_bulk_retry_ms`: an operator's retry of everything that failed for good, asked
// on the daemon's control socket as the dashboard and `overtimectl retry-failed` ask it, in
// a schedule that keeps many finished requests beside the few that failed.

import Foundation
import Overtime
import OvertimeControl
import OvertimeScheduler
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `scheduler_bulk_retry_ms`.
public enum BulkRetry {
    /// The tag every request that fails carries.
    static let tag = "nightly"
    /// How many times each retry is timed.
    public static let retries = 5

    /// A schedule of `succeeded` one-shots that succeeded (`job-…`, untagged) and `failed`
    /// that failed for good (`bad-…`, tagged `nightly`, one attempt each); then
    /// `retry-failed tag=nightly`, and `retry-failed prefix=bad-`, each ``retries`` times
    /// (the retried requests run and fail again before the next), each timed from the
    /// command sent to its answer: the medians, in milliseconds.
    /// - Throws: when a retry did not submit every failed request again.
    public static func measure(succeeded: Int, failed: Int, scratch: String) throws -> (byTag: Double, byPrefix: Double)
    {
        // The scenarios' scheduler (whose `job-` handlers succeed), answering on a control socket.
        let (runtime, scheduler, folder) = try SchedulerScenarios.make(
            scratch: scratch, maximumConcurrentRuns: 1_000,
            runtime: { runtime, folder in runtime.controlSocket = .path(folder + "/control.sock") })
        defer { SchedulerScenarios.finish(runtime, folder) }
        let socket = folder + "/control.sock"
        let failures = Atomic<Int>(0)
        try scheduler.register(prefix: "bad-") { task in
            failures.add(1, ordering: .relaxed)
            task.setTaskCompleted(success: false)
        }
        try scheduler.start()
        var index = 0
        while index < succeeded {
            try scheduler.submit(
                contentsOf: (index..<min(index + 10_000, succeeded)).map {
                    ScheduledTaskRequest(identifier: "job-\($0)")
                })
            index += 10_000
        }
        try scheduler.submit(
            contentsOf: (0..<failed).map {
                var request = ScheduledTaskRequest(identifier: "bad-\($0)")
                request.tags = [tag]
                request.retry.maximumAttempts = 1
                return request
            })
        func settled(failures expected: Int) {
            while failures.load(ordering: .relaxed) < expected { usleep(5_000) }
            while (try? scheduler.pendingRequestCount()) != 0 { usleep(5_000) }
        }
        settled(failures: failed)
        func timed(_ arguments: [String]) throws -> Double {
            let before = failures.load(ordering: .relaxed)
            let started = ContinuousClock.now
            let answer = try ControlSocketClient(path: socket).call("retry-failed", arguments + ["by=bench"])
            let took = seconds(ContinuousClock.now - started) * 1000
            guard answer.hasPrefix("submitted again \(failed) request") else {
                throw ScenarioError("retry-failed \(arguments.joined(separator: " ")): \(answer)")
            }
            // Run (and failed) again before the next retry.
            settled(failures: before + failed)
            return took
        }
        func median(_ arguments: [String]) throws -> Double {
            let taken = try (0..<retries).map { _ in try timed(arguments) }.sorted()
            return taken[taken.count / 2]
        }
        return (try median(["tag=\(tag)"]), try median(["prefix=bad-"]))
    }
}
