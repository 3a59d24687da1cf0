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
/// handler.
///
/// At shutdown the watchers stop and each signal gets back the disposition it had before
/// the runtime started (libuv itself would leave `SIG_DFL`): a host program that
/// handled SIGHUP before embedding a runtime handles it again afterwards.
final class SignalDriver {
    private let context: DriverContext
    private let actions: [Int32: SignalAction]
    private var watchers: [UnsafeMutablePointer<uv_signal_t>] = []
    private var previous: [(signal: Int32, action: sigaction)] = []

    init(context: DriverContext, handling: SignalHandling) {
        self.context = context
        self.actions = handling.actions
    }

    /// Blocks the signals of `handling` on the calling thread (the one creating the
    /// runtime, and every thread it starts from then on), so that one arriving before the
    /// loop runs waits, pending, for the watchers instead of ending the process; returns
    /// the thread's mask before.
    static func blockUntilWatched(_ handling: SignalHandling) -> sigset_t {
        var handled = SignalHandling.signalSet(handling.actions.keys)
        var previous = sigset_t()
        pthread_sigmask(SIG_BLOCK, &handled, &previous)
        return previous
    }

    /// Starts one watcher per signal. Runs on the thread that is about to run the loop.
    func start() {
        defer {
            // Unblocked once watched (a signal pending since the runtime was made is
            // delivered now, to the watcher). A process may also start with them blocked (a
            // parent that spawned it from a thread that blocks signals, as Dispatch's
            // workers do; the mask is inherited); blocked everywhere, one is never delivered.
            var handled = SignalHandling.signalSet(actions.keys)
            pthread_sigmask(SIG_UNBLOCK, &handled, nil)
        }
        for signal in actions.keys.sorted() {
            var old = sigaction()
            if sigaction(signal, nil, &old) == 0 { previous.append((signal, old)) }
            let handle = context.makeHandle(uv_signal_t.self)
            uv_signal_init(context.loop, handle)
            handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
            let status = uv_signal_start(
                handle,
                { handle, signal in
                    Unmanaged<SignalDriver>.fromOpaque(handle!.pointee.data).takeUnretainedValue().received(signal)
                }, signal)
            if status != 0 {
                context.logger.error(
                    "cannot watch \(signalName(signal)): \(RuntimeError.libuv(call: "uv_signal_start", code: status))")
            }
            watchers.append(handle)
        }
        context.onShutdown { [self] in stop() }
    }

    /// Stops every watcher, then restores the dispositions found at start.
    private func stop() {
        for handle in watchers { uv_signal_stop(handle) }
        watchers = []
        for (signal, action) in previous {
            var action = action
            sigaction(signal, &action, nil)
        }
        previous = []
    }

    private func received(_ signal: Int32) {
        guard let action = actions[signal] else { return }
        context.turn {
            // The action in the message, not as metadata: this line is on the way to exit,
            // and formatting a first metadata dictionary was most of the stop's own work.
            context.logger.info("received \(signalName(signal)): \(action)")
            context.request(action.request, from: signalName(signal))
        }
    }
}
