import Foundation

/// A real rsyslogd with `imtcp` on a free loopback port, writing each message's
/// structured data and text as one line of `received.log`.
final class RsyslogServer: @unchecked Sendable {
    let folder = TemporaryDirectory("rsyslog")
    let port: Int
    private let process = Process()

    var output: String { folder.path + "/received.log" }

    init() throws {
        port = try freeLoopbackPort()
        let configuration = """
            global(workDirectory="\(folder.path)")
            module(load="imtcp")
            template(name="lines" type="string" string="%STRUCTURED-DATA% %msg%\\n")
            ruleset(name="collect") {
                action(type="omfile" file="\(output)" template="lines" flushOnTXEnd="on" asyncWriting="off")
            }
            input(type="imtcp" port="\(port)" address="127.0.0.1" ruleset="collect")
            """
        try configuration.write(toFile: folder.path + "/rsyslog.conf", atomically: true, encoding: .utf8)
        try launchServer(
            process, "/usr/sbin/rsyslogd",
            ["-n", "-f", folder.path + "/rsyslog.conf", "-i", folder.path + "/rsyslogd.pid"], port: port)
    }

    deinit {
        stopServer(process)
        folder.remove()
    }

    /// The lines written so far.
    func lines() -> [String] {
        ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }
}
