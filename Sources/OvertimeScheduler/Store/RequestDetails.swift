// The cold part of a stored request, packed in one SQLite column: a calendar repetition's
// expression and drawn delay, the request's tags, its input, and a chain link's
// prerequisites and state.

/// What most requests lack, as SQLite's `details` column keeps it. One column, not six:
/// each start and end of a run rewrites its request's row, and every column costs each
/// rewrite (four more cost a tenth of the runs a second here).
///
/// Byte 0 has bit 0 set with a calendar, bit 1 with a chain section and bit 2 for a request
/// that wakes the system (`plannedAheadOfClock` looks for a calendar as 1 or 5: a chain
/// link is a one-shot);
/// bytes 1–8 the drawn delay in nanoseconds, 9–12 the calendar's length and 13–16 the
/// tags' (all little-endian); with a chain section, 17–20 the input's length. Then the
/// calendar's UTF-8, the tags as the `tags` column writes them (`,a,b,`, which
/// `pendingRequests(tagged:)` looks for) and the input; with a chain section, the
/// prerequisites (a length, then one per line) and the rest ``ChainState/packed``.
struct RequestDetails: Equatable {
    var calendar: String?
    var gridOffsetNanoseconds: Int64 = 0
    var tags = ""
    var input: [UInt8] = []
    var prerequisites = ""
    var chain: [UInt8]?
    var wakesSystem = false

    private static let headerLength = 17
    private static let calendarBit: UInt8 = 1
    private static let chainBit: UInt8 = 2
    private static let wakeBit: UInt8 = 4

    /// The details of `row`.
    init(_ row: RequestColumns) {
        calendar = row.calendar
        gridOffsetNanoseconds = row.gridOffsetNanoseconds
        tags = row.tags
        input = row.input
        prerequisites = row.prerequisites
        chain = row.chain
        wakesSystem = row.wakesSystem
    }

    /// The details a column holds; none for `nil` or bytes that are not details.
    init(packed: [UInt8]?) {
        guard let packed, packed.count >= Self.headerLength,
            packed[0] <= Self.calendarBit | Self.chainBit | Self.wakeBit
        else { return }
        func integer(_ start: Int, _ count: Int) -> UInt64 {
            packed[start..<start + count].reversed().reduce(0) { $0 << 8 | UInt64($1) }
        }
        let hasChain = packed[0] & Self.chainBit != 0
        let header = Self.headerLength + (hasChain ? 4 : 0)
        guard packed.count >= header else { return }
        let calendarLength = Int(integer(9, 4))
        let tagsLength = Int(integer(13, 4))
        let tagsStart = header + calendarLength
        let inputStart = tagsStart + tagsLength
        let inputEnd = hasChain ? inputStart + Int(integer(17, 4)) : packed.count
        guard inputEnd <= packed.count else { return }
        gridOffsetNanoseconds = Int64(bitPattern: integer(1, 8))
        wakesSystem = packed[0] & Self.wakeBit != 0
        if packed[0] & Self.calendarBit != 0 {
            calendar = String(decoding: packed[header..<tagsStart], as: UTF8.self)
        }
        tags = String(decoding: packed[tagsStart..<inputStart], as: UTF8.self)
        input = Array(packed[inputStart..<inputEnd])
        guard hasChain else { return }
        var reader = PackedReader(Array(packed[inputEnd...]))
        guard let prerequisites = reader.string() else { return }
        self.prerequisites = prerequisites
        chain = Array(packed[(inputEnd + 4 + prerequisites.utf8.count)...])
    }

    /// The column's value: `nil` when there is nothing to keep.
    var packed: [UInt8]? {
        let hasChain = !prerequisites.isEmpty || chain != nil
        guard
            calendar != nil || gridOffsetNanoseconds != 0 || !tags.isEmpty || !input.isEmpty || hasChain || wakesSystem
        else { return nil }
        let calendarBytes = Array((calendar ?? "").utf8)
        let tagBytes = Array(tags.utf8)
        var bytes: [UInt8] = [
            (calendar == nil ? 0 : Self.calendarBit) | (hasChain ? Self.chainBit : 0) | (wakesSystem ? Self.wakeBit : 0)
        ]
        bytes.reserveCapacity(Self.headerLength + 4 + calendarBytes.count + tagBytes.count + input.count)
        func append(_ value: UInt64, bytes count: Int) {
            for index in 0..<count { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(index * 8))) }
        }
        append(UInt64(bitPattern: gridOffsetNanoseconds), bytes: 8)
        append(UInt64(calendarBytes.count), bytes: 4)
        append(UInt64(tagBytes.count), bytes: 4)
        if hasChain { append(UInt64(input.count), bytes: 4) }
        bytes += calendarBytes + tagBytes + input
        guard hasChain else { return bytes }
        var writer = PackedWriter()
        writer.string(prerequisites)
        return bytes + writer.bytes + (chain ?? [])
    }
}
