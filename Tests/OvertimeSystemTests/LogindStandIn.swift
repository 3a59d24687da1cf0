import Foundation
import OvertimeSupport
import OvertimeTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A private system bus (`dbus-daemon`) with logind on it as python-dbusmock's logind
/// template plays it, `InhibitDelayMaxUSec` added; read and driven with `busctl`.
final class LogindStandIn: Sendable {
    let folder = TemporaryDirectory("logind")
    let delay: Duration
    private let processes = Locked<[SpawnedProcess]>([])  // logind first, then the bus

    var socket: String { folder.path + "/bus.sock" }
    var address: String { "unix:path=" + socket }

    /// Whether this machine has what it takes: dbus-daemon, busctl, and python-dbusmock
    /// for the system's Python.
    static var available: Bool {
        access("/usr/bin/dbus-daemon", X_OK) == 0 && access("/usr/bin/busctl", X_OK) == 0
            && ((try? SpawnedProcess.run("/usr/bin/python3", ["-c", "import dbusmock"]).status) == 0)
    }

    init(delay: Duration = .seconds(5)) throws {
        self.delay = delay
        try start()
    }

    deinit {
        stop()
        folder.remove()
    }

    /// Starts the bus, then logind on it, and waits until it answers.
    func start() throws {
        let configuration = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>system</type>
              <listen>\(address)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
                <allow own="*"/>
                <allow user="*"/>
              </policy>
            </busconfig>
            """
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
    func stop() {
        for process in processes.withLock({ all in
            defer { all = [] }; return all
        }) {
            process.send(SIGKILL)
            _ = process.waitForExit(timeout: .seconds(10))
        }
    }

    /// The `who` of every lock logind lists.
    func inhibitors() throws -> [String] {
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
    func emit(_ member: String, _ value: Bool) throws {
        try busctl([
            "call", "org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.DBus.Mock", "EmitSignal",
            "sssav", "org.freedesktop.login1.Manager", member, "b", "1", "b", value ? "true" : "false",
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

struct StandInError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
