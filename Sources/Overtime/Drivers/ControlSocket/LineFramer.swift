/// Splits a byte stream into newline-terminated lines, refusing lines over a limit.
///
/// Pure, so the framing rules are tested without sockets.
struct LineFramer {
    enum Output: Equatable {
        case line([UInt8])
        /// More than `limit` bytes arrived without a newline; the connection should close.
        case tooLong
    }

    let limit: Int
    private var pending: [UInt8] = []

    init(limit: Int) {
        self.limit = limit
    }

    /// Feeds bytes; returns the complete lines (without their newline) in order.
    mutating func feed<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> [Output] {
        var outputs: [Output] = []
        for byte in bytes {
            if byte == UInt8(ascii: "\n") {
                var line = pending
                if line.last == UInt8(ascii: "\r") { line.removeLast() }
                outputs.append(.line(line))
                pending.removeAll(keepingCapacity: true)
            } else {
                guard pending.count < limit else {
                    outputs.append(.tooLong)
                    pending.removeAll()
                    return outputs
                }
                pending.append(byte)
            }
        }
        return outputs
    }
}
