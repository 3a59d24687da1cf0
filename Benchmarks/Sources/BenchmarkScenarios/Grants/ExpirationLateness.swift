import Dispatch
import NIOCore
import NIOPosix
import Overtime
import Synchronization

/// `expiration_lateness_p99_us` (and `_p50_us`): `count` grants whose expiration points
/// are spread over `spreadSeconds` on the real clock, starting a second after they are
/// begun (so setting them up does not count), begun in shuffled order. Each function
/// returns every grant's lateness in nanoseconds: when the handler starts minus when it
/// was due, "due" computed from a clock read taken just before the begin (so a delay
/// inside the begin counts against the implementation).
public enum ExpirationLateness {
    /// The offsets from begin to expiration, shuffled the same way for every implementation.
    static func offsets(count: Int, spreadSeconds: Double) -> [Int64] {
        let minimum: Int64 = 1_000_000_000  // 1 s: every begin is done before the first is due
        let spread = Int64(spreadSeconds * 1e9)
        var values = (0..<count).map { minimum + spread * Int64($0) / Int64(max(count, 1)) }
        var generator = SplitMix64(seed: 0x5EED)
        values.shuffle(using: &generator)
        return values
    }

    /// The implementations measured, by their names in `latest.json`.
    public static let implementations = ["overtime", "nio_scheduled", "dispatch_after"]

    /// Measures `implementation` (one of ``implementations``).
    public static func measure(_ implementation: String, count: Int, spreadSeconds: Double) throws -> [Int64] {
        switch implementation {
        case "overtime": return try overtime(count: count, spreadSeconds: spreadSeconds)
        case "nio_scheduled": return try nioScheduled(count: count, spreadSeconds: spreadSeconds)
        case "dispatch_after": return dispatchAfter(count: count, spreadSeconds: spreadSeconds)
        default: throw ScenarioError("unknown implementation \(implementation)")
        }
    }

    /// Overtime: grants with a `maximumDuration`, whose expiration handlers end them.
    public static func overtime(count: Int, spreadSeconds: Double) throws -> [Int64] {
        let lead = Duration.seconds(1)
        let runtime = try BenchmarkRuntime.start(lead: lead)
        defer { BenchmarkRuntime.stop(runtime) }
        let recorder = LatenessRecorder(offsets: offsets(count: count, spreadSeconds: spreadSeconds))
        let ids = Unprotected([BackgroundTaskID](repeating: .invalid, count: count))  // loop thread only
        runtime.execute {
            recorder.schedule { index, offset, due in
                ids.value[index] = runtime.beginBackgroundTask(
                    name: "lateness", maximumDuration: lead + .nanoseconds(offset)
                ) {
                    recorder.record(index, due: due)
                    runtime.endBackgroundTask(ids.value[index])
                }
            }
        }
        return recorder.wait()
    }

    /// SwiftNIO: `scheduleTask(deadline:)` on the event loop.
    public static func nioScheduled(count: Int, spreadSeconds: Double) throws -> [Int64] {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let loop = group.next()
        let recorder = LatenessRecorder(offsets: offsets(count: count, spreadSeconds: spreadSeconds))
        loop.execute {
            recorder.schedule { index, _, due in
                loop.scheduleTask(deadline: .uptimeNanoseconds(UInt64(due))) { recorder.record(index, due: due) }
            }
        }
        return recorder.wait()
    }

    /// Dispatch: `asyncAfter(deadline:)` on a serial queue.
    public static func dispatchAfter(count: Int, spreadSeconds: Double) -> [Int64] {
        let queue = DispatchQueue(label: "overtime-bench.lateness")
        let recorder = LatenessRecorder(offsets: offsets(count: count, spreadSeconds: spreadSeconds))
        queue.sync {
            recorder.schedule { index, _, due in
                queue.asyncAfter(deadline: DispatchTime(uptimeNanoseconds: UInt64(due))) {
                    recorder.record(index, due: due)
                }
            }
        }
        return recorder.wait()
    }
}

/// Schedules one deadline per offset and collects each handler's lateness. `schedule` and
/// `record` run on the thread (loop, queue) the implementation calls handlers on.
final class LatenessRecorder: @unchecked Sendable {
    private let offsets: [Int64]
    private var lateness: [Int64]
    private var remaining: Int
    private let done = DispatchSemaphore(value: 0)

    init(offsets: [Int64]) {
        self.offsets = offsets
        lateness = [Int64](repeating: 0, count: offsets.count)
        remaining = offsets.count
    }

    /// Calls `begin(index, offset, due)` for every deadline, `due` read just before.
    func schedule(_ begin: (Int, Int64, Int64) -> Void) {
        for (index, offset) in offsets.enumerated() { begin(index, offset, monotonicNanoseconds() + offset) }
    }

    /// A handler started: records how late, and wakes ``wait()`` after the last.
    func record(_ index: Int, due: Int64) {
        lateness[index] = monotonicNanoseconds() - due
        remaining -= 1
        if remaining == 0 { done.signal() }
    }

    /// Every lateness, in nanoseconds, once every handler has run.
    func wait() -> [Int64] {
        done.wait()
        return lateness
    }
}

/// A small seeded generator, so every run shuffles alike.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var value = state
        value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
        value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
        return value ^ (value >> 31)
    }
}
