import Foundation

/// A system bus of the benchmark's own (`dbus-daemon`) with python-dbusmock's logind on
/// it, for the rows that need logind: started on first use, killed when the runner exits.
public final class PrivateSystemBus: @unchecked Sendable {
    /// Why this machine cannot run one, or `nil`.
    public static var unavailable: String? {
        let fileManager = FileManager.default
        guard fileManager.isExecutableFile(atPath: "/usr/bin/dbus-daemon"),
            fileManager.isExecutableFile(atPath: "/usr/bin/busctl")
        else { return "needs dbus-daemon and busctl (Debian: dbus-daemon, systemd)" }
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        probe.arguments = ["-c", "import dbusmock"]
        probe.standardError = FileHandle.nullDevice
        guard (try? probe.run()) != nil else { return "needs /usr/bin/python3" }
        probe.waitUntilExit()
        return probe.terminationStatus == 0 ? nil : "needs python3-dbusmock (Debian)"
    }

    private static let lock = NSLock()
    nonisolated(unsafe) private static var started: PrivateSystemBus?
    nonisolated(unsafe) private static var failure: (any Error)?

    /// The one bus of this run, started (logind's `InhibitDelayMaxUSec` 5 s) on first use.
    public static func shared() throws -> PrivateSystemBus {
        lock.lock()
        defer { lock.unlock() }
        if let started { return started }
        if let failure { throw failure }  // once per run, not once per row
        let made: PrivateSystemBus
        do {
            if let unavailable { throw BusError(unavailable) }
            made = try PrivateSystemBus()
        } catch {
            failure = error
            throw error
        }
        started = made
        atexit { PrivateSystemBus.started?.stop() }
        return made
    }

    /// `unix:path=…`, for `DBUS_SYSTEM_BUS_ADDRESS`.
    public let address: String
    private let folder: String
    private var processes: [Process] = []

    private init() throws {
        folder = NSTemporaryDirectory() + "overtime-bench-bus-\(getpid())"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let socket = folder + "/bus.sock"
        address = "unix:path=" + socket
        // The tests' bus configuration: scripts/private-system-bus.conf in the repository.
        let template = try String(
            contentsOfFile: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("scripts/private-system-bus.conf").path, encoding: .utf8)
        let configuration = template.replacingOccurrences(of: "@ADDRESS@", with: address)
        try Data(configuration.utf8).write(to: URL(fileURLWithPath: folder + "/bus.conf"))
        let daemon = Process()
        daemon.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        daemon.arguments = ["--config-file=\(folder)/bus.conf", "--nofork", "--nopidfile"]
        try daemon.run()
        processes.append(daemon)
        try waitUntil("the bus") { FileManager.default.fileExists(atPath: socket) }
        let logind = Process()
        logind.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        logind.arguments = ["-m", "dbusmock", "--system", "--template", "logind"]
        logind.environment = ProcessInfo.processInfo.environment.merging(["DBUS_SYSTEM_BUS_ADDRESS": address]) { $1 }
        logind.standardOutput = FileHandle.nullDevice
        logind.standardError = FileHandle.nullDevice
        try logind.run()
        processes.insert(logind, at: 0)
        // Killed below if it does not come up; a half-started bus is not left behind.
        var up = false
        defer { if !up { stop() } }
        try waitUntil("logind") {
            (try? self.busctl(
                [
                    "call", "org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.login1.Manager",
                    "ListInhibitors",
                ])) != nil
        }
        try busctl([
            "call", "org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.DBus.Mock", "AddProperty",
            "ssv", "org.freedesktop.login1.Manager", "InhibitDelayMaxUSec", "t", "5000000",
        ])
        up = true
    }

    /// Emits logind's `PrepareForSleep(starting)`.
    public func prepareForSleep(_ starting: Bool) throws {
        try busctl([
            "call", "org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.DBus.Mock", "EmitSignal",
            "sssav", "org.freedesktop.login1.Manager", "PrepareForSleep", "b", "1", "b", starting ? "true" : "false",
        ])
    }

    func stop() {
        for process in processes where process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        processes = []
        try? FileManager.default.removeItem(atPath: folder)
    }

    @discardableResult
    private func busctl(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/busctl")
        process.arguments = ["--address=\(address)"] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw BusError("busctl \(arguments.joined(separator: " ")) failed")
        }
        return text
    }

    private func waitUntil(_ what: String, _ condition: () -> Bool) throws {
        let deadline = Date().addingTimeInterval(30)
        while !condition() {
            guard Date() < deadline else { throw BusError("\(what) did not come up in 30 s") }
            usleep(20_000)
        }
    }

    struct BusError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
