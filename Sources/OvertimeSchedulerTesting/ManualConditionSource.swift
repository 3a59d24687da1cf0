// Conditions a test sets by hand, announced to the scheduler as Linux's would be.

import Overtime
import OvertimeScheduler
import OvertimeSupport

/// A `ConditionSource` (`OvertimeScheduler`) whose conditions a test sets: each change is announced to the
/// scheduler at once, as a netlink event would be.
///
/// ```swift
/// let network = ManualConditionSource(SystemConditions(networkAvailable: false))
/// configuration.conditions = network
/// …
/// network.update { $0.networkAvailable = true }   // runs waiting for the network start
/// ```
public final class ManualConditionSource: ConditionSource {
    private let state: Locked<(conditions: SystemConditions, changed: (@Sendable () -> Void)?)>

    /// A source that reports `initial` until changed (by default, everything holds).
    public init(_ initial: SystemConditions = SystemConditions()) {
        state = Locked((initial, nil))
    }

    /// The conditions reported now; setting them announces the change.
    public var conditions: SystemConditions {
        get { state.withLock { $0.conditions } }
        set { update { $0 = newValue } }
    }

    /// Changes the conditions and announces the change.
    public func update(_ body: (inout SystemConditions) -> Void) {
        let changed = state.withLock { state in
            body(&state.conditions)
            return state.changed
        }
        changed?()
    }

    /// The conditions now.
    public func read() -> SystemConditions {
        state.withLock { $0.conditions }
    }

    /// Remembers whom to tell of changes.
    public func start(runtime: Runtime, changed: @escaping @Sendable () -> Void) {
        state.withLock { $0.changed = changed }
    }

    /// Forgets it.
    public func stop() {
        state.withLock { $0.changed = nil }
    }
}
