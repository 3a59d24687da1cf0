import OvertimeSupport
import Synchronization

/// What the loop thread is doing, published for the watchdog thread.
///
/// The loop stamps the start of every turn and of every user callback with the real
/// monotonic time; the watchdog reads the stamp and the callback's description.
///
/// While the loop waits, nothing can hold it, so the watchdog sleeps without a timeout
/// (``waitWhileIdle()``) and the loop's next turn wakes it: a process at rest has no
/// thread waking up, and a busy loop pays one atomic load per turn.
final class LoopActivity: Sendable {
    /// Real monotonic nanoseconds when the current stretch of work began; 0 when idle.
    private let busySince = Atomic<UInt64>(0)
    private let current = Locked<LoopCallback>(.runtimeWork)
    /// The watchdog sleeps in ``waitWhileIdle()``.
    private let watcherParked = Atomic<Bool>(false)
    private let watcher = Locked(WatcherSignal())

    private struct WatcherSignal: Sendable {
        /// Bumped by each wake-up, so a waiter cannot miss one given before it waited.
        var wakeups: UInt64 = 0
        var released = false
    }

    /// The loop entered a libuv callback.
    func beginTurn() {
        current.withLock { $0 = .runtimeWork }
        busySince.store(SystemClock.monotonicNanoseconds(), ordering: .sequentiallyConsistent)
        if watcherParked.load(ordering: .sequentiallyConsistent) { wakeWatcher() }
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

    /// On the watchdog's thread: returns at once while the loop works; while it waits,
    /// sleeps until its next turn (or ``releaseWatcher()``).
    func waitWhileIdle() {
        let seen = watcher.withLock { $0.wakeups }
        // Parked, then the stamp read (both sequentially consistent, as the loop's stamp
        // then its read of `watcherParked`): either this read sees the turn's stamp, or
        // that turn sees the watchdog parked and wakes it.
        watcherParked.store(true, ordering: .sequentiallyConsistent)
        guard busySince.load(ordering: .sequentiallyConsistent) == 0 else {
            watcherParked.store(false, ordering: .relaxed)
            return
        }
        watcher.withLock(waitingUntil: { $0.released || $0.wakeups != seen }) { _, _ in }
    }

    /// Ends every wait in ``waitWhileIdle()``, now and later (the watchdog stops).
    func releaseWatcher() {
        watcher.withLock { $0.released = true }
        watcher.broadcast()
    }

    private func wakeWatcher() {
        guard watcherParked.exchange(false, ordering: .sequentiallyConsistent) else { return }
        watcher.withLock { $0.wakeups &+= 1 }
        watcher.broadcast()
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
