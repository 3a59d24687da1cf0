// What the runtime's core runs on: the libuv loop and the parts that feed it and watch
// it. Made together with the loop; the core owns it on the loop thread.

/// The loop and its parts: the clock its turns read, the inbound queue other threads
/// hand work through, the executor for Swift jobs and the watchdog's activity stamps.
struct LoopHost {
    /// The libuv loop.
    let loop: EventLoop
    /// The runtime's clock (a `ManualClock` in tests).
    let clock: any RuntimeClock
    /// Work from other threads, applied in order at each turn.
    let queue: InboundQueue
    /// Where each turn and callback is stamped for the watchdog.
    let activity: LoopActivity
    /// Runs Swift jobs that prefer the loop.
    let executor: LoopExecutor
}
