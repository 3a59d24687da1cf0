// The one seam between the runtime's core and every driver.

import CLibUV
import Logging
import OvertimeSupport

/// What a driver — signals, systemd, the control socket, the HTTP sink's libcurl
/// driver, the scheduler — may use of a runtime.
///
/// A driver reads a ``RuntimeSnapshot``, asks for changes with ``request(_:from:)``, owns
/// libuv handles on the loop, runs its callbacks as loop turns, and hears of lifecycle
/// events and of shutdown. It never reaches into the core's parts: what the core decides
/// stays the core's.
///
/// Loop-thread only (checked in debug builds), except ``logger``, ``execute(_:)`` and
/// ``assertOnLoop(file:line:)``.
package final class DriverContext: @unchecked Sendable {  // confined to the loop thread
    // Unowned: the core's hooks and handles reach drivers that hold this, so a strong
    // reference would be a cycle. Only the loop thread reads it, and the loop ends before
    // the core goes.
    private unowned let core: RuntimeCore
    // Held: what any thread may use, since a driver may outlive its runtime (a driver
    // released after the runtime stops its work in its deinit, through `execute(_:)`).
    private let eventLoop: EventLoop
    private let queue: InboundQueue
    private let sharedMetrics: SharedMetrics

    /// The runtime's logger.
    package let logger: Logger

    init(core: RuntimeCore) {
        self.core = core
        eventLoop = core.host.loop
        queue = core.host.queue
        sharedMetrics = core.metrics.shared
        logger = core.logger
    }

    /// Traps in debug builds unless called on the loop thread.
    @inline(__always)
    package func assertOnLoop(file: StaticString = #fileID, line: UInt = #line) {
        assert(eventLoop.isCurrentThread, "a driver used off its runtime's loop thread", file: file, line: line)
    }

    /// Runs `body` on the loop thread after everything queued before it; `false` (and
    /// `body` dropped) once the runtime has shut down. From any thread.
    package func execute(_ body: @escaping @Sendable () -> Void) -> Bool {
        queue.enqueue(.run(body))
    }

    /// Counts a control-socket error of `kind` (`overtime_control_errors_total`).
    package func countControlError(_ kind: String) {
        sharedMetrics.countControlError(kind)
    }

    /// Counts a system-bus signal not acted on: sent by a connection that does not own
    /// `claimedSender`, the bus name it claimed to come from
    /// (`overtime_system_bus_ignored_signals_total`).
    package func countIgnoredSystemBusSignal(claimedSender: String) {
        sharedMetrics.countIgnoredSystemBusSignal(claimedSender)
    }

    // MARK: Reading

    /// The runtime's state now.
    package var snapshot: RuntimeSnapshot {
        core.assertOnLoop()
        return RuntimeSnapshot(
            state: core.lifecycle.state, isTerminating: core.lifecycle.isTerminating,
            openBackgroundTasks: core.engine.grants.openCount, budgetDeadline: core.engine.deadlines.budget?.deadline,
            now: core.now)
    }

    /// The open grants in begin order.
    package func openTasks() -> [BackgroundTaskInfo] {
        core.assertOnLoop()
        return core.openTasks()
    }

    // MARK: Asking

    /// Asks the runtime for `request`, in order with queued requests; `source` names the
    /// driver in logs. `false` when it cannot be done (an ID that is not open).
    @discardableResult
    package func request(_ request: RuntimeRequest, from source: String) -> Bool {
        core.assertOnLoop()
        return core.perform(request, from: source)
    }

    /// Delivers a memory warning now, or coalesces it when one came less than the
    /// runtime's interval ago; says which (for an operator's request).
    package func memoryWarningNow(from source: String) -> String {
        core.assertOnLoop()
        return core.memoryWarning(from: source)
    }

    // MARK: The loop

    /// The libuv loop, for the driver's handles.
    package var loop: UnsafeMutablePointer<uv_loop_t> {
        core.assertOnLoop()
        return core.host.loop.raw
    }

    /// A handle whose memory lives as long as the loop (freed after `uv_loop_close`).
    package func makeHandle<Handle>(_ type: Handle.Type) -> UnsafeMutablePointer<Handle> {
        core.assertOnLoop()
        return core.host.loop.makeHandle(type)
    }

    /// Runs `body`, a libuv callback of the driver, as one loop turn: watchdog stamping,
    /// then queued work, deferred lifecycle decisions and the deadline timer.
    package func turn(_ body: () -> Void) {
        core.assertOnLoop()
        core.turn(body)
    }

    /// Calls `body` with every lifecycle event, before observers see it.
    package func onLifecycleEvent(_ body: @escaping (LifecycleEvent) -> Void) {
        core.assertOnLoop()
        core.hooks.lifecycleEvents.append(body)
    }

    /// Calls `body` whenever the wall clock is set discontinuously (NTP stepping it, an
    /// operator, a resume from suspend; under `ManualClock`, `stepWallClock(by:)`).
    package func onWallClockStep(_ body: @escaping () -> Void) {
        core.assertOnLoop()
        core.hooks.wallClockSteps.append(body)
        guard !core.turnState.wakeup.isVirtual, core.hooks.wallClockWatcher == nil else { return }
        let core = self.core
        core.hooks.wallClockWatcher = WallClockStepWatcher(loop: core.host.loop) { [unowned core] in
            core.turn { core.wallClockStepped() }
        }
        if core.hooks.wallClockWatcher == nil {
            core.logger.error("cannot watch the wall clock for steps: \(errnoDescription())")
        }
    }

    /// Why this process cannot wake the system from suspend (``setWakeAlarm(at:)``), or
    /// `nil` when it can. From any thread.
    package static var wakeAlarmUnavailableReason: String? { WakeAlarm.unavailableReason() }

    /// Wakes the system from suspend at `time` (`nil`: no alarm), as systemd's
    /// `WakeSystem=`: a `CLOCK_REALTIME_ALARM` timer, which needs `CAP_WAKE_ALARM`. Under a
    /// virtual clock the time is only kept (``wakeAlarmTime``). Returns why the kernel
    /// refused, or `nil`.
    package func setWakeAlarm(at time: WallClockInstant?) -> String? {
        core.assertOnLoop()
        guard time != core.hooks.wakeAlarmTime else { return nil }
        guard !core.turnState.wakeup.isVirtual else {
            core.hooks.wakeAlarmTime = time
            return nil
        }
        if core.hooks.wakeAlarm == nil, time != nil {
            let core = self.core
            core.hooks.wakeAlarm = WakeAlarm(loop: core.host.loop) { [unowned core] in
                core.turn { for hook in core.hooks.wakeAlarmFired { hook() } }
            }
            guard core.hooks.wakeAlarm != nil else { return Self.wakeAlarmUnavailableReason ?? errnoDescription() }
        }
        guard core.hooks.wakeAlarm?.arm(at: time) ?? true else {
            return "timerfd_settime(CLOCK_REALTIME_ALARM): \(errnoDescription())"
        }
        core.hooks.wakeAlarmTime = time
        return nil
    }

    /// When the wake alarm is armed for, `nil` when it is not.
    package var wakeAlarmTime: WallClockInstant? {
        core.assertOnLoop()
        return core.hooks.wakeAlarmTime
    }

    /// Calls `body` when the wake alarm fires: the system woke for it, or it came due while
    /// awake.
    package func onWakeAlarm(_ body: @escaping () -> Void) {
        core.assertOnLoop()
        core.hooks.wakeAlarmFired.append(body)
    }

    /// Tells the wall-clock step hooks that wall-clock time moved against the monotonic
    /// clock without the kernel saying so (the system slept: the monotonic clock stood
    /// still), so that plans in wall-clock time are made again.
    package func announceWallClockStep(because reason: String) {
        core.assertOnLoop()
        core.wallClockStepped(because: reason)
    }

    /// Calls `body` with how long the loop was away when a turn begins, or a turn's timers
    /// fall due, at least `threshold` after time was last looked at — the process was
    /// paused (SIGSTOP, a frozen container or VM) between turns or in one, starved, or
    /// simply idle that long — before anything else that could act runs. For checks that
    /// must precede any callback after a pause (a fleet's claims on runs: the effect of a
    /// handler's timer must not outrun them).
    package func onStall(longerThan threshold: Duration, _ body: @escaping (Duration) -> Void) {
        core.assertOnLoop()
        core.hooks.addStall(threshold: threshold, body)
    }

    /// Adds a part to the status line drivers show (systemd's `STATUS=`): `part` is asked
    /// each time the line is made, `nil` leaving it out.
    package func addStatusPart(_ part: @escaping () -> String?) {
        core.assertOnLoop()
        core.hooks.statusParts.append(part)
    }

    /// The parts added with ``addStatusPart(_:)``, as they read now.
    package var statusParts: [String] {
        core.assertOnLoop()
        return core.hooks.statusParts.compactMap { $0() }
    }

    /// Calls `body` when a part of the status line has changed (``statusChanged()``).
    package func onStatusChange(_ body: @escaping () -> Void) {
        core.assertOnLoop()
        core.hooks.statusChanges.append(body)
    }

    /// Tells the drivers showing the status line that a part has changed.
    package func statusChanged() {
        core.assertOnLoop()
        for hook in core.hooks.statusChanges { hook() }
    }

    /// Calls `body` when the runtime shuts down, before every remaining handle is closed.
    package func onShutdown(_ body: @escaping () -> Void) {
        core.assertOnLoop()
        core.hooks.shutdown.append(body)
    }
}

/// The runtime's state as a driver sees it.
package struct RuntimeSnapshot: Sendable, Equatable {
    /// The lifecycle state.
    package var state: LifecycleState
    /// Termination was requested and is under way (or done).
    package var isTerminating: Bool
    /// Grants open now.
    package var openBackgroundTasks: Int
    /// The background budget's deadline, when one runs.
    package var budgetDeadline: MonotonicInstant?
    /// The runtime clock's reading.
    package var now: MonotonicInstant

    /// Time left before the budget's deadline: `nil` in the foreground, zero once
    /// suspended or terminated.
    package var backgroundTimeRemaining: Duration? {
        switch state {
        case .active, .inactive: nil
        case .background: budgetDeadline.map { max($0 - now, .zero) } ?? .zero
        case .suspended, .terminated: .zero
        }
    }
}

/// What a driver may ask of the runtime.
package enum RuntimeRequest: Sendable, Hashable, CustomStringConvertible {
    /// Graceful termination; asked again after ``RuntimeConfiguration/repeatedTerminationGrace``
    /// while terminating, every grant expires now.
    case terminate
    /// Graceful termination with every grant expired at once.
    case terminateNow
    /// ``Runtime/requestBackground()``.
    case background
    /// ``Runtime/requestForeground()``.
    case foreground
    /// ``Runtime/requestReload()``.
    case reload
    /// ``Runtime/requestMemoryWarning()``.
    case memoryWarning
    /// The running background budget ends within this long at the latest (the system is
    /// about to sleep or shut down and waits no longer); nothing when none runs.
    case capBackgroundBudget(Duration)
    /// ``Runtime/expireBackgroundTasks()``.
    case expireAll
    /// ``Runtime/expireBackgroundTask(_:)``.
    case expire(BackgroundTaskID)

    /// The request's name, e.g. `terminate`.
    package var description: String {
        switch self {
        case .terminate: "terminate"
        case .terminateNow: "terminate now"
        case .background: "background"
        case .foreground: "foreground"
        case .reload: "reload"
        case .memoryWarning: "memory warning"
        case .capBackgroundBudget(let length): "background budget at most \(length)"
        case .expireAll: "expire"
        case .expire(let id): "expire \(id)"
        }
    }
}

/// A value only the loop thread may touch, held where `Sendable` is required (swift-nio's
/// `NIOLoopBound`): every access is checked in debug builds.
package final class LoopBound<Value>: @unchecked Sendable {  // confined to the loop thread, checked
    private let context: DriverContext
    private var stored: Value

    /// Wraps `value`; from any thread (only reading and writing it is the loop's).
    package init(_ value: Value, context: DriverContext) {
        self.stored = value
        self.context = context
    }

    /// The value. Loop thread only.
    package var value: Value {
        get {
            context.assertOnLoop()
            return stored
        }
        set {
            context.assertOnLoop()
            stored = newValue
        }
    }
}
