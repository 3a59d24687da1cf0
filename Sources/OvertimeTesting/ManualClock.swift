import Overtime

/// Virtual time for testing code that uses a ``Runtime``: deadlines fire when the test
/// advances the clock, never by sleeping.
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
/// requests queued before it, then steps from one due instant to the next, in deadline
/// order, running everything due at each before moving on; it returns when all that
/// falls due up to the target has run. Call it from the test's thread, not from a
/// callback on a runtime's loop thread.
public final class ManualClock: RuntimeClock, VirtualTimeDriver, Sendable {
    private struct Registered {
        weak var timer: VirtualTimer?
    }

    private struct State {
        var now: MonotonicInstant
        var timers: [Registered] = []
    }

    private let state: Locked<State>
    private let advancing = Locked<Void>(())

    /// Creates a clock reading `now` (by default the origin).
    public init(now: MonotonicInstant = .zero) {
        state = Locked(State(now: now))
    }

    /// The current virtual instant.
    public var now: MonotonicInstant { state.withLock { $0.now } }

    /// This clock drives its runtimes' timers.
    public var virtualTimeDriver: (any VirtualTimeDriver)? { self }

    /// Called by a runtime created with this clock.
    public func register(_ timer: VirtualTimer) {
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
    /// A target in the past only settles queued requests.
    public func advance(to target: MonotonicInstant) {
        advancing.withLock { _ in
            settle()
            // Bounded so that a runtime that keeps asking for the same instant cannot hang a test.
            for _ in 0..<1_000_000 {
                guard let (instant, timer) = nextDue(before: target) else { break }
                state.withLock { $0.now = max($0.now, instant) }
                timer.fire()
            }
            state.withLock { $0.now = max($0.now, target) }
            settle()
        }
    }

    /// Waits until every runtime on this clock has applied the requests queued before
    /// this call, without moving time.
    public func settle() {
        for timer in liveTimers() { timer.settle() }
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
