import CLibUVPeer
import Dispatch
import NIOCore
import NIOPosix
import Overtime
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `bytes_per_open_grant`: resident memory growth per open grant (timer, task), each
/// implementation measured in a process of its own (the runner starts one per row) so
/// that memory another implementation freed cannot hide growth.
public enum OpenGrantMemory {
    /// The implementations measured, by their names in `latest.json`.
    public static let implementations = ["overtime", "libuv_timer", "nio_scheduled", "dispatch_after", "task_sleep"]

    /// Opens `count` grants of `implementation` and returns resident bytes per grant.
    public static func measure(_ implementation: String, count: Int) throws -> Double {
        switch implementation {
        case "overtime": return try overtime(count: count)
        case "libuv_timer": return libuvTimer(count: count)
        case "nio_scheduled": return try nioScheduled(count: count)
        case "dispatch_after": return dispatchAfter(count: count)
        case "task_sleep": return taskSleep(count: count)
        default: throw ScenarioError("unknown implementation \(implementation)")
        }
    }

    static func perGrant(before: Int, count: Int) -> Double {
        Double(residentBytes() - before) / Double(count)
    }

    static func overtime(count: Int) throws -> Double {
        let runtime = try BenchmarkRuntime.start()
        let before = BenchmarkRuntime.onLoop(runtime) { residentBytes() }
        return BenchmarkRuntime.onLoop(runtime) {
            let handler: @Sendable () -> Void = {}
            for _ in 0..<count { runtime.beginBackgroundTask(name: "held", expirationHandler: handler) }
            return perGrant(before: before, count: count)
        }
    }

    static func libuvTimer(count: Int) -> Double {
        let loop = UnsafeMutablePointer<uv_loop_t>.allocate(capacity: 1)
        uv_loop_init(loop)
        let before = residentBytes()
        // A handle per timer, as a program with a timer per task allocates them.
        for _ in 0..<count {
            let timer = UnsafeMutablePointer<uv_timer_t>.allocate(capacity: 1)
            uv_timer_init(loop, timer)
            uv_timer_start(timer, { _ in }, 3_600_000, 0)
        }
        return perGrant(before: before, count: count)
    }

    static func nioScheduled(count: Int) throws -> Double {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let before = try loop.submit { residentBytes() }.wait()
        return try loop.submit {
            for _ in 0..<count { loop.scheduleTask(in: .hours(1)) {} }
            return perGrant(before: before, count: count)
        }.wait()
    }

    static func dispatchAfter(count: Int) -> Double {
        let queue = DispatchQueue(label: "overtime-bench.memory")
        queue.sync {}
        let before = residentBytes()
        for _ in 0..<count { queue.asyncAfter(deadline: .now() + .seconds(3600)) {} }
        return perGrant(before: before, count: count)
    }

    static func taskSleep(count: Int) -> Double {
        let sleeping = SharedCounter()
        let before = residentBytes()
        for _ in 0..<count {
            Task {
                sleeping.increment()
                try? await Task.sleep(for: .seconds(3600))
            }
        }
        while sleeping.count < count { usleep(1_000) }
        usleep(100_000)  // the last tasks reach their sleep
        return perGrant(before: before, count: count)
    }
}
