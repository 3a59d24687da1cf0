/// How a ``Spool`` stores lines.
public struct SpoolConfiguration: Sendable {
    /// When an append is acknowledged.
    public enum Durability: Sendable, Hashable {
        /// After `fdatasync` of the batch it was written in (group commit). The default.
        case syncEachBatch
        /// After `write`: survives a crash of the process, not of the machine.
        case operatingSystemBuffer
    }

    /// What happens when an append would take the spool past ``quotaBytes``.
    public enum QuotaPolicy: Sendable, Hashable {
        /// Delete the oldest sealed, not yet uploaded segment; its lines are counted as
        /// dropped (`overtime_spool_dropped_lines_total`) and logged. The default.
        case dropOldest
        /// Make the writer wait for uploads to free space, up to `timeout`; then the
        /// append fails with ``SpoolError/quotaExceeded(quotaBytes:neededBytes:)``.
        case blockWriter(timeout: Duration)
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
        if case .blockWriter(let timeout) = quotaPolicy, timeout < .zero {
            throw .invalidConfiguration(field: "quotaPolicy", reason: "timeout must not be negative")
        }
    }
}

/// What went wrong in the spool. Nothing acknowledged before the error is lost.
public enum SpoolError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A configuration field is out of range.
    case invalidConfiguration(field: String, reason: String)
    /// A system call failed (`errno` 28 ENOSPC and 27 EFBIG mean the disk or file limit is full).
    case io(operation: String, path: String, errno: Int32)
    /// A line is longer than ``SegmentFormat/maximumLineBytes``.
    case lineTooLong(bytes: Int)
    /// The quota is full and the policy is to block, for longer than its timeout.
    case quotaExceeded(quotaBytes: Int, neededBytes: Int)
    /// A file in the spool is not what it should be.
    case corrupt(path: String, reason: String)
    /// Another process has the spool open (its PID, when it could be read).
    case locked(path: String, holder: Int32?)
    /// A socket path cannot be used: it is another file, or a socket another process answers on.
    case socketUnavailable(path: String, reason: String)

    /// A sentence naming the operation, the path and the cause.
    public var description: String {
        switch self {
        case .invalidConfiguration(let field, let reason): "invalid spool configuration: \(field) \(reason)"
        case .io(let operation, let path, let code):
            "\(operation) \(path): \(String(cString: strerror(code))) (errno \(code))"
        case .lineTooLong(let bytes): "line of \(bytes) bytes is longer than \(SegmentFormat.maximumLineBytes)"
        case .quotaExceeded(let quota, let needed): "spool quota of \(quota) bytes is full (\(needed) more needed)"
        case .corrupt(let path, let reason): "corrupt spool file \(path): \(reason)"
        case .locked(let path, let holder):
            "spool \(path) is in use by another process" + (holder.map { " (PID \($0))" } ?? "")
        case .socketUnavailable(let path, let reason): "cannot listen on \(path): \(reason)"
        }
    }

    /// Whether the disk (or the process's file size limit) is full.
    public var isDiskFull: Bool {
        if case .io(_, _, let code) = self { return code == ENOSPC || code == EFBIG || code == EDQUOT }
        return false
    }
}

/// What opening a spool found and repaired.
public struct RecoveryReport: Sendable, Equatable {
    /// A segment cut back to its last valid record.
    public struct Truncation: Sendable, Equatable {
        /// The segment file.
        public let path: String
        /// Valid records kept.
        public let keptRecords: Int
        /// Bytes dropped after them.
        public let droppedBytes: Int
        /// What was wrong (torn tail, checksum mismatch, …).
        public let problem: String
    }

    /// Segments cut back to their valid prefix.
    public internal(set) var truncations: [Truncation] = []
    /// Files that were not valid segments, moved to the `quarantine` folder.
    public internal(set) var quarantined: [String] = []
    /// Segments already acknowledged (a crash came between checkpoint and delete), deleted.
    public internal(set) var removedAcknowledged = 0
    /// What was wrong with the checkpoint file, if anything.
    public internal(set) var checkpointDamage: String?
    /// Whether the spool started a new stream because no checkpoint proved the numbering
    /// of the one before (segments of the earlier stream are uploaded again, none deleted).
    public internal(set) var startedNewStream = false
    /// Sealed segments queued to be sent again under their own names (an earlier stream's,
    /// or redriven dead letters).
    public internal(set) var resendSegments = 0

    /// Whether nothing needed repair.
    public var isClean: Bool { truncations.isEmpty && quarantined.isEmpty && checkpointDamage == nil }
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif
