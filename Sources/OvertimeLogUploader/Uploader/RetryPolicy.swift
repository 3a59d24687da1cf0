/// Exponential backoff with full jitter: the delay before retry `attempt` (0-based) is
/// uniform in [0, min(cap, initial × 2^attempt)], unless the collector named a delay.
struct RetryPolicy {
    let initial: Duration
    let cap: Duration

    func delay(
        attempt: Int, retryAfter: Duration?, using generator: inout some RandomNumberGenerator
    ) -> Duration {
        if let retryAfter { return retryAfter }
        let ceiling = min(cap, initial * (1 << min(attempt, 30)))
        let nanoseconds = ceiling.clampedNanoseconds
        return .nanoseconds(Int64(nanoseconds == 0 ? 0 : UInt64.random(in: 0...nanoseconds, using: &generator)))
    }
}
