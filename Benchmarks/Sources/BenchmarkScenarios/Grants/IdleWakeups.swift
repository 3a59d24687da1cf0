import Dispatch
import Foundation
import NIOCore
import NIOPosix
import Overtime
import ReadyNotification

#if canImport(Glibc)
    import Glibc
#endif

/// `idle_wakeups_per_sec`: grants (timers) open in the foreground with nothing due; how
/// often the process wakes up anyway, every thread of it counted (the watchdog's, the
/// pool threads of whatever it uses), in a process of its own.
public enum IdleWakeups {
    /// The implementations measured in a child process.
    public static let implementations = ["overtime", "nio_scheduled"]

    /// In the child: opens `grants` in `implementation` (the scheduler: requests, its store
    /// in `scratch`), says `READY=1` on `NOTIFY_SOCKET`, and rests until killed.
    public static func restInChild(_ implementation: String, grants: Int, scratch: String) throws -> Never {
        switch implementation {
        case "overtime":
            let runtime = try BenchmarkRuntime.start()
            let ids = BenchmarkRuntime.onLoop(runtime) {
                (0..<grants).map { _ in runtime.beginBackgroundTask(name: "idle") {} }
            }
            withExtendedLifetime(ids) { notifyReadyAndRest() }
        case "scheduler":
            // `grants` requests due in an hour, in a started scheduler on disk.
            let held = try SchedulerScenarios.restingScheduler(count: grants, scratch: scratch)
            withExtendedLifetime(held) { notifyReadyAndRest() }
        case "nio_scheduled":
            let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
            let loop = group.next()
            try loop.submit { for _ in 0..<grants { loop.scheduleTask(in: .hours(1)) {} } }.wait()
            withExtendedLifetime(group) { notifyReadyAndRest() }
        default:
            throw ScenarioError("unknown implementation \(implementation)")
        }
    }

    /// Measures the child of `implementation` from outside: wake-ups per second of every
    /// thread over `seconds`, once settled after it said it is ready (``settleMicroseconds``).
    public static func measureChild(
        executable: String, implementation: String, grants: Int, seconds: Double
    ) throws -> Double {
        // @D: the child's own folder (the scheduler's store), removed after it.
        let folder = try MeasuredProcess.temporaryFolder()
        defer { _ = try? FileManager.default.removeItem(atPath: folder) }
        let process = try MeasuredProcess(
            executable, ["--child-idle", implementation, "--count", "\(grants)", "--scratch", "@D"], folder: folder)
        _ = try process.waitForReady(timeout: 120)
        usleep(settleMicroseconds)
        return process.wakeupsPerSecond(seconds: seconds).rate
    }

    static func notifyReadyAndRest() -> Never {
        notifyReady()
        while true { pause() }
    }

}
