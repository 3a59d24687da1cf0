// Which of an inspector's connections a read goes to: a pure decision, tested as a
// transcript. A slow read (a filter no index answers) holds one connection; the next read
// goes to an idle one, or to a new one while fewer than the most are open.

/// How an inspector spreads its reads over its connections.
@_spi(ScheduleStore) public enum InspectorReaders {
    /// The most connections an inspector reads through.
    public static let most = 4

    /// Which connection a read goes to.
    public enum Choice: Equatable, Sendable {
        /// The open one at this index.
        case use(Int)
        /// A new one.
        case open
    }

    /// The least busy open connection (the first of equals), unless every one is busy and
    /// fewer than `most` are open or opening: then a new one. `busy`: the reads queued or
    /// running on each open connection (at least one is open).
    public static func choose(busy: [Int], opening: Int, closed: Bool, most: Int) -> Choice {
        let least = busy.indices.min { busy[$0] < busy[$1] }!
        guard busy[least] > 0, !closed, busy.count + opening < most else { return .use(least) }
        return .open
    }
}
