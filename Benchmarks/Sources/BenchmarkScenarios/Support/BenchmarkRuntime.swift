import Dispatch
import Logging
import Overtime

/// Runtimes as the scenarios use them: no signal handlers or systemd (the runner is not
/// a daemon), room for millions of grants, quiet logs; the watchdog stays on as in a
/// real program.
public enum BenchmarkRuntime {
    /// A started runtime on a loop thread of its own.
    public static func start(
        lead: Duration = .seconds(1), budget: Duration = .seconds(30),
        configure: (inout RuntimeConfiguration) -> Void = { _ in }
    ) throws -> Runtime {
        var configuration = RuntimeConfiguration()
        configuration.signalHandling = nil
        configuration.systemdNotify = false
        configuration.maximumOpenBackgroundTasks = 8_000_000
        configuration.expirationLeadTime = lead
        configuration.backgroundBudget = budget
        configuration.watchdogTimeout = .seconds(60)  // one callback opens a million grants
        configuration.logger = Logger(label: "overtime-bench") { _ in SwiftLogNoOpLogHandler() }
        configure(&configuration)
        let runtime = try Runtime(configuration: configuration)
        runtime.start()
        return runtime
    }

    /// Runs `body` on the runtime's loop thread and returns its result.
    public static func onLoop<T: Sendable>(_ runtime: Runtime, _ body: @escaping @Sendable () -> T) -> T {
        let result = Unprotected<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        runtime.execute {
            result.value = body()
            done.signal()
        }
        done.wait()
        return result.value!
    }

    /// Terminates the runtime (its grants already ended) and waits for its loop to close.
    public static func stop(_ runtime: Runtime) {
        runtime.requestTermination()
        runtime.waitUntilTerminated()
    }
}
