import Foundation
import Overtime
import OvertimeSupport

/// A real rsyslogd on free loopback ports: `imtcp` (plain syslog over TCP) and `imrelp`
/// (RELP), writing each message's structured data and text as one line of `received.log`.
///
/// The ruleset's queue is `Direct` and the file action writes synchronously, so a message
/// is in the file (the page cache) before imrelp acknowledges it: what was acknowledged
/// survives rsyslogd being killed with -9. ``kill()`` and ``restart()`` do that, on the
/// same ports and file.
package final class RsyslogServer: @unchecked Sendable {
    package let folder = TemporaryDirectory("rsyslog")
    package let port: Int
    package let relpPort: Int
    private let process = Locked<SpawnedProcess?>(nil)

    package var output: String { folder.path + "/received.log" }

    package init() throws {
        port = try freeLoopbackPort()
        relpPort = try freeLoopbackPort()
        let configuration = """
            global(workDirectory="\(folder.path)")
            module(load="imtcp")
            module(load="imrelp")
            template(name="lines" type="string" string="%STRUCTURED-DATA% %msg%\\n")
            ruleset(name="collect" queue.type="Direct") {
                action(type="omfile" file="\(output)" template="lines" flushOnTXEnd="on" asyncWriting="off")
            }
            input(type="imtcp" port="\(port)" address="127.0.0.1" ruleset="collect")
            input(type="imrelp" port="\(relpPort)" address="127.0.0.1" ruleset="collect")
            """
        try configuration.write(toFile: folder.path + "/rsyslog.conf", atomically: true, encoding: .utf8)
        try restart()
    }

    deinit {
        kill()
        folder.remove()
    }

    /// Starts rsyslogd (again), waiting until both ports accept connections.
    package func restart() throws {
        // A small descriptor limit: rsyslogd closes every possible descriptor at start, which
        // under the test runner's limit takes seconds.
        let started = try launchServer(
            "/usr/bin/prlimit",
            [
                "--nofile=1024", "/usr/sbin/rsyslogd", "-n", "-f", folder.path + "/rsyslog.conf", "-i",
                folder.path + "/rsyslogd.pid",
            ], port: port)
        for _ in 0..<500 {
            guard !canConnect(port: relpPort) else { break }
            usleep(10_000)
        }
        process.withLock { $0 = started }
    }

    /// kill -9.
    package func kill() {
        if let running = process.withLock({ $0 }) { stopServer(running) }
        unlink(folder.path + "/rsyslogd.pid")
    }

    /// The lines written so far.
    package func lines() -> [String] {
        ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// The `seq` of every line written so far.
    package func sequences() -> [UInt64] {
        lines().compactMap { line in
            guard let start = line.range(of: "seq=\"") else { return nil }
            return UInt64(line[start.upperBound...].prefix { $0.isNumber })
        }
    }
}
