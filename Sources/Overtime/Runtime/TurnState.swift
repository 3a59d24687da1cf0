// Where the loop's turn stands, in one value the core owns: its time, the work taken from
// the inbound queue, the lifecycle decision it owes, and who waits for it to finish.

import Dispatch

/// Where a turn stands: its time, the work it took from the inbound queue, the
/// lifecycle decision it owes, and who waits for it to finish.
struct TurnState {
    /// The one timer that wakes the loop for the next deadline or loop timer, re-armed as
    /// each turn ends.
    var wakeup: WakeupTimer
    /// The time the current callback started, like libuv's `uv_now`: grants begun on
    /// the loop thread take it as their begin time, which saves a clock read per begin.
    var loopTime = MonotonicInstant.zero
    /// When the stall hooks last looked at the time: at each turn's start, and before the
    /// timers a turn runs (a pause can come in a turn too).
    var lastStallCheck: MonotonicInstant?
    /// A turn runs: a callback that re-enters leaves the finishing to it.
    var isInTurn = false
    /// The inbound work taken in one go (its capacity kept between turns).
    var inbound: [InboundWork] = []
    /// A lifecycle decision to take once the current transition is over.
    var needsSettle = false
    /// Transitions in progress (an observer may ask for another).
    var transitionDepth = 0
    /// Threads waiting until the loop has applied everything queued.
    var quiescenceWaiters: [DispatchSemaphore] = []
}
