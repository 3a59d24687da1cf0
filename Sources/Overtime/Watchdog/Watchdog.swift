import Logging
import OvertimeSupport

/// What the watchdog reports when one callback held the loop too long.
public struct WatchdogReport: Sendable, Hashable, CustomStringConvertible {
    /// How long the loop had been held when the watchdog looked.
    public let blockedFor: Duration
    /// What held it, e.g. "expiration handler of grant 'upload' #12, begun at Uploader.swift:88".
    public let callback: String

    /// "loop blocked for 12.0 s by …".
    public var description: String { "loop blocked for \(blockedFor) by \(callback)" }
}

/// A thread apart from the loop that checks the loop's heartbeat.
///
/// Without it a callback that blocks the loop would make every deadline meaningless:
/// no timer fires on a held loop. While the loop works it checks four times per timeout,
/// and trips once per stretch of blocking; while the loop waits it sleeps until the loop's
/// next turn (``LoopActivity/waitWhileIdle()``).
final class Watchdog: Sendable {
    private let timeout: Duration
    private let policy: WatchdogPolicy
    private let activity: LoopActivity
    private let logger: Logger
    private let onTrip: (@Sendable (WatchdogReport) -> Void)?
    /// Whether the watchdog runs; waits on it use the monotonic clock (`Locked`'s condition
    /// is made with `CLOCK_MONOTONIC`), so a wall-clock step neither delays nor fires it.
    private let running = Locked(false)

    init(
        timeout: Duration, policy: WatchdogPolicy, activity: LoopActivity, logger: Logger,
        onTrip: (@Sendable (WatchdogReport) -> Void)?
    ) {
        self.timeout = timeout
        self.policy = policy
        self.activity = activity
        self.logger = logger
        self.onTrip = onTrip
    }

    func start() {
        let wasRunning = running.withLock { running in
            defer { running = true }
            return running
        }
        guard !wasRunning else { return }
        spawnThread(name: "overtime-wdog") { [self] in watch() }
    }

    func stop() {
        running.withLock { $0 = false }
        running.broadcast()
        activity.releaseWatcher()
    }

    private func watch() {
        let limit = timeout.clampedNanoseconds
        let period = Double(max(limit / 4, 1_000_000)) / 1e9
        var trippedStretch: UInt64 = 0
        while true {
            activity.waitWhileIdle()
            guard running.withLock(waitingUntil: { !$0 }, timeout: period, { _, stopped in !stopped }) else { return }
            guard let (since, callback) = activity.snapshot(), since != trippedStretch else { continue }
            let held = SystemClock.monotonicNanoseconds() &- since
            guard held > limit else { continue }
            trippedStretch = since
            trip(WatchdogReport(blockedFor: .nanoseconds(Int64(clamping: held)), callback: callback.description))
        }
    }

    private func trip(_ report: WatchdogReport) {
        logger.critical(
            "watchdog: \(report)",
            metadata: ["blocked_seconds": "\(report.blockedFor.secondsValue)"])
        onTrip?(report)
        if let status = policy.exitStatus {
            exitProcess(status: status)
        }
    }
}
