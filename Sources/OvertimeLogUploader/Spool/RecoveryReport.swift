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
