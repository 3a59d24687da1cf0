import Foundation
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A private system bus (`dbus-daemon`) with logind on it as python-dbusmock's logind
/// template plays it (`InhibitDelayMaxUSec` added), and NetworkManager when asked (its
/// template, `Metered` added); read and driven with `busctl`.
package final class SystemBusStandIn: Sendable {
    /// The rules the bus enforces.
    package enum Policy: Sendable {
        /// Anyone may own any name and send anything (the tests' own configuration).
        case open
        /// The distribution's: `/usr/share/dbus-1/system.conf` as real machines run it, with
        /// its `system.d` files (systemd's logind policy among them), the daemon dropping to
        /// `messagebus`. NetworkManager's policy file is not installed here: its two rules
        /// (root owns the name; anyone reads its properties) are added.
        case distribution
    }

    package let folder = TemporaryDirectory("system-bus")
    package let delay: Duration
    package let policy: Policy
    private let processes = Locked<[SpawnedProcess]>([])  // logind first, then the bus
    private let networkManager = Locked<SpawnedProcess?>(nil)

    /// In a folder two levels down that nothing else writes to (a watch on it sees only the
    /// bus), made when the bus starts: `run/dbus/system_bus_socket`, as on a real machine.
    package var socket: String { folder.path + "/run/dbus/system_bus_socket" }
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

    /// A bus with logind on it, started now, or by ``start()`` with `startNow` false (the
    /// socket's folders do not exist until then).
    package init(delay: Duration = .seconds(5), policy: Policy = .open, startNow: Bool = true) throws {
        self.delay = delay
        self.policy = policy
        // The bus drops to `messagebus`, and unprivileged clients connect: both must reach it.
        chmod(folder.path, 0o755)
        if startNow { try start() }
    }

    deinit {
        stop()
        folder.remove()
    }

    /// Starts the bus, then logind on it, and waits until it answers.
    package func start() throws {
        try startBus()
        try startLogind()
    }

    /// Starts the bus alone, on the socket (removed first: a stale one is replaced).
    package func startBus() throws {
        try writeConfiguration()
        try FileManager.default.createDirectory(
            atPath: folder.path + "/run/dbus", withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o755])
        unlink(socket)
        try startDaemon(["--address=\(address)"])
        try waitUntil("the bus's socket") { access(socket, F_OK) == 0 }
    }

    /// The bus's configuration file: the tests' open one, or one that includes the
    /// distribution's policy unchanged.
    package func writeConfiguration() throws {
        let configuration: String
        switch policy {
        case .open:
            let template = try String(contentsOfFile: Self.configurationTemplate, encoding: .utf8)
            configuration = template.replacingOccurrences(of: "@ADDRESS@", with: address)
        case .distribution:
            configuration = """
                <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
                 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
                <busconfig>
                  <include>/usr/share/dbus-1/system.conf</include>
                  <policy user="root">
                    <allow own="org.freedesktop.NetworkManager"/>
                    <allow send_destination="org.freedesktop.NetworkManager"/>
                  </policy>
                  <policy context="default">
                    <allow send_destination="org.freedesktop.NetworkManager"
                           send_interface="org.freedesktop.DBus.Properties"/>
                  </policy>
                </busconfig>
                """
        }
        try Data(configuration.utf8).write(to: URL(fileURLWithPath: folder.path + "/bus.conf"))
    }

    /// Starts the bus behind a socket that stays, as systemd's `dbus.socket` holds it: the
    /// socket is bound once (`systemd-socket-activate`), and the bus started on it now and
    /// again after each ``restartBusBehindItsSocket()``, as a service restarted.
    package func startSocketActivated() throws {
        try writeConfiguration()
        let run = folder.path + "/run/dbus"
        let activation = folder.path + "/activation"
        for made in [run, activation] {
            try FileManager.default.createDirectory(
                atPath: made, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        }
        _ = FileManager.default.createFile(atPath: activation + "/go", contents: nil)
        // The shell holds the socket (descriptor 3) for good; each bus it starts gets it
        // with LISTEN_PID its own, once `go` says so.
        let script = """
            while :; do
              while [ ! -e "$1/go" ]; do sleep 0.02; done
              rm -f "$1/go"
              (export LISTEN_PID=$BASHPID; exec /usr/bin/dbus-daemon --config-file="$2/bus.conf" --nofork \
                --nopidfile --address=systemd:)
            done
            """
        let holder = try SpawnedProcess(
            "/usr/bin/systemd-socket-activate",
            ["-l", socket, "/bin/bash", "-c", script, "bash", activation, folder.path],
            standardOutput: .discard, standardError: .file(folder.path + "/bus.log"))
        processes.withLock { $0.append(holder) }
        try waitUntil("the bus's socket") { access(socket, F_OK) == 0 }
        try startLogind()
    }

    /// Kills the bus started by ``startSocketActivated()`` and logind with it, leaving the
    /// socket bound; `resume` starts both again.
    package func restartBusBehindItsSocket(resume: () async throws -> Void) async throws {
        let logind = processes.withLock { $0.removeFirst() }
        logind.send(SIGKILL)
        _ = logind.waitForExit(timeout: .seconds(10))
        _ = try SpawnedProcess.run("/usr/bin/pkill", ["-KILL", "-f", "--", "--config-file=\(folder.path)/bus.conf"])
        try await resume()
        _ = FileManager.default.createFile(atPath: folder.path + "/activation/go", contents: nil)
        try startLogind()
    }

    /// Starts `dbus-daemon` on this bus's configuration with `arguments` (where it listens).
    package func startDaemon(_ arguments: [String], environment: [String: String]? = nil) throws {
        let daemon = try SpawnedProcess(
            "/usr/bin/dbus-daemon", ["--config-file=\(folder.path)/bus.conf", "--nofork", "--nopidfile"] + arguments,
            environment: environment, standardOutput: .discard, standardError: .file(folder.path + "/bus.log"))
        processes.withLock { $0.append(daemon) }
    }

    /// Starts logind (python-dbusmock's) on the bus and waits until it answers.
    package func startLogind() throws {
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SYSTEM_BUS_ADDRESS"] = address
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

    // MARK: As an unprivileged local client

    /// Runs `busctl` on this bus as uid and gid 65534 (`nobody`), as any local user could.
    @discardableResult
    package func asUnprivileged(_ arguments: [String]) throws -> (status: Int32, output: String, errors: String) {
        try SpawnedProcess.run(
            "/usr/bin/setpriv",
            ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/busctl", "--address=\(address)"]
                + arguments, timeout: .seconds(20))
    }

    /// Every connection's unique name on the bus (`:1.7`).
    package func uniqueNames() throws -> [String] {
        let output = try busctl([
            "--json=short", "call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
            "ListNames",
        ])
        guard let object = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any],
            let data = object["data"] as? [[String]], let names = data.first
        else { throw StandInError("ListNames answered \(output)") }
        return names.filter { $0.hasPrefix(":") }
    }

    /// The unique name of the connection that owns `name`.
    package func owner(of name: String) throws -> String {
        let output = try busctl([
            "call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner", "s", name,
        ])
        return output.split(separator: "\"").dropFirst().first.map(String.init) ?? ""
    }

    /// The match rules the bus holds for each connection of process `pid` (`Debug.Stats`,
    /// root only).
    package func matchRules(ofProcess pid: pid_t) throws -> [String] {
        let output = try busctl([
            "--json=short", "call", "org.freedesktop.DBus", "/org/freedesktop/DBus",
            "org.freedesktop.DBus.Debug.Stats", "GetAllMatchRules",
        ])
        guard let object = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any],
            let data = object["data"] as? [[String: [String]]], let rules = data.first
        else { throw StandInError("GetAllMatchRules answered \(output)") }
        return rules.filter { name, _ in
            // A connection gone since (busctl's own) has no process.
            let answer = try? busctl([
                "call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                "GetConnectionUnixProcessID", "s", name,
            ])
            return answer?.trimmingCharacters(in: .whitespacesAndNewlines) == "u \(pid)"
        }.flatMap(\.value)
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
        // A bus started behind a held socket is the holder's child, not ours.
        _ = try? SpawnedProcess.run("/usr/bin/pkill", ["-KILL", "-f", "--", "--config-file=\(folder.path)/bus.conf"])
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
    package func busctl(_ arguments: [String]) throws -> String {
        let (status, output, errors) = try SpawnedProcess.run(
            "/usr/bin/busctl", ["--address=\(address)"] + arguments, timeout: .seconds(20))
        guard status == 0 else { throw StandInError("busctl \(arguments.joined(separator: " ")): \(errors)") }
        return output
    }

    package func waitUntil(_ what: String, _ condition: () -> Bool) throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while !condition() {
            guard ContinuousClock.now < deadline else {
                // What the bus and logind said, for the failure's cause.
                let logs = ["bus.log", "logind.log"].map { name in
                    "\(name): " + ((try? String(contentsOfFile: folder.path + "/" + name, encoding: .utf8)) ?? "none")
                }
                throw StandInError("\(what) did not come up in 30 s; \(logs.joined(separator: "; "))")
            }
            usleep(20_000)
        }
    }
}

/// What a stand-in could not do.
package struct StandInError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
