// Where memory pressure is told: systemd's protocol first, then the process's own cgroup,
// then the whole system's pressure stall information.

import OvertimeSupport

/// Where a ``MemoryPressureMonitor`` hears of memory pressure, and what it writes there
/// first.
///
/// Chosen as systemd's memory pressure protocol says (systemd.io/MEMORY_PRESSURE): the
/// path in `$MEMORY_PRESSURE_WATCH` — a pressure stall information (PSI) file, a FIFO or
/// a Unix stream socket — with `$MEMORY_PRESSURE_WRITE` (base64) written to it right
/// after opening; `/dev/null` there turns watching off. Without the variable: the
/// process's own cgroup v2 `memory.pressure`, else the system's `/proc/pressure/memory`,
/// each with a trigger of ``MemoryPressureMonitor/Configuration/threshold`` stalled per
/// ``MemoryPressureMonitor/Configuration/window``.
///
/// A process at the root of the cgroup v2 hierarchy (every process of a hybrid v1/v2
/// machine) takes `/proc/pressure/memory`: the root's `memory.pressure` tells the same
/// figures, but the kernel wakes every process polling a cgroup's pressure file whenever
/// any trigger on that file is closed (they share the file's wait queue), while each
/// trigger on `/proc/pressure/memory` has its own. Below the root the cgroup's own file is
/// the right one (its limits are the ones that stall); there, another process of the same
/// cgroup closing a trigger of its own wakes the program once, without an event.
public struct MemoryPressureSource: Sendable, Hashable, CustomStringConvertible {
    /// Where the choice came from.
    public struct Origin: Sendable, Hashable, CustomStringConvertible {
        private enum Kind: Hashable { case serviceManager, cgroup, system }
        private let kind: Kind

        /// `$MEMORY_PRESSURE_WATCH`, set by systemd (`MemoryPressureWatch=`) or another manager.
        public static let serviceManager = Origin(kind: .serviceManager)
        /// The process's own cgroup v2 `memory.pressure`.
        public static let cgroup = Origin(kind: .cgroup)
        /// The whole system's `/proc/pressure/memory`.
        public static let system = Origin(kind: .system)

        /// `service manager`, `cgroup` or `system`.
        public var description: String {
            switch kind {
            case .serviceManager: "service manager"
            case .cgroup: "cgroup"
            case .system: "system"
            }
        }
    }

    /// The path watched.
    public let path: String
    /// The bytes written to it right after opening (a PSI trigger, or the manager's data).
    public let written: [UInt8]
    /// Where the choice came from.
    public let origin: Origin

    /// `<path> (<origin>)`.
    public var description: String { "\(path) (\(origin))" }

    /// What the process's environment and file systems say, for ``resolve(_:threshold:window:)``.
    struct Surroundings {
        /// `$MEMORY_PRESSURE_WATCH`.
        var watch: String?
        /// `$MEMORY_PRESSURE_WRITE`.
        var write: String?
        /// The process's own cgroup v2 `memory.pressure`, when it exists.
        var cgroupPressureFile: String?
        /// Whether `/proc/pressure/memory` exists (kernels built with PSI, booted without `psi=0`).
        var systemPressureFileExists: Bool
    }

    /// The source `surroundings` name; `nil` when watching is turned off (`/dev/null`).
    static func resolve(
        _ surroundings: Surroundings, threshold: Duration, window: Duration
    ) throws(MemoryPressureError) -> MemoryPressureSource? {
        if let watch = surroundings.watch {
            if watch == "/dev/null" { return nil }
            guard watch.hasPrefix("/") else {
                throw .invalidEnvironment(
                    variable: "MEMORY_PRESSURE_WATCH", reason: "must be an absolute path or /dev/null, got '\(watch)'")
            }
            var written: [UInt8] = []
            if let write = surroundings.write, !write.isEmpty {
                guard let decoded = Base64.decode(write) else {
                    throw .invalidEnvironment(variable: "MEMORY_PRESSURE_WRITE", reason: "is not base64")
                }
                written = decoded
            }
            return MemoryPressureSource(path: watch, written: written, origin: .serviceManager)
        }
        // NUL-terminated: the kernel turns a trigger's last byte into its terminator.
        let trigger = Array("some \(microseconds(threshold)) \(microseconds(window))".utf8) + [0]
        if let file = surroundings.cgroupPressureFile {
            return MemoryPressureSource(path: file, written: trigger, origin: .cgroup)
        }
        if surroundings.systemPressureFileExists {
            return MemoryPressureSource(path: "/proc/pressure/memory", written: trigger, origin: .system)
        }
        throw .unavailable(
            "no MEMORY_PRESSURE_WATCH, no memory.pressure in the process's cgroup v2 and no /proc/pressure/memory (a kernel without PSI, or booted with psi=0)"
        )
    }

    private static func microseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000
    }
}

/// Why a ``MemoryPressureMonitor`` cannot watch: a ``code`` to act on and a ``reason``
/// to read.
public struct MemoryPressureError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure (an extensible set: switch with a `default`).
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Kind: Hashable { case invalidEnvironment, invalidConfiguration, unavailable, cannotWatch }
        private let kind: Kind

        /// A `MEMORY_PRESSURE_*` variable is malformed.
        public static let invalidEnvironment = Code(kind: .invalidEnvironment)
        /// The configuration is out of range.
        public static let invalidConfiguration = Code(kind: .invalidConfiguration)
        /// Nowhere tells this process of memory pressure (a kernel without PSI, say).
        public static let unavailable = Code(kind: .unavailable)
        /// Opening, connecting to, polling or writing the source failed.
        public static let cannotWatch = Code(kind: .cannotWatch)

        /// The code's name.
        public var description: String {
            switch kind {
            case .invalidEnvironment: "invalidEnvironment"
            case .invalidConfiguration: "invalidConfiguration"
            case .unavailable: "unavailable"
            case .cannotWatch: "cannotWatch"
            }
        }
    }

    /// What kind of failure.
    public let code: Code
    /// What went wrong, in words, naming the variable, field or path.
    public let reason: String
    /// The system call's errno, for ``Code/cannotWatch``.
    public let errno: Int32?

    /// The reason.
    public var description: String { reason }

    static func invalidEnvironment(variable: String, reason: String) -> MemoryPressureError {
        MemoryPressureError(code: .invalidEnvironment, reason: "$\(variable) \(reason)", errno: nil)
    }

    static func invalidConfiguration(field: String, reason: String) -> MemoryPressureError {
        MemoryPressureError(
            code: .invalidConfiguration, reason: "invalid configuration: \(field) \(reason)", errno: nil)
    }

    static func unavailable(_ reason: String) -> MemoryPressureError {
        MemoryPressureError(code: .unavailable, reason: "memory pressure cannot be watched: \(reason)", errno: nil)
    }

    static func cannotWatch(path: String, operation: String, errno code: Int32) -> MemoryPressureError {
        MemoryPressureError(
            code: .cannotWatch,
            reason: "cannot watch \(path) for memory pressure: \(operation): \(errnoDescription(code))", errno: code)
    }
}
