import CLibUV

/// What drivers in this package's other modules (the HTTP sink's libcurl driver) need
/// from the loop. Package-only: users never see libuv.
extension Runtime {
    /// The libuv loop. Use it only on the loop thread.
    package var libuvLoop: UnsafeMutablePointer<uv_loop_t> { loop.raw }

    /// A handle whose memory lives as long as the loop (freed after `uv_loop_close`).
    /// Loop thread only.
    package func makeLoopHandle<Handle>(_ type: Handle.Type) -> UnsafeMutablePointer<Handle> {
        loop.makeHandle(type)
    }

    /// Runs `body`, a libuv callback of a driver, as one loop turn: watchdog stamping,
    /// then queued work and deferred lifecycle decisions. Loop thread only.
    package func loopTurn(_ body: () -> Void) {
        core.turn(body)
    }

    /// Registers `body` to run on the loop thread when the runtime shuts down, before
    /// every remaining handle is closed. Loop thread only.
    package func onLoopShutdown(_ body: @escaping () -> Void) {
        core.onShutdown.append(body)
    }
}
