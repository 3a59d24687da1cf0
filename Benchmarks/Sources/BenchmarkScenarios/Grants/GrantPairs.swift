import CLibUVPeer
import Dispatch
import NIOCore
import NIOPosix
import Overtime
import Synchronization

/// `grant_begin_end_pairs_per_sec`: with `open` grants (timers, tasks) already open, how
/// many begin+end pairs one thread makes per second. Every implementation gets the same
/// shape: a deadline far away, a handler that captures nothing, and an end before it fires.
public enum GrantPairs {
    static let farAway: Int64 = 3_600

    /// The implementations whose instructions per pair are counted (`task_sleep` is left
    /// out: its pairs finish on the cooperative pool, after the count would stop).
    public static let countedImplementations = [
        "overtime", "overtime_bare", "libuv_timer", "libuv_timer_reused", "nio_scheduled", "dispatch_after",
    ]

    /// Runs `pairs` pairs of `implementation` with `open` open (in a child process that a
    /// parent counts the instructions of).
    public static func run(_ implementation: String, open: Int, pairs: Int) throws {
        let run = PairRun.pairs(pairs)
        switch implementation {
        case "overtime": _ = try overtime(open: open, run)
        case "overtime_bare": _ = try overtime(open: open, run, bare: true)
        case "libuv_timer": _ = libuvTimer(open: open, run)
        case "libuv_timer_reused": _ = libuvTimerReused(open: open, run)
        case "nio_scheduled": _ = try nioScheduled(open: open, run)
        case "dispatch_after": _ = dispatchAfter(open: open, run)
        default: throw ScenarioError("unknown implementation \(implementation)")
        }
    }

    /// Overtime on its loop thread: `beginBackgroundTask` + `endBackgroundTask`.
    ///
    /// `bare`: the pairs begun as `beginBackgroundTask()` — no name, no expiration handler —
    /// what the API costs without the closure and the string it keeps for reports.
    public static func overtime(open: Int, _ run: PairRun, bare: Bool = false) throws -> Double {
        let runtime = try BenchmarkRuntime.start()
        defer { BenchmarkRuntime.stop(runtime) }
        return BenchmarkRuntime.onLoop(runtime) {
            let handler: @Sendable () -> Void = {}
            var held: [BackgroundTaskID] = []
            held.reserveCapacity(open)
            for _ in 0..<open { held.append(runtime.beginBackgroundTask(name: "held", expirationHandler: handler)) }
            let rate = run.measure { count in
                if bare {
                    for _ in 0..<count { runtime.endBackgroundTask(runtime.beginBackgroundTask()) }
                } else {
                    for _ in 0..<count {
                        let id = runtime.beginBackgroundTask(name: "pair", expirationHandler: handler)
                        runtime.endBackgroundTask(id)
                    }
                }
            }
            for id in held { runtime.endBackgroundTask(id) }
            return rate
        }
    }

    /// Two threads off the loop thread, each making begin+end pairs; timed until the loop
    /// has applied every one (`flush`).
    public static func overtimeCrossThread(open: Int, pairs: Int) throws -> Double {
        let runtime = try BenchmarkRuntime.start()
        defer { BenchmarkRuntime.stop(runtime) }
        let held = BenchmarkRuntime.onLoop(runtime) {
            (0..<open).map { _ in runtime.beginBackgroundTask(name: "held", expirationHandler: {}) }
        }
        let start = monotonicNanoseconds()
        onThreads(2) { _ in
            let handler: @Sendable () -> Void = {}
            for _ in 0..<pairs / 2 {
                let id = runtime.beginBackgroundTask(name: "pair", expirationHandler: handler)
                runtime.endBackgroundTask(id)
            }
        }
        runtime.waitForQueuedRequests()
        let elapsed = monotonicNanoseconds() - start
        BenchmarkRuntime.onLoop(runtime) { for id in held { runtime.endBackgroundTask(id) } }
        return Double(pairs / 2 * 2) * 1e9 / Double(elapsed)
    }

    /// Raw libuv, a timer per task as a program would use it: allocate and `uv_timer_init`
    /// a handle, `uv_timer_start`; to end it, `uv_timer_stop` and `uv_close`, the handle
    /// freed in its close callback (the loop runs once per chunk to call them).
    public static func libuvTimer(open: Int, _ run: PairRun) -> Double {
        let timers = LibuvTimers(open: open)
        defer { timers.close() }
        return run.measure { count in timers.pairsWithOwnHandles(count) }
    }

    /// Raw libuv at its cheapest: `uv_timer_start` + `uv_timer_stop` on one handle that
    /// already exists (a lower bound no program with a timer per task reaches).
    public static func libuvTimerReused(open: Int, _ run: PairRun) -> Double {
        let timers = LibuvTimers(open: open)
        defer { timers.close() }
        return run.measure { count in timers.pairs(count) }
    }

    /// SwiftNIO on its event loop: `scheduleTask(in:)` + `Scheduled.cancel()`.
    public static func nioScheduled(open: Int, _ run: PairRun) throws -> Double {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let loop = group.next()
        return try loop.submit {
            var held: [Scheduled<Void>] = []
            held.reserveCapacity(open)
            for _ in 0..<open { held.append(loop.scheduleTask(in: .seconds(farAway)) {}) }
            let rate = run.measure { count in
                for _ in 0..<count { loop.scheduleTask(in: .seconds(farAway)) {}.cancel() }
            }
            for scheduled in held { scheduled.cancel() }
            return rate
        }.wait()
    }

    /// Dispatch: `asyncAfter` of a `DispatchWorkItem` + `cancel()`.
    public static func dispatchAfter(open: Int, _ run: PairRun) -> Double {
        let queue = DispatchQueue(label: "overtime-bench.dispatch")
        var held: [DispatchWorkItem] = []
        held.reserveCapacity(open)
        for _ in 0..<open {
            let item = DispatchWorkItem {}
            queue.asyncAfter(deadline: .now() + .seconds(Int(farAway)), execute: item)
            held.append(item)
        }
        let rate = run.measure { count in
            for _ in 0..<count {
                let item = DispatchWorkItem {}
                queue.asyncAfter(deadline: .now() + .seconds(Int(farAway)), execute: item)
                item.cancel()
            }
        }
        for item in held { item.cancel() }
        return rate
    }

    /// Swift concurrency: a `Task` that sleeps + `cancel()`; timed until every cancelled
    /// task has finished (the work happens on the cooperative pool).
    public static func taskSleep(open: Int, seconds: Double) -> Double {
        let finished = SharedCounter()
        let held = (0..<open).map { _ in
            Task {
                try? await Task.sleep(for: .seconds(farAway))
                finished.increment()
            }
        }
        let start = monotonicNanoseconds()
        let stop = start + Int64(seconds * 1e9)
        var made = 0
        let batch = 10_000
        repeat {
            for _ in 0..<batch {
                let task = Task {
                    try? await Task.sleep(for: .seconds(farAway))
                    finished.increment()
                }
                task.cancel()
            }
            made += batch
        } while monotonicNanoseconds() < stop
        while finished.count < made { sched_yield() }
        let rate = Double(made) * 1e9 / Double(monotonicNanoseconds() - start)
        // Cancelled, the held tasks wake and finish on the cooperative pool: wait for that,
        // or it would compete with the next scenario for the CPUs.
        for task in held { task.cancel() }
        while finished.count < made + open { usleep(1_000) }
        return rate
    }
}

/// A libuv loop with `open` timers started an hour away, and one more for pairs.
public final class LibuvTimers {
    let loop = UnsafeMutablePointer<uv_loop_t>.allocate(capacity: 1)
    let timers: UnsafeMutablePointer<uv_timer_t>
    let open: Int

    /// Starts `open` timers an hour away.
    public init(open: Int) {
        self.open = open
        uv_loop_init(loop)
        timers = .allocate(capacity: open + 1)
        for index in 0...open { uv_timer_init(loop, timers + index) }
        for index in 0..<open { uv_timer_start(timers + index, { _ in }, 3_600_000, 0) }
    }

    /// `count` timers with handles of their own: allocated, started, stopped, closed, freed.
    public func pairsWithOwnHandles(_ count: Int) {
        for _ in 0..<count {
            let timer = UnsafeMutablePointer<uv_timer_t>.allocate(capacity: 1)
            uv_timer_init(loop, timer)
            uv_timer_start(timer, { _ in }, 3_600_000, 0)
            uv_timer_stop(timer)
            uv_close(UnsafeMutableRawPointer(timer).assumingMemoryBound(to: uv_handle_t.self)) { handle in
                UnsafeMutableRawPointer(handle!).deallocate()
            }
        }
        uv_run(loop, UV_RUN_NOWAIT)  // calls the close callbacks
    }

    /// `count` times `uv_timer_start` + `uv_timer_stop` on the spare timer.
    public func pairs(_ count: Int) {
        let pair = timers + open
        for _ in 0..<count {
            uv_timer_start(pair, { _ in }, 3_600_000, 0)
            uv_timer_stop(pair)
        }
    }

    /// Closes every timer and the loop.
    public func close() {
        for index in 0...open {
            uv_close(UnsafeMutableRawPointer(timers + index).assumingMemoryBound(to: uv_handle_t.self), nil)
        }
        uv_run(loop, UV_RUN_DEFAULT)
        uv_loop_close(loop)
        timers.deallocate()
        loop.deallocate()
    }
}

/// How pairs are made: for a time (their rate per second is returned), or a fixed number
/// of them (for an instruction count taken from outside; the number is returned).
public enum PairRun: Sendable {
    case seconds(Double)
    case pairs(Int)

    func measure(_ body: (Int) -> Void) -> Double {
        switch self {
        case .seconds(let seconds):
            return operationsPerSecond(seconds: seconds, body)
        case .pairs(let count):
            body(count)
            return Double(count)
        }
    }
}
