import Dispatch
import NIOCore
import NIOPosix
import Overtime

#if canImport(Glibc)
    import Glibc
#endif

/// `idle_wakeups_per_sec`: grants (timers) open in the foreground with nothing due; how
/// often the loop thread wakes up anyway (its voluntary context switches per second).
public enum IdleWakeups {
    /// Overtime: grants begun in the foreground have no deadline until the background.
    public static func overtime(grants: Int, seconds: Double) throws -> Double {
        let runtime = try BenchmarkRuntime.start()
        defer { BenchmarkRuntime.stop(runtime) }
        let (thread, ids) = BenchmarkRuntime.onLoop(runtime) {
            (currentThreadID(), (0..<grants).map { _ in runtime.beginBackgroundTask(name: "idle") {} })
        }
        let rate = wakeupsPerSecond(thread: thread, seconds: seconds)
        BenchmarkRuntime.onLoop(runtime) { for id in ids { runtime.endBackgroundTask(id) } }
        return rate
    }

    /// SwiftNIO: tasks scheduled an hour away.
    public static func nioScheduled(grants: Int, seconds: Double) throws -> Double {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let loop = group.next()
        let thread = try loop.submit {
            for _ in 0..<grants { loop.scheduleTask(in: .hours(1)) {} }
            return currentThreadID()
        }.wait()
        return wakeupsPerSecond(thread: thread, seconds: seconds)
    }

    static func wakeupsPerSecond(thread: Int32, seconds: Double) -> Double {
        usleep(50_000)  // let the loop finish the request that told us its thread
        let before = voluntaryContextSwitches(thread: thread)
        usleep(UInt32(seconds * 1e6))
        let after = voluntaryContextSwitches(thread: thread)
        return Double(after - before) / seconds
    }
}
