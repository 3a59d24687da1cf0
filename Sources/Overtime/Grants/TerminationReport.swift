/// What the runtime reports about a grant it terminated at its deadline.
///
/// Logged at critical level and passed to ``RuntimeConfiguration/onTermination``
/// before the ``TerminationPolicy`` acts.
public struct TerminationReport: Sendable, Hashable, CustomStringConvertible {
    /// The grant's name.
    public let name: String
    /// The grant's ID.
    public let id: BackgroundTaskID
    /// Where the grant was begun.
    public let callSite: CallSite
    /// When it was begun.
    public let begunAt: MonotonicInstant
    /// When it was terminated.
    public let terminatedAt: MonotonicInstant
    /// The lifecycle state at termination.
    public let state: LifecycleState
    /// Whether its expiration handler ran before the deadline.
    public let expirationHandlerRan: Bool
    /// How long its expiration handler ran (zero when it did not).
    public let expirationHandlerDuration: Duration

    /// How long the grant was open.
    public var age: Duration { terminatedAt - begunAt }

    /// One line naming the grant, where it was begun and what its handler did.
    public var description: String {
        let handler =
            expirationHandlerRan
            ? "its expiration handler ran for \(expirationHandlerDuration) and did not end it"
            : "its expiration handler did not run"
        return
            "background task '\(name)' \(id), begun at \(callSite), terminated after \(age) in state \(state): \(handler)"
    }
}

/// An open grant, as ``Runtime/openBackgroundTasks`` lists it.
public struct BackgroundTaskInfo: Sendable, Hashable {
    /// The grant's name.
    public let name: String
    /// The grant's ID.
    public let id: BackgroundTaskID
    /// Where it was begun.
    public let callSite: CallSite
    /// How long it has been open.
    public let age: Duration
    /// Time left before it is terminated; ``Runtime/unlimitedTime`` when no deadline applies.
    public let remaining: Duration
    /// Whether its expiration handler has run.
    public let isExpired: Bool
}
