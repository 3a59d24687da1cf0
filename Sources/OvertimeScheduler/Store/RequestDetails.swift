// The cold part of a stored request, packed in one SQLite column: a calendar repetition's
// expression and drawn delay, the request's tags and its input.

/// What most requests lack, as SQLite's `details` column keeps it. One column, not four:
/// each start and end of a run rewrites its request's row, and every column costs each
/// rewrite (four more cost a tenth of the runs a second here).
///
/// Byte 0 is 1 with a calendar and 0 without (what `plannedAheadOfClock` looks for);
/// bytes 1–8 the drawn delay in nanoseconds, 9–12 the calendar's length and 13–16 the
/// tags' (all little-endian); then the calendar's UTF-8, the tags as the `tags` column
/// writes them (`,a,b,`, which `pendingRequests(tagged:)` looks for), and the input.
struct RequestDetails: Equatable {
    var calendar: String?
    var gridOffsetNanoseconds: Int64 = 0
    var tags = ""
    var input: [UInt8] = []

    private static let headerLength = 17

    /// The details of `row`.
    init(_ row: RequestColumns) {
        calendar = row.calendar
        gridOffsetNanoseconds = row.gridOffsetNanoseconds
        tags = row.tags
        input = row.input
    }

    /// The details a column holds; none for `nil` or bytes that are not details.
    init(packed: [UInt8]?) {
        guard let packed, packed.count >= Self.headerLength, packed[0] <= 1 else { return }
        func integer(_ start: Int, _ count: Int) -> UInt64 {
            packed[start..<start + count].reversed().reduce(0) { $0 << 8 | UInt64($1) }
        }
        let calendarLength = Int(integer(9, 4))
        let tagsLength = Int(integer(13, 4))
        let tagsStart = Self.headerLength + calendarLength
        guard tagsStart + tagsLength <= packed.count else { return }
        gridOffsetNanoseconds = Int64(bitPattern: integer(1, 8))
        if packed[0] == 1 { calendar = String(decoding: packed[Self.headerLength..<tagsStart], as: UTF8.self) }
        tags = String(decoding: packed[tagsStart..<tagsStart + tagsLength], as: UTF8.self)
        input = Array(packed[(tagsStart + tagsLength)...])
    }

    /// The column's value: `nil` when there is nothing to keep.
    var packed: [UInt8]? {
        guard calendar != nil || gridOffsetNanoseconds != 0 || !tags.isEmpty || !input.isEmpty else { return nil }
        let calendarBytes = Array((calendar ?? "").utf8)
        let tagBytes = Array(tags.utf8)
        var bytes: [UInt8] = [calendar == nil ? 0 : 1]
        bytes.reserveCapacity(Self.headerLength + calendarBytes.count + tagBytes.count + input.count)
        func append(_ value: UInt64, bytes count: Int) {
            for index in 0..<count { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(index * 8))) }
        }
        append(UInt64(bitPattern: gridOffsetNanoseconds), bytes: 8)
        append(UInt64(calendarBytes.count), bytes: 4)
        append(UInt64(tagBytes.count), bytes: 4)
        return bytes + calendarBytes + tagBytes + input
    }
}
