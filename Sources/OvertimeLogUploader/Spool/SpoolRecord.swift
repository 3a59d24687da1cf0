// One spooled line as a sink reads it back (SealedSegment.readRecords()).

/// One spooled line.
public struct SpoolRecord: Sendable, Equatable {
    /// Its number in the stream, from 1, without gaps.
    public let sequence: UInt64
    /// Wall-clock time it was spooled, nanoseconds since 1970 (for people; deadlines never
    /// use it). Its lowest bit marks the last line of an append.
    public let time: UInt64
    /// The line, UTF-8, without a trailing newline.
    public let line: [UInt8]

    /// The line as text.
    public var text: String { String(decoding: line, as: UTF8.self) }
}
