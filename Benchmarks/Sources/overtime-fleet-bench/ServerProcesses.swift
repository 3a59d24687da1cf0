// The processes of one PostgreSQL server, signalled together (SIGSTOP: a hung server).

import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The postmaster named by `<data>/postmaster.pid` and its children.
struct ServerProcesses {
    let data: String

    /// Sends `signal` to the postmaster and every process it started.
    func signal(_ signal: Int32) {
        guard let text = try? String(contentsOfFile: data + "/postmaster.pid", encoding: .utf8),
            let postmaster = text.split(separator: "\n").first.flatMap({ pid_t($0) })
        else { return }
        kill(postmaster, signal)
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = pid_t(entry),
                let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let name = stat.lastIndex(of: ")")
            else { continue }
            // pid (comm) state ppid …: the parent is the second field after the name.
            let fields = stat[stat.index(after: name)...].split(separator: " ")
            if fields.count > 1, pid_t(fields[1]) == postmaster { kill(pid, signal) }
        }
    }
}
