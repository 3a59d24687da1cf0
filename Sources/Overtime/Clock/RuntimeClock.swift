#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The source of time for a ``Runtime``.
///
/// The runtime reads `now` for every deadline it computes. A real clock
/// (``SystemClock``) lets the runtime wait for deadlines with one libuv timer; a
/// virtual clock (`OvertimeTesting.ManualClock`) returns a ``VirtualTimeDriver`` and
/// fires the runtime's deadlines itself when the test advances time.
public protocol RuntimeClock: Sendable {
    /// The current instant. Must never go backwards.
    var now: MonotonicInstant { get }

    /// The driver of virtual time, or `nil` for a clock that follows real time.
    var virtualTimeDriver: (any VirtualTimeDriver)? { get }
}

/// Implemented by virtual clocks: the runtime hands over its deadline timer.
///
/// When a runtime is created with a virtual clock it registers a ``VirtualTimer``
/// with the driver. The runtime sets ``VirtualTimer/wakeup`` to its earliest deadline;
/// the driver, when time advances past that instant, calls ``VirtualTimer/fire()``.
public protocol VirtualTimeDriver: AnyObject, Sendable {
    /// Called once, when a runtime using this clock is created.
    func register(_ timer: VirtualTimer)
}

/// The monotonic clock of the operating system (`CLOCK_MONOTONIC`).
public struct SystemClock: RuntimeClock {
    /// Creates the system clock.
    public init() {}

    /// The current instant of `CLOCK_MONOTONIC`.
    public var now: MonotonicInstant { MonotonicInstant(nanoseconds: Self.monotonicNanoseconds()) }

    /// Always `nil`: the system clock follows real time.
    public var virtualTimeDriver: (any VirtualTimeDriver)? { nil }

    /// Reads `CLOCK_MONOTONIC` directly (a vDSO call, no system call on Linux).
    static func monotonicNanoseconds() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) &* 1_000_000_000 &+ UInt64(spec.tv_nsec)
    }
}
