/// Exponential backoff with full jitter: the delay before retry `attempt` (0-based) is
/// uniform in [0, min(cap, initial × 2^attempt)]. (A collector's `Retry-After` is not a
/// draw: the uploader waits it out as named.)
struct RetryPolicy {
    let initial: Duration
    let cap: Duration

    /// Drawn by the system generator inside the standard library, not through an `inout`
    /// generator: `SystemRandomNumberGenerator` has no storage, and ThreadSanitizer checks a
    /// generic function's `inout` access at whatever address stands for such a value, which
    /// two loop threads can share (a race on nothing, reported).
    func delay(attempt: Int) -> Duration {
        let ceiling = min(cap, initial * (1 << min(attempt, 30)))
        let nanoseconds = ceiling.clampedNanoseconds
        return .nanoseconds(Int64(nanoseconds == 0 ? 0 : UInt64.random(in: 0...nanoseconds)))
    }
}
