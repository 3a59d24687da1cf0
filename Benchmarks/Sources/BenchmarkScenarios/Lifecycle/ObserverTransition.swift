import Dispatch
import Overtime

/// `transition_1000_observers_p99_us`: with `observers` observers registered, one
/// background→foreground round trip, from the requests on the loop thread until the last
/// observer has seen `didBecomeActive`. Every observer does a little work (a count).
public enum ObserverTransition {
    /// The p99 of `roundTrips` round trips, in microseconds.
    public static func overtime(observers: Int, roundTrips: Int) throws -> Double {
        let runtime = try BenchmarkRuntime.start()
        defer { BenchmarkRuntime.stop(runtime) }
        let seen = Unprotected(0)  // loop thread only
        let requestedAt = Unprotected<Int64>(0)  // loop thread only
        let samples = Unprotected<[Int64]>([])  // loop thread only
        let done = DispatchSemaphore(value: 0)
        var tokens = (0..<observers - 1).map { _ in runtime.observe { _ in seen.value &+= 1 } }
        tokens.append(
            runtime.observe { event in
                seen.value &+= 1
                guard event == .didBecomeActive else { return }
                samples.value.append(monotonicNanoseconds() - requestedAt.value)
                done.signal()
            })
        runtime.waitForQueuedRequests()
        for _ in 0..<roundTrips {
            runtime.execute {
                requestedAt.value = monotonicNanoseconds()
                runtime.requestBackground()
                runtime.requestForeground()
            }
            done.wait()
        }
        let result = Double(percentile(samples.value, 0.99)) / 1_000
        withExtendedLifetime(tokens) {}
        return result
    }
}
