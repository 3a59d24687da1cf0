/// A point on a monotonic time scale, in nanoseconds.
///
/// Every deadline in Overtime is a `MonotonicInstant`: wall-clock jumps never move one.
/// The scale's origin is the clock's own (boot for ``SystemClock``, zero for a virtual clock).
public struct MonotonicInstant: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Nanoseconds since the clock's origin.
    public var nanoseconds: UInt64

    /// Creates an instant `nanoseconds` after the clock's origin.
    public init(nanoseconds: UInt64) {
        self.nanoseconds = nanoseconds
    }

    /// The clock's origin.
    public static let zero = MonotonicInstant(nanoseconds: 0)

    /// Orders instants from earlier to later.
    public static func < (lhs: MonotonicInstant, rhs: MonotonicInstant) -> Bool {
        lhs.nanoseconds < rhs.nanoseconds
    }

    /// The instant `duration` later; saturates instead of overflowing, and treats a
    /// negative duration as zero.
    public static func + (lhs: MonotonicInstant, rhs: Duration) -> MonotonicInstant {
        let (sum, overflow) = lhs.nanoseconds.addingReportingOverflow(rhs.clampedNanoseconds)
        return MonotonicInstant(nanoseconds: overflow ? .max : sum)
    }

    /// The instant `duration` earlier; saturates at the origin.
    public static func - (lhs: MonotonicInstant, rhs: Duration) -> MonotonicInstant {
        let delta = rhs.clampedNanoseconds
        return MonotonicInstant(nanoseconds: lhs.nanoseconds > delta ? lhs.nanoseconds - delta : 0)
    }

    /// The time from `rhs` to `lhs` (negative when `lhs` is earlier).
    public static func - (lhs: MonotonicInstant, rhs: MonotonicInstant) -> Duration {
        if lhs >= rhs {
            return .nanoseconds(Int64(clamping: lhs.nanoseconds - rhs.nanoseconds))
        }
        return .zero - .nanoseconds(Int64(clamping: rhs.nanoseconds - lhs.nanoseconds))
    }

    /// The instant as seconds since the clock's origin, e.g. `12.500000000s`.
    public var description: String {
        let seconds = nanoseconds / 1_000_000_000
        let fraction = String(nanoseconds % 1_000_000_000)
        return "\(seconds).\(String(repeating: "0", count: 9 - fraction.count))\(fraction)s"
    }
}
