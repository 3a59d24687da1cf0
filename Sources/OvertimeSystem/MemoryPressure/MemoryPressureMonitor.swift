// The kernel's memory pressure as the runtime's memory warnings.

import Logging
import Overtime
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Turns memory pressure the kernel reports into `LifecycleEvent.didReceiveMemoryWarning`
/// (UIKit's memory warning), delivered to the runtime's observers on its loop.
///
/// ```swift
/// let monitor = MemoryPressureMonitor(runtime: runtime)
/// try monitor.start()
/// runtime.observe { event in
///     if event == .didReceiveMemoryWarning { cache.removeAll() }
/// }
/// ```
///
/// It watches what ``MemoryPressureSource`` chooses (systemd's `MemoryPressureWatch=`,
/// else the process's cgroup, else the system) with a descriptor on the runtime's loop: no
/// thread, and no wake-up while memory is plentiful. The runtime delivers at most one
/// warning per `RuntimeConfiguration.memoryWarningInterval` and then returns freed heap
/// to the system (`malloc_trim`).
public final class MemoryPressureMonitor: Sendable {
    /// The trigger written to a pressure file the monitor chose itself.
    public struct Configuration: Sendable {
        /// Memory stalls of this long within one ``window`` make a report. Default 200 ms
        /// (systemd's default threshold, 100 ms per second, over a 2 s window).
        public var threshold: Duration = .milliseconds(200)
        /// The window stalls are counted over: 500 ms to 10 s; a multiple of 2 s unless the
        /// process may configure pressure triggers (`CAP_SYS_RESOURCE`). Default 2 s.
        public var window: Duration = .seconds(2)

        /// The defaults.
        public init() {}

        /// Throws ``MemoryPressureError/Code/invalidConfiguration`` for a value
        /// the kernel refuses.
        public func validate() throws(MemoryPressureError) {
            guard window >= .milliseconds(500), window <= .seconds(10) else {
                throw .invalidConfiguration(field: "window", reason: "must be 500 ms to 10 s, got \(window)")
            }
            guard threshold > .zero, threshold <= window else {
                throw .invalidConfiguration(
                    field: "threshold", reason: "must be positive and at most the window (\(window)), got \(threshold)")
            }
        }
    }

    /// The runtime told.
    public let runtime: Runtime
    /// The trigger used when the monitor chooses the source.
    public let configuration: Configuration
    private let logger: Logger
    private let state = Locked(State())

    private struct State: Sendable {
        var source: MemoryPressureSource?
        var watcher: LoopBound<MemoryPressureWatcher?>?
        var reports = 0
        var started = false
    }

    /// A monitor for `runtime`; nothing is watched until ``start()``.
    public init(runtime: Runtime, configuration: Configuration = .init(), logger: Logger? = nil) {
        self.runtime = runtime
        self.configuration = configuration
        self.logger = logger ?? Logger(label: "overtime.memory-pressure")
    }

    /// Chooses the source, opens it, writes its trigger and starts watching on the loop.
    /// Returns the source, or `nil` when the service manager turned watching off
    /// (`MEMORY_PRESSURE_WATCH=/dev/null`). A call while it watches (or is starting, from
    /// another thread) does nothing and returns ``source``; after ``stop()`` it starts
    /// again.
    @discardableResult
    public func start() throws(MemoryPressureError) -> MemoryPressureSource? {
        try start(in: Self.surroundings())
    }

    /// ``start()`` with the environment and file systems given (tests).
    @discardableResult
    func start(in surroundings: MemoryPressureSource.Surroundings) throws(MemoryPressureError)
        -> MemoryPressureSource?
    {
        try configuration.validate()
        // Claimed under the lock: two threads starting at once make one watch.
        let (claimed, current) = state.withLock { state in
            defer { state.started = true }
            return (!state.started, state.source)
        }
        guard claimed else { return current }
        let source: MemoryPressureSource
        let opened: OpenedPressureSource
        do throws(MemoryPressureError) {
            guard
                let resolved = try MemoryPressureSource.resolve(
                    surroundings, threshold: configuration.threshold, window: configuration.window)
            else {
                logger.info("memory pressure watching is turned off (MEMORY_PRESSURE_WATCH=/dev/null)")
                return nil
            }
            source = resolved
            opened = try OpenedPressureSource.opening(source)
        } catch {
            state.withLock { $0.started = false }
            throw error
        }
        let context = runtime.driverContext
        let bound = LoopBound<MemoryPressureWatcher?>(nil, context: context)
        let description = source.description
        // Made on the loop, whose handle it is. `opening(_:)` checked the descriptor polls, so
        // this cannot fail for a reason a caller could act on; it is logged if it does.
        let install: @Sendable () -> Void = { [self, logger] in
            do throws(MemoryPressureError) {
                bound.value = try MemoryPressureWatcher(
                    opened, context: context,
                    onPressure: { [self] in
                        state.withLock { $0.reports += 1 }
                        _ = context.request(.memoryWarning, from: "memory pressure on \(description)")
                    },
                    onEnd: { reason in
                        logger.warning(
                            "memory pressure is no longer watched: \(reason)", metadata: ["source": "\(description)"])
                    })
                context.onShutdown { bound.value?.stop() }
            } catch {
                logger.error("\(error)")
            }
        }
        if runtime.isOnLoopThread {
            install()
        } else if !context.execute(install) {
            opened.closeDescriptors()
            state.withLock { $0.started = false }
            throw .unavailable("the runtime has shut down")
        }
        state.withLock {
            $0.source = source
            $0.watcher = bound
        }
        logger.info("watching memory pressure", metadata: ["source": "\(source)"])
        return source
    }

    /// Stops watching and closes the source. From any thread; again is nothing.
    public func stop() {
        let watcher = state.withLock { state in
            defer {
                state.watcher = nil
                state.source = nil
                state.started = false
            }
            return state.watcher
        }
        guard let watcher else { return }
        let context = runtime.driverContext
        if runtime.isOnLoopThread {
            watcher.value?.stop()
        } else {
            _ = context.execute { watcher.value?.stop() }
        }
    }

    /// The source watched (`nil` before ``start()``, after ``stop()``, or when watching is
    /// turned off).
    public var source: MemoryPressureSource? { state.withLock { $0.source } }

    /// How many times the source reported pressure (before the runtime's rate limit).
    public var reports: Int { state.withLock { $0.reports } }

    /// The process's environment and file systems.
    static func surroundings() -> MemoryPressureSource.Surroundings {
        func environment(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }
        return MemoryPressureSource.Surroundings(
            watch: environment("MEMORY_PRESSURE_WATCH"), write: environment("MEMORY_PRESSURE_WRITE"),
            cgroupPressureFile: ownCgroupPressureFile(),
            systemPressureFileExists: access("/proc/pressure/memory", F_OK) == 0)
    }

    /// `memory.pressure` of the process's cgroup v2, when the unified hierarchy is mounted,
    /// the process is below its root and the file exists (cgroup v1, hybrid systems without
    /// it, and the root itself: `nil`).
    static func ownCgroupPressureFile() -> String? {
        guard case .success(let cgroup) = readWholeFile("/proc/self/cgroup"),
            let file = cgroupPressureFile(
                cgroup: cgroup, mountinfo: { try? readWholeFile("/proc/self/mountinfo").get() })
        else { return nil }
        return access(file, F_OK) == 0 ? file : nil
    }

    /// Where `memory.pressure` of the cgroup v2 that `cgroup` (`/proc/self/cgroup`) names
    /// is, by `mountinfo` (`/proc/self/mountinfo`, read only when needed): `nil` for no
    /// cgroup v2, the hierarchy's root, or no mount of it.
    ///
    /// Bytes, not Strings: split as Strings, the two files cost log-uploader's start 1.5
    /// million of its 22.5 million instructions to `READY=1` (callgrind), as bytes 0.1.
    static func cgroupPressureFile(cgroup: [UInt8], mountinfo: () -> [UInt8]?) -> String? {
        let newline = UInt8(ascii: "\n")
        guard let line = cgroup.split(separator: newline).first(where: { $0.starts(with: "0::".utf8) }) else {
            return nil
        }
        let cgroupPath = line.dropFirst(3)
        // The hierarchy's root (every process on a hybrid machine is there) tells the
        // system's figures, as /proc/pressure/memory does, but its triggers share one wait
        // queue: the kernel wakes every process polling the file whenever any trigger on it
        // is closed. /proc's triggers each have their own.
        guard !cgroupPath.isEmpty, !cgroupPath.elementsEqual("/".utf8), let mounts = mountinfo() else { return nil }
        // mountinfo: ID parent major:minor root mount-point options [optional…] - type source options
        let mountPoint = mounts.split(separator: newline).lazy.compactMap { line -> ArraySlice<UInt8>? in
            let fields = line.split(separator: UInt8(ascii: " "))
            // The separator comes after the six fields every line has.
            guard let dash = fields.firstIndex(where: { $0.elementsEqual("-".utf8) }), dash >= 6,
                dash + 1 < fields.count, fields[dash + 1].elementsEqual("cgroup2".utf8)
            else { return nil }
            return fields[4]
        }.first
        guard let mountPoint else { return nil }
        return (mountPoint.elementsEqual("/".utf8) ? "" : String(decoding: mountPoint, as: UTF8.self))
            + String(decoding: cgroupPath, as: UTF8.self) + "/memory.pressure"
    }
}
