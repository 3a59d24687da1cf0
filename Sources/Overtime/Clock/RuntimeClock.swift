#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The source of time for a ``Runtime`` and everything built on it (the uploader, the
/// spool, the scheduler).
///
/// Two readings: ``now`` on a monotonic scale, for every deadline, timeout and duration
/// (it never jumps); ``wallClockNow``, for what is stored or shown as a date (it may
/// step when NTP or an operator sets the clock). ``SystemClock`` reads the operating
/// system's; `OvertimeTesting.ManualClock` is virtual time that a test moves, and the
/// runtime's timers fire when it does.
public protocol RuntimeClock: Sendable {
    /// The current instant. Must never go backwards.
    var now: MonotonicInstant { get }

    /// The current wall-clock time. May step either way.
    var wallClockNow: WallClockInstant { get }
}

/// The clocks of the operating system: `CLOCK_MONOTONIC` and `CLOCK_REALTIME`.
public struct SystemClock: RuntimeClock {
    /// Creates the system clock.
    public init() {}

    /// The current instant of `CLOCK_MONOTONIC`.
    public var now: MonotonicInstant { MonotonicInstant(nanoseconds: Self.monotonicNanoseconds()) }

    /// The current time of `CLOCK_REALTIME`.
    public var wallClockNow: WallClockInstant {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return WallClockInstant(nanosecondsSinceEpoch: Int64(spec.tv_sec) &* 1_000_000_000 &+ Int64(spec.tv_nsec))
    }

    /// Reads `CLOCK_MONOTONIC` directly (a vDSO call, no system call on Linux).
    static func monotonicNanoseconds() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) &* 1_000_000_000 &+ UInt64(spec.tv_nsec)
    }
}
