// Whole-nanosecond conversions of `Duration`, the one copy every module uses.

extension Duration {
    /// Whole nanoseconds, with negative durations as zero and huge ones as `UInt64.max`.
    package var clampedNanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        if seconds < 0 || (seconds == 0 && attoseconds < 0) { return 0 }
        let (secondsPart, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return .max }
        let (sum, overflow2) = secondsPart.addingReportingOverflow(UInt64(attoseconds / 1_000_000_000))
        return overflow2 ? .max : sum
    }

    /// Seconds as a floating-point number, for logs and metadata.
    package var secondsValue: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
