/// Where a program stands in its lifecycle.
public enum LifecycleState: UInt8, Sendable, Hashable, CustomStringConvertible {
    /// In the foreground. The state after start.
    case active
    /// Passing between the foreground and the background.
    case inactive
    /// Left the foreground: the background budget counts down and grants run.
    case background
    /// In the background with no open grant, or with the budget spent: no background
    /// work runs until the next transition.
    case suspended
    /// Final: ``Runtime/run()`` returns.
    case terminated

    /// The state's name, e.g. `background`.
    public var description: String {
        switch self {
        case .active: "active"
        case .inactive: "inactive"
        case .background: "background"
        case .suspended: "suspended"
        case .terminated: "terminated"
        }
    }

    /// Whether the program is in the foreground (`active` or `inactive`).
    var isForeground: Bool { self == .active || self == .inactive }
}

/// What the runtime tells observers, always in the order the design gives for each
/// transition.
public enum LifecycleEvent: Sendable, Hashable, CustomStringConvertible {
    /// The program is about to leave the foreground.
    case willResignActive
    /// The program is in the background; its budget counts down. Begin grants here.
    case didEnterBackground
    /// No grant is open (or the budget is spent): background work stops.
    case didSuspend
    /// The program is about to return to the foreground.
    case willEnterForeground
    /// The program is in the foreground.
    case didBecomeActive
    /// The program will terminate once no grant is open or the budget is spent.
    case willTerminate
    /// Reload configuration (SIGHUP by default). Not a transition: the state is unchanged.
    case reload
    /// The system is short of memory (UIKit's `didReceiveMemoryWarning`): give back what
    /// can be rebuilt — caches, buffers. Not a transition: the state is unchanged. Told by
    /// ``Runtime/requestMemoryWarning()`` (`OvertimeSystem`'s `MemoryPressureMonitor`
    /// calls it on the kernel's pressure stall information); at most one per
    /// ``RuntimeConfiguration/memoryWarningInterval``, a warning inside it delivered once at
    /// its end. After the observers, the runtime returns freed heap to the system.
    case didReceiveMemoryWarning

    /// The event's name, e.g. `didEnterBackground`.
    public var description: String {
        switch self {
        case .willResignActive: "willResignActive"
        case .didEnterBackground: "didEnterBackground"
        case .didSuspend: "didSuspend"
        case .willEnterForeground: "willEnterForeground"
        case .didBecomeActive: "didBecomeActive"
        case .willTerminate: "willTerminate"
        case .reload: "reload"
        case .didReceiveMemoryWarning: "didReceiveMemoryWarning"
        }
    }
}

/// A request to move the lifecycle.
enum LifecycleRequest: Sendable, Hashable {
    case background
    case foreground
    /// The program's own request (``Runtime/requestTermination()``, a service group): a
    /// repeat is the same request.
    case termination
    /// An operator's request (a signal, the control socket): a repeat past the grace
    /// expires every grant now, as a second Ctrl-C does.
    case terminationFromOutside
    /// Work launched while suspended (a scheduled run): back into the background with a
    /// fresh budget for it, as iOS resumes a suspended app for a background refresh.
    case backgroundLaunch
}
