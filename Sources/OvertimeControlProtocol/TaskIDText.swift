// The printed form of a grant's ID (`#r12`, `#3.1`): the runtime prints it in `tasks` and
// its logs, overtimectl reads it back for `expire`.

/// How a grant's raw ID is laid out and printed.
///
/// A grant begun on the loop thread encodes its table slot (the low 32 bits) and the
/// slot's generation (the next 31), so the loop finds it without a hash lookup, and
/// prints as `#<slot>.<generation>`. A grant begun on another thread gets a number from a
/// shared counter with ``queuedBit`` set (its slot is not known yet) and prints as `#r<n>`.
package enum TaskIDText {
    /// Set in the IDs of grants begun off the loop thread.
    package static let queuedBit: UInt64 = 1 << 63

    /// `#invalid`, `#r<n>` or `#<slot>.<generation>`.
    package static func text(rawValue: UInt64) -> String {
        if rawValue == 0 { return "#invalid" }
        if rawValue & queuedBit != 0 { return "#r\(rawValue & ~queuedBit)" }
        return
            "#\(Int32(bitPattern: UInt32(truncatingIfNeeded: rawValue))).\(UInt32(truncatingIfNeeded: rawValue >> 32))"
    }

    /// The raw ID of the printed form (`#r12`, `#3.1`) or of a raw value
    /// (`9223372036854775820`); `nil` for anything else.
    package static func rawValue(parsing text: String) -> UInt64? {
        if let raw = UInt64(text) { return raw }
        guard text.hasPrefix("#") else { return nil }
        let body = text.dropFirst()
        if body.hasPrefix("r"), let number = UInt64(body.dropFirst()), number < queuedBit {
            return queuedBit | number
        }
        if let dot = body.firstIndex(of: "."), let slot = UInt32(body[..<dot]),
            let generation = UInt32(body[body.index(after: dot)...]), generation < 1 << 31
        {
            return UInt64(generation) << 32 | UInt64(slot)
        }
        return nil
    }
}
