import CLibUV
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Moves the lifecycle on Unix signals, through libuv's signal watchers.
///
/// libuv turns a signal into a callback on the loop thread (its own handler only writes
/// to a pipe), so the action runs like any other loop work and never inside a signal
/// handler. Closing the watchers at shutdown restores the previous dispositions.
final class SignalDriver {
    private unowned let core: RuntimeCore
    private let actions: [Int32: SignalAction]

    init(core: RuntimeCore, handling: SignalHandling) {
        self.core = core
        self.actions = handling.actions
    }

    /// Starts one watcher per signal. Runs on the thread that is about to run the loop.
    func start() {
        // A process may start with these signals blocked (a parent that spawned it from a
        // thread that blocks signals, as Dispatch's workers do; the mask is inherited).
        // Blocked everywhere, a signal is never delivered: unblock ours on the loop thread.
        var handled = sigset_t()
        sigemptyset(&handled)
        for signal in actions.keys { sigaddset(&handled, signal) }
        pthread_sigmask(SIG_UNBLOCK, &handled, nil)
        for signal in actions.keys.sorted() {
            let handle = core.loop.makeHandle(uv_signal_t.self)
            uv_signal_init(core.loop.raw, handle)
            handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
            let status = uv_signal_start(
                handle,
                { handle, signal in
                    Unmanaged<SignalDriver>.fromOpaque(handle!.pointee.data).takeUnretainedValue().received(signal)
                }, signal)
            if status != 0 {
                core.logger.error(
                    "cannot watch \(signalName(signal)): \(RuntimeError.libuv(call: "uv_signal_start", code: status))")
            }
        }
    }

    private func received(_ signal: Int32) {
        guard let action = actions[signal] else { return }
        core.turn {
            core.logger.info("received \(signalName(signal))", metadata: ["action": "\(action)"])
            core.perform(action, from: signalName(signal))
        }
    }
}

extension RuntimeCore {
    /// Performs a driver's action on the loop thread, in order with queued requests.
    func perform(_ action: SignalAction, from source: String) {
        switch action {
        case .terminate:
            if lifecycle.isTerminating || lifecycle.state == .terminated {
                if let first = terminationRequestedAt, now - first < configuration.repeatedTerminationGrace {
                    logger.info("\(source) again within \(configuration.repeatedTerminationGrace): the same request")
                    return
                }
                logger.notice("\(source) again while terminating: expiring every background task now")
                forceExpire(nil)
            } else {
                terminationRequestedAt = now
                _ = queue.enqueue(.lifecycle(.termination))
            }
        case .background: _ = queue.enqueue(.lifecycle(.background))
        case .foreground: _ = queue.enqueue(.lifecycle(.foreground))
        case .reload: _ = queue.enqueue(.run { [unowned self] in emitReload() })
        case .expireNow: forceExpire(nil)
        }
    }
}
