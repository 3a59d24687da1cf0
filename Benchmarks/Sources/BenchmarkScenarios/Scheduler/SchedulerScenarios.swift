import Dispatch
import Foundation
import Logging
import Overtime
import OvertimeScheduler
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The scheduler's rows: durable submits, runs per second, lateness with many pending,
/// idle wake-ups, resident memory per pending request. Stores live on disk in `scratch`
/// (a submit is on disk when it returns, a run's end before its grant ends).
public enum SchedulerScenarios {
    /// A runtime and a scheduler whose one handler (for every identifier: `job-…`,
    /// `due-…`) completes every task at once and calls `onRun` with the task.
    static func make(
        scratch: String, maximumConcurrentRuns: Int = 64, onRun: @escaping @Sendable (ScheduledTask) -> Void = { _ in },
        runtime configure: (_ runtime: inout RuntimeConfiguration, _ folder: String) -> Void = { _, _ in }
    ) throws -> (Runtime, Scheduler, String) {
        let folder = scratch + "/scheduler-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let runtime = try BenchmarkRuntime.start { configure(&$0, folder) }
        var configuration = SchedulerConfiguration(storePath: folder + "/schedule.db")
        configuration.startSpacing = .zero
        configuration.maximumConcurrentRuns = maximumConcurrentRuns
        configuration.logger = Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }
        let scheduler = try Scheduler(runtime: runtime, configuration: configuration)
        for prefix in ["job-", "due-"] {
            try scheduler.register(prefix: prefix) { task in
                onRun(task)
                task.setTaskCompleted(success: true)
            }
        }
        return (runtime, scheduler, folder)
    }

    static func finish(_ runtime: Runtime, _ folder: String) {
        BenchmarkRuntime.stop(runtime)
        try? FileManager.default.removeItem(atPath: folder)
    }

    static func identifiers(_ count: Int) -> [String] { (0..<count).map { "job-\($0)" } }

    /// `scheduler_submit_per_sec` single: one durable `submit` (one transaction) per request.
    public static func submitSingle(count: Int, scratch: String) throws -> Double {
        let names = identifiers(count)
        let (runtime, scheduler, folder) = try make(scratch: scratch)
        defer { finish(runtime, folder) }
        try scheduler.start()
        let far = runtime.clock.wallClockNow + .seconds(86_400)
        let start = ContinuousClock.now
        for name in names {
            var request = ScheduledTaskRequest(identifier: name)
            request.earliestBegin = far
            try scheduler.submit(request)
        }
        return Double(count) / seconds(ContinuousClock.now - start)
    }

    /// `scheduler_submit_per_sec` batched: `submit(contentsOf:)`, `batch` requests a transaction.
    public static func submitBatched(count: Int, batch: Int, scratch: String) throws -> Double {
        let names = identifiers(count)
        let (runtime, scheduler, folder) = try make(scratch: scratch)
        defer { finish(runtime, folder) }
        try scheduler.start()
        let far = runtime.clock.wallClockNow + .seconds(86_400)
        let requests = names.map { name -> ScheduledTaskRequest in
            var request = ScheduledTaskRequest(identifier: name)
            request.earliestBegin = far
            return request
        }
        let start = ContinuousClock.now
        var index = 0
        while index < requests.count {
            try scheduler.submit(contentsOf: Array(requests[index..<min(index + batch, requests.count)]))
            index += batch
        }
        return Double(count) / seconds(ContinuousClock.now - start)
    }

    /// `scheduler_runs_per_sec`: `count` one-shot requests due at once, each run a grant
    /// that completes at once, its start and end durable; at most `concurrent` at once.
    public static func runs(count: Int, concurrent: Int, scratch: String) throws -> Double {
        let names = identifiers(count)
        let ran = Atomic<Int>(0)
        let (runtime, scheduler, folder) = try make(scratch: scratch, maximumConcurrentRuns: concurrent) { _ in
            ran.add(1, ordering: .relaxed)
        }
        defer { finish(runtime, folder) }
        var index = 0
        while index < names.count {
            try scheduler.submit(
                contentsOf: names[index..<min(index + 10_000, names.count)].map { ScheduledTaskRequest(identifier: $0) }
            )
            index += 10_000
        }
        let start = ContinuousClock.now
        try scheduler.start()
        while ran.load(ordering: .relaxed) < count { usleep(5_000) }
        // Every end durable: nothing is left pending.
        while try scheduler.pendingRequestCount() > 0 { usleep(1_000) }
        return Double(count) / seconds(ContinuousClock.now - start)
    }

    /// `scheduler_context_switches_per_run`: `count` one-shots due at once, run one at a
    /// time (each run's start and end written, synced and its grant ended before the next
    /// can start), and the context switches of every thread of this process but the
    /// calling one (which only waits) per run. Also returns the switches by thread name:
    /// which threads a run touches.
    public static func contextSwitchesPerRun(count: Int, scratch: String) throws -> (
        perRun: Double, byThread: [String: Int]
    ) {
        let names = identifiers(count)
        let ran = Atomic<Int>(0)
        let (runtime, scheduler, folder) = try make(scratch: scratch, maximumConcurrentRuns: 1) { _ in
            ran.add(1, ordering: .relaxed)
        }
        defer { finish(runtime, folder) }
        try scheduler.submit(contentsOf: names.map { ScheduledTaskRequest(identifier: $0) })
        let byThread = try MeasuredProcess.switchesOfOtherThreads {
            try scheduler.start()
            while ran.load(ordering: .relaxed) < count { usleep(20_000) }
            while try scheduler.pendingRequestCount() > 0 || !runtime.openBackgroundTasks.isEmpty { usleep(20_000) }
        }
        return (Double(byThread.values.reduce(0, +)) / Double(count), byThread)
    }

    /// `scheduler_lateness_p99_us`: `due` one-shots with earliest begins spread over
    /// `spread` seconds among `pending` requests a day away; how late each run starts
    /// after its earliest begin (wall clock), p99 in µs.
    public static func lateness(pending: Int, due: Int, spread: Double, scratch: String) throws -> Double {
        let waiting = identifiers(pending)
        let timed = (0..<due).map { "due-\($0)" }
        let late = Unprotected<[Double]>([])
        let lock = NSLock()
        let planned = Unprotected<[String: WallClockInstant]>([:])
        let (runtime, scheduler, folder) = try make(scratch: scratch) { task in
            guard let at = planned.value[task.identifier] else { return }
            let lateness = seconds(SystemClock().wallClockNow - at) * 1e6
            lock.lock()
            late.value.append(lateness)
            lock.unlock()
        }
        defer { finish(runtime, folder) }
        let now = runtime.clock.wallClockNow
        var index = 0
        while index < waiting.count {
            try scheduler.submit(
                contentsOf: waiting[index..<min(index + 10_000, waiting.count)].map { name in
                    var request = ScheduledTaskRequest(identifier: name)
                    request.earliestBegin = now + .seconds(86_400)
                    return request
                })
            index += 10_000
        }
        try scheduler.start()
        let first = runtime.clock.wallClockNow + .seconds(1)
        var requests: [ScheduledTaskRequest] = []
        for (index, name) in timed.enumerated() {
            var request = ScheduledTaskRequest(identifier: name)
            request.earliestBegin = first + .nanoseconds(Int64(spread * 1e9 * Double(index) / Double(due)))
            planned.value[name] = request.earliestBegin
            requests.append(request)
        }
        try scheduler.submit(contentsOf: requests)
        let deadline = ContinuousClock.now + .seconds(spread + 30)
        while ContinuousClock.now < deadline {
            lock.lock()
            let count = late.value.count
            lock.unlock()
            if count >= due { break }
            usleep(50_000)
        }
        lock.lock()
        let sorted = late.value.sorted()
        lock.unlock()
        guard !sorted.isEmpty else { throw ScenarioError("no run started") }
        Distributions.record("scheduler_lateness_p99_us", "overtime", sorted)
        return sorted[min(sorted.count - 1, Int(Double(sorted.count) * 0.99))]
    }

    /// `scheduler_idle_wakeups_per_sec`, in the child `IdleWakeups` measures from outside
    /// (every thread): a started scheduler with `count` requests due in an hour, its first
    /// plan made. Returns what must stay alive.
    static func restingScheduler(count: Int, scratch: String) throws -> (Runtime, Scheduler) {
        let names = identifiers(count)
        let (runtime, scheduler, _) = try make(scratch: scratch)
        let hour = runtime.clock.wallClockNow + .seconds(3600)
        try scheduler.submit(
            contentsOf: names.map { name in
                var request = ScheduledTaskRequest(identifier: name)
                request.earliestBegin = hour
                return request
            })
        try scheduler.start()
        _ = scheduler.pendingRequests()  // the first plan is made
        return (runtime, scheduler)
    }

    /// Resident memory with `count` requests pending, loaded by a started scheduler, in MB.
    public static func residentMegabytes(count: Int, scratch: String) throws -> Double {
        let names = identifiers(count)
        let before = residentBytes()
        let (runtime, scheduler, folder) = try make(scratch: scratch)
        defer { finish(runtime, folder) }
        let hour = runtime.clock.wallClockNow + .seconds(3600)
        var index = 0
        while index < names.count {
            try scheduler.submit(
                contentsOf: names[index..<min(index + 10_000, names.count)].map { name in
                    var request = ScheduledTaskRequest(identifier: name)
                    request.earliestBegin = hour
                    return request
                })
            index += 10_000
        }
        try scheduler.start()
        // Waits for the first plan on the scheduler's queue without listing every request:
        // a list of a million, freed, stays in malloc's heap (≈ 270 MB here) as often as not,
        // and it is the caller's, not what the scheduler holds.
        _ = scheduler.pendingRequests(tag: "none of them")
        return Double(residentBytes() - before) / 1_048_576
    }
}

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}
