import Overtime
import OvertimeSupport

/// Virtual time for testing code that uses a `Runtime`: deadlines and timers fire when
/// the test advances the clock, never by sleeping.
///
/// ```swift
/// let clock = ManualClock()
/// let runtime = try Runtime(configuration: configuration, clock: clock)
/// runtime.start()
/// let id = runtime.beginBackgroundTask(name: "upload") { uploader.cancel() }
/// runtime.requestBackground()
/// clock.advance(by: .seconds(25))   // budget 30 s, lead 5 s: the handler has run
/// ```
///
/// ``advance(by:)`` first waits until every runtime on this clock has applied the
/// requests queued before it, then steps from one due instant to the next, in order,
/// running everything due at each before moving on; it returns when all that falls due
/// up to the target has run. Call it from the test's thread, not from a callback on a
/// runtime's loop thread.
///
/// The wall clock moves with it; ``stepWallClock(by:)`` moves the wall clock alone, as
/// NTP or an operator setting the date does.
public final class ManualClock: RuntimeClock, VirtualTimeSource, Sendable {
    private struct Registered {
        weak var timer: VirtualTimer?
    }

    private struct State {
        var now: MonotonicInstant
        /// Wall-clock time minus monotonic time, in nanoseconds.
        var wallClockOffset: Int64
        var timers: [Registered] = []
    }

    private let state: Locked<State>
    private let advancing = Locked<Void>(())

    /// The wall-clock time a clock starts at unless told otherwise: 2026-01-01T00:00:00Z.
    public static let defaultWallClockStart = WallClockInstant(secondsSinceEpoch: 1_767_225_600)

    /// Creates a clock reading `now` (by default the origin), whose wall clock reads
    /// `wallClock` at that instant.
    public init(now: MonotonicInstant = .zero, wallClock: WallClockInstant = ManualClock.defaultWallClockStart) {
        let offset = wallClock.nanosecondsSinceEpoch &- Int64(clamping: now.nanoseconds)
        state = Locked(State(now: now, wallClockOffset: offset))
    }

    /// The current virtual instant.
    public var now: MonotonicInstant { state.withLock { $0.now } }

    /// The current virtual wall-clock time.
    public var wallClockNow: WallClockInstant {
        state.withLock {
            WallClockInstant(nanosecondsSinceEpoch: Int64(clamping: $0.now.nanoseconds) &+ $0.wallClockOffset)
        }
    }

    /// Called by a runtime created with this clock.
    package func register(_ timer: VirtualTimer) {
        state.withLock { state in
            state.timers.removeAll { $0.timer == nil }
            state.timers.append(Registered(timer: timer))
        }
    }

    /// Moves time forward by `duration`, running everything that falls due on the way.
    /// A negative duration does nothing.
    public func advance(by duration: Duration) {
        advance(to: now + duration)
    }

    /// Moves time forward to `target`, running everything that falls due on the way.
    /// A target in the past only waits for queued requests.
    public func advance(to target: MonotonicInstant) {
        advancing.withLock { _ in
            waitForQueuedRequests()
            // Bounded so that a runtime that keeps asking for the same instant cannot hang a test.
            for _ in 0..<1_000_000 {
                guard let (instant, timer) = nextDue(before: target) else { break }
                state.withLock { $0.now = max($0.now, instant) }
                timer.fire()
            }
            state.withLock { $0.now = max($0.now, target) }
            waitForQueuedRequests()
        }
    }

    /// The earliest instant at which a runtime on this clock has something due (a grant's
    /// deadline, a loop timer), or `nil`. Call ``waitForQueuedRequests()`` first to see
    /// what was just scheduled.
    public var nextWakeup: MonotonicInstant? {
        liveTimers().compactMap(\.wakeup).min()
    }

    /// Steps the wall clock by `duration` (either way) without moving monotonic time.
    /// Runtimes on this clock are told, as the kernel tells them of a real step, and this
    /// returns once they have re-planned.
    public func stepWallClock(by duration: Duration) {
        state.withLock { $0.wallClockOffset &+= duration.saturatingNanoseconds }
        for timer in liveTimers() { timer.wallClockStepped() }
    }

    /// Waits until every runtime on this clock has applied the requests queued before
    /// this call, without moving time.
    public func waitForQueuedRequests() {
        for timer in liveTimers() { timer.waitForQueuedRequests() }
    }

    private func liveTimers() -> [VirtualTimer] {
        state.withLock { $0.timers.compactMap(\.timer) }
    }

    private func nextDue(before target: MonotonicInstant) -> (MonotonicInstant, VirtualTimer)? {
        var best: (MonotonicInstant, VirtualTimer)?
        for timer in liveTimers() {
            guard let wakeup = timer.wakeup, wakeup <= target else { continue }
            if best == nil || wakeup < best!.0 { best = (wakeup, timer) }
        }
        return best
    }
}
