/// Errors thrown by ``Runtime/withBackgroundTask(name:maximumDuration:fileID:line:_:)``.
public enum BackgroundTaskError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The grant was refused.
    case refused(BackgroundTaskRefusal)
    /// The body was still running at the deadline; the grant was terminated.
    case terminated(TerminationReport)

    /// A sentence naming the refusal or the report.
    public var description: String {
        switch self {
        case .refused(let refusal): "background task refused: \(refusal)"
        case .terminated(let report): "background task terminated: \(report)"
        }
    }
}
