import Foundation
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A private system bus (`dbus-daemon`) with logind on it as python-dbusmock's logind
/// template plays it (`InhibitDelayMaxUSec` added), and NetworkManager when asked (its
/// template, `Metered` added); read and driven with `busctl`.
package final class SystemBusStandIn: Sendable {
    package let folder = TemporaryDirectory("system-bus")
    package let delay: Duration
    private let processes = Locked<[SpawnedProcess]>([])  // logind first, then the bus
    private let networkManager = Locked<SpawnedProcess?>(nil)

    package var socket: String { folder.path + "/bus.sock" }
    package var address: String { "unix:path=" + socket }

    /// Whether this machine has what it takes: dbus-daemon, busctl, and python-dbusmock
    /// for the system's Python. Found out once: it starts a Python, and suites ask for it
    /// while Swift Testing plans the run, on the threads every test shares.
    package static let available: Bool =
        access("/usr/bin/dbus-daemon", X_OK) == 0 && access("/usr/bin/busctl", X_OK) == 0
        && ((try? SpawnedProcess.run("/usr/bin/python3", ["-c", "import dbusmock"]).status) == 0)

    /// The bus's configuration, shared with the benchmarks' bus.
    static let configurationTemplate =
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scripts/private-system-bus.conf").path

    package init(delay: Duration = .seconds(5)) throws {
        self.delay = delay
        try start()
    }

    deinit {
        stop()
        folder.remove()
    }

    /// Starts the bus, then logind on it, and waits until it answers.
    package func start() throws {
        let template = try String(contentsOfFile: Self.configurationTemplate, encoding: .utf8)
        let configuration = template.replacingOccurrences(of: "@ADDRESS@", with: address)
        try Data(configuration.utf8).write(to: URL(fileURLWithPath: folder.path + "/bus.conf"))
        unlink(socket)
        let daemon = try SpawnedProcess(
            "/usr/bin/dbus-daemon", ["--config-file=\(folder.path)/bus.conf", "--nofork", "--nopidfile"],
            standardOutput: .discard, standardError: .file(folder.path + "/bus.log"))
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SYSTEM_BUS_ADDRESS"] = address
        processes.withLock { $0.append(daemon) }
        try waitUntil("the bus's socket") { access(socket, F_OK) == 0 }
        let mock = try SpawnedProcess(
            "/usr/bin/python3", ["-m", "dbusmock", "--system", "--template", "logind"], environment: environment,
            standardOutput: .file(folder.path + "/logind.log"), standardError: .standardOutput)
        processes.withLock { $0.insert(mock, at: 0) }
        try waitUntil("logind on the bus") { (try? self.inhibitors()) != nil }
        let microseconds = delay.components.seconds * 1_000_000 + delay.components.attoseconds / 1_000_000_000_000
        try busctl([
            "call", "org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.DBus.Mock", "AddProperty",
            "ssv", "org.freedesktop.login1.Manager", "InhibitDelayMaxUSec", "t", "\(microseconds)",
        ])
    }

    /// Kills logind and the bus (as a crash or a restart of dbus would).
    package func stop() {
        stopNetworkManager()
        for process in processes.withLock({ all in
            defer { all = [] }; return all
        }) {
            process.send(SIGKILL)
            _ = process.waitForExit(timeout: .seconds(10))
        }
    }

    /// The `who` of every lock logind lists.
    package func inhibitors() throws -> [String] {
        let output = try busctl([
            "--json=short", "call", "org.freedesktop.login1", "/org/freedesktop/login1",
            "org.freedesktop.login1.Manager", "ListInhibitors",
        ])
        guard
            let object = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any],
            let data = object["data"] as? [[[Any]]], let list = data.first
        else { throw StandInError("ListInhibitors answered \(output)") }
        return list.compactMap { $0.count > 1 ? $0[1] as? String : nil }
    }

    /// Emits one of logind's manager signals with a boolean argument.
    package func emit(_ member: String, _ value: Bool) throws {
        try busctl([
            "call", "org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.DBus.Mock", "EmitSignal",
            "sssav", "org.freedesktop.login1.Manager", member, "b", "1", "b", value ? "true" : "false",
        ])
    }

    // MARK: NetworkManager

    /// Starts NetworkManager (python-dbusmock's template) with `Metered` as given (1 yes,
    /// 2 no, 3 guess-yes, 4 guess-no, 0 unknown).
    package func startNetworkManager(metered: UInt32) throws {
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SYSTEM_BUS_ADDRESS"] = address
        let mock = try SpawnedProcess(
            "/usr/bin/python3", ["-m", "dbusmock", "--system", "--template", "networkmanager"],
            environment: environment, standardOutput: .file(folder.path + "/networkmanager.log"),
            standardError: .standardOutput)
        networkManager.withLock { $0 = mock }
        try waitUntil("NetworkManager on the bus") {
            (try? self.busctl([
                "call", "org.freedesktop.NetworkManager", "/org/freedesktop/NetworkManager",
                "org.freedesktop.DBus.Properties", "Get", "ss", "org.freedesktop.NetworkManager", "State",
            ])) != nil
        }
        try busctl([
            "call", "org.freedesktop.NetworkManager", "/org/freedesktop/NetworkManager", "org.freedesktop.DBus.Mock",
            "AddProperty", "ssv", "org.freedesktop.NetworkManager", "Metered", "u", "\(metered)",
        ])
        // Announced, as NetworkManager has it from its start: whoever read before the
        // property was added reads again.
        try setMetered(metered)
    }

    /// Sets NetworkManager's `Metered` (announced with `PropertiesChanged`).
    package func setMetered(_ metered: UInt32) throws {
        try setProperty(
            "org.freedesktop.NetworkManager", "/org/freedesktop/NetworkManager", "org.freedesktop.NetworkManager",
            "Metered", "u", "\(metered)")
    }

    /// Kills NetworkManager.
    package func stopNetworkManager() {
        guard
            let process = networkManager.withLock({ current in
                defer { current = nil }; return current
            })
        else {
            return
        }
        process.send(SIGKILL)
        _ = process.waitForExit(timeout: .seconds(10))
    }

    // MARK: logind's idle hint and sessions

    /// Sets logind's manager `IdleHint` (announced with `PropertiesChanged`).
    package func setIdleHint(_ idle: Bool) throws {
        try setProperty(
            "org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.login1.Manager", "IdleHint", "b",
            idle ? "true" : "false")
    }

    /// Adds session `id` on seat0, active or not.
    package func addSession(_ id: String, active: Bool) throws {
        try busctl([
            "call", "org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.DBus.Mock", "AddSession",
            "ssusb", id, "seat0", "1000", "kiosk", active ? "true" : "false",
        ])
    }

    /// Calls `Lock` or `Unlock` on session `id` (logind sends the signal of that name).
    package func session(_ id: String, _ method: String) throws {
        try busctl([
            "call", "org.freedesktop.login1", "/org/freedesktop/login1/session/\(id)", "org.freedesktop.login1.Session",
            method,
        ])
    }

    /// Sets session `id`'s `Active` (announced with `PropertiesChanged`).
    package func setSessionActive(_ id: String, _ active: Bool) throws {
        try setProperty(
            "org.freedesktop.login1", "/org/freedesktop/login1/session/\(id)", "org.freedesktop.login1.Session",
            "Active", "b", active ? "true" : "false")
    }

    private func setProperty(
        _ service: String, _ path: String, _ interface: String, _ name: String, _ type: String, _ value: String
    ) throws {
        try busctl([
            "call", service, path, "org.freedesktop.DBus.Properties", "Set", "ssv", interface, name, type, value,
        ])
    }

    @discardableResult
    private func busctl(_ arguments: [String]) throws -> String {
        let (status, output, errors) = try SpawnedProcess.run(
            "/usr/bin/busctl", ["--address=\(address)"] + arguments, timeout: .seconds(20))
        guard status == 0 else { throw StandInError("busctl \(arguments.joined(separator: " ")): \(errors)") }
        return output
    }

    private func waitUntil(_ what: String, _ condition: () -> Bool) throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while !condition() {
            guard ContinuousClock.now < deadline else { throw StandInError("\(what) did not come up in 30 s") }
            usleep(20_000)
        }
    }
}

/// What a stand-in could not do.
package struct StandInError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
