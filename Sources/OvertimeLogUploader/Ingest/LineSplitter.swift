// Splitting a byte stream into lines in linear time and bounded memory.

/// Splits bytes into lines at `\n`. Each byte is looked at once (linear time, whatever
/// the line lengths); at most ``maximumLineBytes`` of a line are held, so memory stays
/// bounded. A longer line is **truncated** to its first ``maximumLineBytes`` bytes (the
/// head of a log line is the part worth keeping) and counted in ``truncatedLines``; the
/// line after it is intact. Empty lines are skipped unless ``keepsEmptyLines``.
package struct LineSplitter: Sendable {
    /// The longest line kept whole.
    package let maximumLineBytes: Int
    /// Lines cut to ``maximumLineBytes`` so far.
    package private(set) var truncatedLines = 0
    private var partial: [UInt8] = []
    private var skippingRest = false
    /// Whether empty lines are returned (as empty arrays) rather than skipped.
    package let keepsEmptyLines: Bool

    /// A splitter keeping lines up to `maximumLineBytes` (the spool's limit by default).
    package init(maximumLineBytes: Int = SegmentFormat.maximumLineBytes, keepsEmptyLines: Bool = false) {
        self.maximumLineBytes = max(1, maximumLineBytes)
        self.keepsEmptyLines = keepsEmptyLines
    }

    /// The complete lines in `bytes` (with what earlier calls left over).
    package mutating func split(_ bytes: some Collection<UInt8>) -> [[UInt8]] {
        var lines: [[UInt8]] = []
        bytes.withContiguousStorageIfAvailable { buffer in
            var start = 0
            while start < buffer.count {
                let rest = UnsafeBufferPointer(rebasing: buffer[start...])
                let newline = rest.firstIndex(of: UInt8(ascii: "\n"))
                let end = newline.map { start + $0 } ?? buffer.count
                take(UnsafeBufferPointer(rebasing: buffer[start..<end]))
                if newline != nil {
                    if !partial.isEmpty || keepsEmptyLines { lines.append(partial) }
                    partial = []
                    skippingRest = false
                }
                start = end + 1
            }
        } ?? { lines = split(Array(bytes)) }()
        return lines
    }

    /// What is left without a final newline (at the end of input), as a last line.
    package mutating func finish() -> [UInt8]? {
        defer {
            partial = []
            skippingRest = false
        }
        return partial.isEmpty ? nil : partial
    }

    private mutating func take(_ piece: UnsafeBufferPointer<UInt8>) {
        guard !skippingRest else { return }
        let room = maximumLineBytes - partial.count
        if piece.count > room {
            partial += piece.prefix(room)
            truncatedLines += 1
            skippingRest = true
        } else {
            partial += piece
        }
    }
}
