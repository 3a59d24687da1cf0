import Dispatch
import Overtime
import OvertimeTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A runtime embedded in a host program hands the signals it watched back as it found them.
@Suite("Signal dispositions are restored at shutdown", .onOwnThread(runningAtMost: .minutes(3)), .serialized)
struct SignalDispositionTests {
    /// A real-time signal no other test uses, so this in-process test cannot disturb them.
    private let signal: Int32 = 45

    private func disposition() -> UnsafeMutableRawPointer? {
        var current = sigaction()
        sigaction(signal, nil, &current)
        return unsafeBitCast(current.__sigaction_handler.sa_handler, to: UnsafeMutableRawPointer?.self)
    }

    @Test func theHostsDispositionIsBackAfterTheRuntimeTerminates() throws {
        var ignore = sigaction()
        ignore.__sigaction_handler.sa_handler = SIG_IGN
        sigaction(signal, &ignore, nil)
        defer {
            var restore = sigaction()
            restore.__sigaction_handler.sa_handler = SIG_DFL
            sigaction(signal, &restore, nil)
        }
        let before = disposition()

        var configuration = RuntimeConfiguration()
        configuration.signalHandling = SignalHandling(actions: [signal: .reload])
        configuration.watchdogTimeout = nil
        let runtime = try Runtime(configuration: configuration)
        let reloads = Recorder<LifecycleEvent>()
        let token = runtime.observe { if $0 == .reload { reloads.append($0) } }
        runtime.start()
        runtime.waitForQueuedRequests()
        #expect(disposition() != before, "libuv's handler is installed while the runtime runs")
        kill(getpid(), signal)
        for _ in 0..<2000 {
            guard reloads.count == 0 else { break }
            usleep(1000)
        }
        #expect(reloads.count == 1, "the runtime handled the signal")
        runtime.requestTermination()
        runtime.waitUntilTerminated()
        token.cancel()
        #expect(disposition() == before, "the host's SIG_IGN is back, not libuv's SIG_DFL")
        kill(getpid(), signal)  // ignored again: the test process lives on
    }
}
