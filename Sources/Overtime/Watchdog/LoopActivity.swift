import Synchronization

/// What the loop thread is doing, published for the watchdog thread.
///
/// The loop stamps the start of every turn and of every user callback with the real
/// monotonic time; the watchdog reads the stamp and the callback's description.
final class LoopActivity: Sendable {
    /// Real monotonic nanoseconds when the current stretch of work began; 0 when idle.
    private let busySince = Atomic<UInt64>(0)
    private let current = Locked<LoopCallback>(.runtimeWork)

    /// The loop entered a libuv callback.
    func beginTurn() {
        current.withLock { $0 = .runtimeWork }
        busySince.store(SystemClock.monotonicNanoseconds(), ordering: .releasing)
    }

    /// The loop returned to libuv to wait.
    func endTurn() {
        busySince.store(0, ordering: .releasing)
    }

    /// Runs `body` as `callback`, so a watchdog trip names it.
    func run<T>(_ callback: LoopCallback, _ body: () throws -> T) rethrows -> T {
        let previous = current.withLock { state in
            defer { state = callback }
            return state
        }
        busySince.store(SystemClock.monotonicNanoseconds(), ordering: .releasing)
        defer {
            current.withLock { $0 = previous }
            busySince.store(SystemClock.monotonicNanoseconds(), ordering: .releasing)
        }
        return try body()
    }

    /// Since when the loop has been busy with `callback`, or `nil` when idle.
    func snapshot() -> (since: UInt64, callback: LoopCallback)? {
        let since = busySince.load(ordering: .acquiring)
        guard since != 0 else { return nil }
        return (since, current.withLock { $0 })
    }
}

/// A piece of code the loop runs, described for a watchdog report.
enum LoopCallback: Sendable, CustomStringConvertible {
    case runtimeWork
    case observer(LifecycleEvent)
    case expirationHandler(name: String, id: BackgroundTaskID, callSite: CallSite)
    case endHandler(name: String, id: BackgroundTaskID, callSite: CallSite)
    case terminationHandler(name: String, id: BackgroundTaskID)
    case executorJob
    case closure
    case timer(CallSite)

    var description: String {
        switch self {
        case .runtimeWork: "the runtime's own work"
        case .observer(let event): "the lifecycle observers of \(event)"
        case .expirationHandler(let name, let id, let callSite):
            "expiration handler of grant '\(name)' \(id), begun at \(callSite)"
        case .endHandler(let name, let id, let callSite):
            "end handler of grant '\(name)' \(id), begun at \(callSite)"
        case .terminationHandler(let name, let id):
            "onTermination handler for grant '\(name)' \(id)"
        case .executorJob: "a job on the loop executor"
        case .closure: "a closure run on the loop"
        case .timer(let callSite): "a timer scheduled at \(callSite)"
        }
    }
}
