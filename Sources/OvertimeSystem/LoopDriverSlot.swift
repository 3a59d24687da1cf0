// One driver of a monitor at a time, made and stopped on the runtime's loop.

import Overtime
import OvertimeSupport

/// Where a monitor keeps its loop-side driver: ``install(_:)`` makes one on the loop (once
/// until ``stop(_:)``), from any thread; ``stop(_:)`` stops it on the loop, from any thread.
/// The runtime's shutdown stops it too.
final class LoopDriverSlot<Driver: AnyObject>: Sendable {
    private let runtime: Runtime
    private let current = Locked<LoopBound<Driver?>?>(nil)

    init(runtime: Runtime) {
        self.runtime = runtime
    }

    /// Makes the driver with `make` and starts it with `start`, on the loop. `false` when
    /// one is installed already; throws when the runtime has shut down.
    @discardableResult
    func install(
        _ make: @escaping @Sendable (DriverContext) -> Driver, start: @escaping @Sendable (Driver) -> Void,
        stop: @escaping @Sendable (Driver) -> Void
    ) -> Bool? {
        let context = runtime.driverContext
        let bound = LoopBound<Driver?>(nil, context: context)
        let claimed = current.withLock { current in
            defer { if current == nil { current = bound } }
            return current == nil
        }
        guard claimed else { return false }
        let body: @Sendable () -> Void = {
            let made = make(context)
            bound.value = made
            context.onShutdown {
                if let driver = bound.value { stop(driver) }
            }
            start(made)
        }
        if runtime.isOnLoopThread {
            body()
            return true
        }
        return context.execute(body) ? true : nil
    }

    /// Stops the installed driver with `body` on the loop. Again is nothing.
    func stop(_ body: @escaping @Sendable (Driver) -> Void) {
        guard
            let bound = current.withLock({ current in
                defer { current = nil }; return current
            })
        else { return }
        if runtime.isOnLoopThread {
            if let driver = bound.value { body(driver) }
        } else {
            _ = runtime.driverContext.execute {
                if let driver = bound.value { body(driver) }
            }
        }
    }
}
