/// How a ``Spool`` stores lines.
public struct SpoolConfiguration: Sendable {
    /// When an append is acknowledged. A struct over a private enum, so that levels can
    /// be added without breaking code that switches over them.
    public struct Durability: Sendable, Hashable, CustomStringConvertible {
        private enum Kind: Hashable {
            case syncEachBatch, operatingSystemBuffer
        }

        private let kind: Kind

        /// After `fdatasync` of the batch it was written in (group commit). The default.
        public static let syncEachBatch = Durability(kind: .syncEachBatch)
        /// After `write`: survives a crash of the process, not of the machine.
        public static let operatingSystemBuffer = Durability(kind: .operatingSystemBuffer)

        /// The name, as written in code.
        public var description: String {
            kind == .syncEachBatch ? "syncEachBatch" : "operatingSystemBuffer"
        }
    }

    /// What happens when an append would take the spool past ``quotaBytes``. A struct over
    /// a private enum, so that policies can be added without breaking code that switches
    /// over them.
    public struct QuotaPolicy: Sendable, Hashable, CustomStringConvertible {
        private enum Kind: Hashable {
            case dropOldest
            case blockWriter(timeout: Duration)
        }

        private let kind: Kind

        /// Delete the oldest sealed, not yet uploaded segment; its lines are counted as
        /// dropped (`overtime_spool_dropped_lines_total`) and logged. The default.
        public static let dropOldest = QuotaPolicy(kind: .dropOldest)

        /// Make the writer wait for uploads to free space, up to `timeout`; then the
        /// append fails with ``SpoolError/quotaExceeded(quotaBytes:neededBytes:)``.
        public static func blockWriter(timeout: Duration) -> QuotaPolicy {
            QuotaPolicy(kind: .blockWriter(timeout: timeout))
        }

        /// How long a writer waits for room, or `nil` when the oldest segment is dropped.
        public var blockingTimeout: Duration? {
            if case .blockWriter(let timeout) = kind { return timeout }
            return nil
        }

        /// The name, as written in code.
        public var description: String {
            switch kind {
            case .dropOldest: "dropOldest"
            case .blockWriter(let timeout): "blockWriter(timeout: \(timeout))"
            }
        }
    }

    /// Seal the active segment once it holds this many bytes. Default 1 MiB. (The lines of
    /// one group commit stay in one segment, so a segment can exceed this by one batch.)
    public var segmentBytes = 1 << 20
    /// Seal the active segment once it is this old (checked on append and before uploads).
    /// Default 10 s.
    public var segmentAge: Duration = .seconds(10)
    /// The most bytes the spool keeps on disk (sealed and active segments). Default 64 MiB.
    public var quotaBytes = 64 << 20
    /// Default ``QuotaPolicy/dropOldest``.
    public var quotaPolicy = QuotaPolicy.dropOldest
    /// Default ``Durability/syncEachBatch``.
    public var durability = Durability.syncEachBatch

    /// The defaults.
    public init() {}

    func validate() throws(SpoolError) {
        if segmentBytes < 4096 { throw .invalidConfiguration(field: "segmentBytes", reason: "must be at least 4096") }
        if segmentAge <= .zero { throw .invalidConfiguration(field: "segmentAge", reason: "must be positive") }
        if quotaBytes < 2 * segmentBytes {
            throw .invalidConfiguration(field: "quotaBytes", reason: "must be at least twice segmentBytes")
        }
        if let timeout = quotaPolicy.blockingTimeout, timeout < .zero {
            throw .invalidConfiguration(field: "quotaPolicy", reason: "timeout must not be negative")
        }
    }
}
