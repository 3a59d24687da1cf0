import CLibUV

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Flushes standard streams and ends the process at once with `status`.
///
/// `_exit` rather than `exit`: another thread (the loop or the main thread) may be
/// running, and `atexit` handlers and static destructors racing it could crash the
/// process with a different status than the one promised.
package func exitProcess(status: Int32) -> Never {
    fflush(nil)
    _exit(status)
}

/// Starts a detached thread named `name` (at most 15 characters) that runs `body`.
package func spawnThread(name: String, _ body: @escaping @Sendable () -> Void) {
    final class Box {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }
    let box = Unmanaged.passRetained(Box(name: name, body: body)).toOpaque()
    var thread = pthread_t()
    let status = pthread_create(
        &thread, nil,
        { argument in
            let box = Unmanaged<Box>.fromOpaque(argument!).takeRetainedValue()
            _ = overtime_set_thread_name(box.name)
            box.body()
            return nil
        }, box)
    if status == 0 {
        pthread_detach(thread)
    } else {
        // Threads are a system resource; without one the work cannot run at all.
        Unmanaged<AnyObject>.fromOpaque(box).release()
        fatalError("Overtime: pthread_create failed with \(status)")
    }
}

/// How many connections a server may hold: `preferred`, or an eighth of the process's
/// descriptor limit when that is lower, so that held connections never take the
/// descriptors the rest of the program (a drain's files and sockets) needs.
package func connectionLimit(preferred: Int) -> Int {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return preferred }
    return max(1, min(preferred, Int(clamping: limit.rlim_cur) / 8))
}
