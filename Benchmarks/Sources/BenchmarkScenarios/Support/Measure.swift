import CLibUVPeer
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// CLOCK_MONOTONIC in nanoseconds: the clock Overtime's `SystemClock`, `NIODeadline` and
/// `DispatchTime` all count on Linux, so deadlines of every implementation compare.
@inline(__always)
public func monotonicNanoseconds() -> Int64 {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
}

/// The process's resident memory, from `/proc/self/statm`.
public func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = text.split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}

/// The value below which `fraction` of `values` fall (nearest rank).
public func percentile(_ values: [Int64], _ fraction: Double) -> Int64 {
    guard !values.isEmpty else { return 0 }
    let sorted = values.sorted()
    let rank = Int((fraction * Double(sorted.count)).rounded(.up)) - 1
    return sorted[min(max(rank, 0), sorted.count - 1)]
}

/// Calls `body(n)` (which does `n` operations) with growing `n` for `seconds` in five
/// slices, at least once each; returns the best slice's operations per second (another
/// tenant of the machine can only slow a slice down, never speed it up). Chunks start at
/// one operation and double while they take under 10 ms, so a slow implementation
/// cannot overrun.
public func operationsPerSecond(seconds: Double, _ body: (Int) -> Void) -> Double {
    var best = 0.0
    var chunk = 1
    for _ in 0..<5 {
        let start = monotonicNanoseconds()
        let stop = start + Int64(seconds / 5 * 1e9)
        var operations = 0
        var now = start
        repeat {
            let chunkStart = now
            body(chunk)
            operations += chunk
            now = monotonicNanoseconds()
            if now - chunkStart < 10_000_000 { chunk = min(chunk * 2, 1 << 20) }
        } while now < stop
        best = max(best, Double(operations) * 1e9 / Double(now - start))
    }
    return best
}

/// Runs `body` on `count` new threads at once and waits for all of them.
public func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let group = DispatchGroup()
    for index in 0..<count {
        group.enter()
        let thread = Thread {
            body(index)
            group.leave()
        }
        thread.stackSize = 1 << 20
        thread.start()
    }
    group.wait()
}

/// A mutable box handed between threads where the scenario itself orders the accesses
/// (a loop-thread-only value, or one written before a join).
public final class Unprotected<Value>: @unchecked Sendable {
    /// The value. Unchecked: the scenario orders the accesses, and a dynamic exclusivity
    /// check per access would be measured along with the code under test.
    @exclusivity(unchecked) public var value: Value
    /// Boxes `value`.
    public init(_ value: Value) { self.value = value }
}

/// Thrown when a scenario cannot run (a peer refused, a server is missing).
public struct ScenarioError: Error, CustomStringConvertible {
    /// What went wrong.
    public let description: String
    /// Describes the failure.
    public init(_ description: String) { self.description = description }
}

/// A counter many threads (or tasks) add to.
public final class SharedCounter: Sendable {
    private let value = Atomic<Int>(0)
    /// A counter at zero.
    public init() {}
    /// Adds one.
    public func increment() { value.add(1, ordering: .relaxed) }
    /// The count so far.
    public var count: Int { value.load(ordering: .relaxed) }
}

/// Writes every dirty page out (`sync`), so that a scenario on disk does not pay for the
/// writeback of whatever ran before it.
public func settleDisk() {
    sync()
}
