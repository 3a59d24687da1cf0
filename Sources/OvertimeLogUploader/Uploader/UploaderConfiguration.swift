/// How a ``LogUploader`` uploads.
public struct UploaderConfiguration: Sendable {
    /// The estimate of one upload before any was measured. Default 1 s.
    public var initialUploadEstimate: Duration = .seconds(1)
    /// First retry delay; each retry doubles it, up to ``maximumRetryDelay``, and the
    /// actual delay is drawn uniformly from zero to that (full jitter). Default 0.5 s.
    public var initialRetryDelay: Duration = .milliseconds(500)
    /// The cap on a retry delay the uploader draws. A collector's `Retry-After` is honoured
    /// beyond it; one that ends past the last moment an upload fits before the grant's
    /// expiration point stops the drain at once, the segments kept. Default 30 s.
    public var maximumRetryDelay: Duration = .seconds(30)
    /// How many segments are uploaded at once, for sinks that take more than one
    /// (``LogSink/concurrentStores``: HTTP and S3; the folder, syslog and RELP sinks take
    /// one). A segment is still acknowledged only after every older one, so the checkpoint
    /// never passes a segment the collector does not hold, and after a crash at most this
    /// many are sent again (under the same names). Default 4: uploads travel while the
    /// collector answers earlier ones. Values below 1 count as 1.
    public var maximumUploadsInFlight = 4

    /// The defaults.
    public init() {}
}

/// What a ``LogUploader`` has done so far.
public struct UploaderStatistics: Sendable, Equatable {
    /// Segments the sink stored and the spool acknowledged (the checkpoint durably moved
    /// past them, or, for segments sent again, their files deleted). A segment stored but
    /// not acknowledged (the checkpoint write failed) is not counted: it is sent again.
    public internal(set) var uploadedSegments = 0
    /// Lines in those segments (from this run's spool or an earlier one's).
    public internal(set) var uploadedLines = 0
    /// Segments moved to the dead-letter folder.
    public internal(set) var deadLetteredSegments = 0
    /// Lines in those segments.
    public internal(set) var deadLetteredLines = 0
    /// Upload attempts that failed and were retried or left for later.
    public internal(set) var failedAttempts = 0
    /// Drains stopped because too little time was left to start another upload.
    public internal(set) var stoppedForTime = 0
    /// Drains cut short by expiration (the upload in flight aborted).
    public internal(set) var expiredDrains = 0
    /// The last error a sink reported.
    public internal(set) var lastError: String?
}
