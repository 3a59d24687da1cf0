#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A value guarded by a pthread mutex, with a condition to wait on for changes to it.
///
/// Not `Synchronization.Mutex`: on Linux that is built on raw futex calls, which
/// ThreadSanitizer cannot see, so every access under it is reported as a race and the
/// concurrency tests could not run under `--sanitize=thread`. A pthread mutex is
/// intercepted by TSan and costs the same uncontended. Adaptive (glibc's
/// `PTHREAD_MUTEX_ADAPTIVE_NP`): a thread that finds it held spins briefly before it sleeps,
/// since every critical section here is a few instructions; sleeping and being woken cost
/// more than the wait (two threads beginning and ending grants through the loop's queue:
/// 4.6–4.9 million pairs a second with a plain mutex, 5.0–5.4 million with this).
///
/// `Value: Sendable` (as swift-nio's `NIOLockedValueBox`): a value handed out of the lock
/// is used without it, so it must be safe to share. A value that belongs to one thread
/// goes in a `LoopBound` (or a `QueueConfined`) instead.
package final class Locked<Value: Sendable>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var value: Value

    /// Guards `value`.
    package init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        var mutexAttributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&mutexAttributes)
        pthread_mutexattr_settype(&mutexAttributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
        pthread_mutex_init(mutex, &mutexAttributes)
        pthread_mutexattr_destroy(&mutexAttributes)
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    /// Runs `body` with the value while holding the lock.
    package func withLock<Result, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }

    /// Runs `body` with the value when the lock is free now; `nil` without waiting when
    /// another thread holds it (for readers that must not block, such as the loop).
    package func withLockIfFree<Result>(_ body: (inout Value) -> Result) -> Result? {
        guard pthread_mutex_trylock(mutex) == 0 else { return nil }
        defer { pthread_mutex_unlock(mutex) }
        return body(&value)
    }

    /// Waits, with the lock released meanwhile, until `ready` holds for the value (or
    /// `timeout` seconds pass, monotonic), then runs `body` with the value and whether it
    /// was ready, all under the lock. ``broadcast()`` wakes waiters to check again.
    ///
    /// The wait is here, not inside a ``withLock(_:)`` body: a body holds the value as an
    /// `inout` parameter, which the optimizer may keep in registers across the wait, so a
    /// condition read there would never see other threads' changes (a release build then
    /// waits forever).
    package func withLock<Result, Failure: Error>(
        waitingUntil ready: (inout Value) -> Bool, timeout: Double? = nil,
        _ body: (inout Value, _ ready: Bool) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        var deadline = timespec()
        if let timeout {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            let total = Double(now.tv_sec) + Double(now.tv_nsec) / 1e9 + max(timeout, 0)
            deadline = timespec(tv_sec: Int(total), tv_nsec: Int((total - total.rounded(.down)) * 1e9))
        }
        var isReady = ready(&value)
        while !isReady {
            if timeout == nil {
                pthread_cond_wait(condition, mutex)
            } else if pthread_cond_timedwait(condition, mutex, &deadline) != 0 {
                isReady = ready(&value)
                break
            }
            isReady = ready(&value)
        }
        return try body(&value, isReady)
    }

    /// Wakes every waiter.
    package func broadcast() {
        pthread_cond_broadcast(condition)
    }
}
