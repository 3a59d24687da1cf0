// Giving a burst of input's memory back to the system once the input goes quiet.

#if canImport(Glibc)
    import Glibc
#endif

/// When a reader should hand the allocator's free memory back to the system: after at
/// least ``threshold`` bytes were read since it last did, at the first moment its input is
/// quiet (the next read would wait). A pure part: the reader asks, then acts.
///
/// Why: a read of a full buffer becomes about a thousand line arrays and their encoded
/// batch, a few hundred KiB that are freed a moment later. glibc keeps such memory in the
/// reading thread's arena whenever a chunk still in use sits above it, so an embedded
/// daemon stayed a third of a MiB larger after every burst for good. A trickle of input
/// never reaches the threshold, so a quiet daemon is not woken or slowed by this.
struct BurstMemoryPolicy: Sendable {
    /// Bytes read since the last return that make the next quiet moment return memory.
    let threshold: Int
    /// Bytes read since memory was last returned.
    private(set) var bytesSinceReturn = 0

    init(threshold: Int) {
        self.threshold = max(1, threshold)
    }

    /// Whether enough was read that a quiet moment should return memory (so the reader
    /// looks for one).
    var isDue: Bool { bytesSinceReturn >= threshold }

    /// A read of `count` bytes.
    mutating func read(_ count: Int) {
        if count > 0 { bytesSinceReturn += count }
    }

    /// The input is quiet now: `true` when memory should be returned (and counting starts
    /// again).
    mutating func quiet() -> Bool {
        guard isDue else { return false }
        bytesSinceReturn = 0
        return true
    }
}

/// The allocator's free memory given back to the system: glibc's `malloc_trim(0)`, which
/// also releases free pages inside every thread's arena. Looked up at run time, so a C
/// library without it (musl) makes this do nothing.
enum AllocatorMemory {
    private typealias Trim = @convention(c) (Int) -> Int32

    private static let trim: Trim? = {
        guard let program = dlopen(nil, RTLD_NOW), let symbol = dlsym(program, "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: Trim.self)
    }()

    /// Whether the C library has `malloc_trim` (glibc does).
    static var isAvailable: Bool { trim != nil }

    /// Returns what the allocator holds free to the system.
    static func returnFreeMemory() {
        _ = trim?(0)
    }
}
