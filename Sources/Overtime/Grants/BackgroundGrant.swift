import Logging

/// A grant that can be ended only once: `end()` consumes it, so a second end does not
/// compile. Dropping it without `end()` is reported with its call site, counted as a
/// misuse, and ends the grant.
///
/// ```swift
/// let grant = try runtime.beginGrant(name: "checkpoint")
/// try store.checkpoint()
/// grant.end()
/// ```
public struct BackgroundGrant: ~Copyable, Sendable {
    /// The grant's ID.
    public let id: BackgroundTaskID
    /// Where it was begun.
    public let callSite: CallSite
    // Unmanaged (retained) rather than a strong reference: `discard self` needs
    // trivially destroyed stored properties.
    private let runtime: Unmanaged<Runtime>

    init(id: BackgroundTaskID, callSite: CallSite, runtime: Runtime) {
        self.id = id
        self.callSite = callSite
        self.runtime = .passRetained(runtime)
    }

    /// Ends the grant.
    public consuming func end(fileID: StaticString = #fileID, line: UInt = #line) {
        let runtime = runtime.takeRetainedValue()
        let id = id
        discard self
        runtime.endBackgroundTask(id, fileID: fileID, line: line)
    }

    deinit {
        let runtime = runtime.takeRetainedValue()
        runtime.metrics.countMisuse("dropped_grant")
        runtime.configuration.logger.warning(
            "background task dropped without end(); ending it",
            metadata: ["id": "\(id)", "call_site": "\(callSite)"])
        runtime.endBackgroundTask(id, fileID: callSite.fileID, line: UInt(callSite.line))
    }
}

extension Runtime {
    /// Begins a grant as a ``BackgroundGrant`` (see
    /// ``beginBackgroundTask(name:maximumDuration:fileID:line:expirationHandler:endHandler:)``).
    ///
    /// - Throws: the ``BackgroundTaskRefusal`` when the grant is refused.
    public func beginGrant(
        name: String = "",
        maximumDuration: Duration? = nil,
        fileID: StaticString = #fileID,
        line: UInt = #line,
        expirationHandler: (@Sendable () -> Void)? = nil,
        endHandler: (@Sendable (BackgroundTaskEndReason) -> Void)? = nil
    ) throws(BackgroundTaskRefusal) -> BackgroundGrant {
        let callSite = CallSite(fileID: fileID, line: line)
        let result = begin(
            name: name, maximumDuration: maximumDuration, callSite: callSite,
            expirationHandler: expirationHandler, endHandler: adaptEndHandler(endHandler))
        switch result {
        case .success(let id): return BackgroundGrant(id: id, callSite: callSite, runtime: self)
        case .failure(let refusal): throw refusal
        }
    }
}
