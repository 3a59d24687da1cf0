import Dispatch
import Foundation
import Overtime
import OvertimeSystem

/// `sleep_to_release_ms`: logind announces a sleep (`PrepareForSleep(true)`) to a program
/// with nothing running; how long until it has let go of its delay lock, as the program
/// measures it (the signal read on the loop → the lock's descriptor closed). Each cycle
/// resumes (`PrepareForSleep(false)`) and waits for the lock to be taken again.
public enum SleepRelease {
    /// The samples of `cycles` sleeps, in nanoseconds, and logind's delay in milliseconds.
    public static func measure(cycles: Int) throws -> (samples: [Int64], logindDelay: Double) {
        let bus = try PrivateSystemBus.shared()
        let runtime = try BenchmarkRuntime.start()
        defer { BenchmarkRuntime.stop(runtime) }
        var configuration = LogindMonitor.Configuration()
        configuration.who = "overtime-bench"
        configuration.busAddress = bus.address
        let monitor = LogindMonitor(runtime: runtime, configuration: configuration)
        try monitor.start()
        defer { monitor.stop() }
        try waitFor("the delay lock") { monitor.status.holdsLock && monitor.status.delay != nil }
        var samples: [Int64] = []
        for _ in 0..<cycles {
            try bus.prepareForSleep(true)
            try waitFor("the lock let go") { !monitor.status.holdsLock }
            guard let waited = monitor.status.lastSleepWait else {
                throw PrivateSystemBus.BusError("no sleep wait recorded")
            }
            samples.append(waited.components.seconds * 1_000_000_000 + waited.components.attoseconds / 1_000_000_000)
            try bus.prepareForSleep(false)
            try waitFor("the lock taken again") { monitor.status.holdsLock }
            runtime.requestForeground()
            runtime.waitForQueuedRequests()
        }
        let delay = monitor.status.delay ?? .zero
        return (samples, Double(delay.components.seconds) * 1e3 + Double(delay.components.attoseconds) / 1e15)
    }

    private static func waitFor(_ what: String, _ condition: () -> Bool) throws {
        let deadline = DispatchTime.now().uptimeNanoseconds + 30_000_000_000
        while !condition() {
            guard DispatchTime.now().uptimeNanoseconds < deadline else {
                throw PrivateSystemBus.BusError("\(what) did not happen in 30 s")
            }
            usleep(200)
        }
    }
}
