// A machine kept busy while a program rests: every core spinning, and other processes of
// the same cgroup opening and closing memory-pressure triggers (daemons restarting).

import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Load beside a program at rest, for the busy case of the idle rows: one spinning
/// process per core, and one that opens a PSI trigger on the `memory.pressure` this
/// process's cgroup v2 has (the root's on a hybrid machine) and closes it again every
/// `churnInterval` seconds, as other daemons of the same cgroup starting and stopping do.
/// The kernel wakes every poller of a cgroup's pressure file when any trigger on it
/// closes; a program that polls that file is woken by each.
public final class BusyMachine {
    private let churnInterval: Double
    private var children: [pid_t] = []

    /// A load with a trigger closed every `churnInterval` seconds.
    public init(churnInterval: Double = 2) {
        self.churnInterval = churnInterval
    }

    /// The cgroup v2 `memory.pressure` of this process, when there is one.
    public static var cgroupPressureFile: String? {
        guard let cgroups = try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8),
            let line = cgroups.split(separator: "\n").first(where: { $0.hasPrefix("0::") })
        else { return nil }
        let path = String(line.dropFirst(3))
        for mount in ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"] {
            let file = mount + (path == "/" ? "" : path) + "/memory.pressure"
            if access(file, W_OK) == 0 { return file }
        }
        return nil
    }

    /// What the load is, for the notes.
    public var description: String {
        "\(sysconf(Int32(_SC_NPROCESSORS_ONLN))) spinning processes, and a PSI trigger on "
            + "\(Self.cgroupPressureFile ?? "(no cgroup v2 memory.pressure)") opened and closed every \(churnInterval) s"
    }

    func start() throws {
        for _ in 0..<max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN))) {
            // Spins while the runner lives: a runner killed midway leaves none behind.
            children.append(try spawn(["/bin/sh", "-c", "while kill -0 $PPID 2>/dev/null; do :; done"]))
        }
        if let file = Self.cgroupPressureFile {
            let churn =
                "while kill -0 $PPID 2>/dev/null; do exec 3<>'\(file)'; printf 'some 150000 2000000\\0' >&3; exec 3>&-; sleep \(churnInterval); done"
            children.append(try spawn(["/bin/bash", "-c", churn]))
        }
    }

    func stop() {
        for child in children {
            kill(child, SIGKILL)
            var status: Int32 = 0
            waitpid(child, &status, 0)
        }
        children = []
    }

    private func spawn(_ command: [String]) throws -> pid_t {
        var child: pid_t = 0
        let argv = command.map { strdup($0) }
        defer { for pointer in argv { free(pointer) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let spawned = posix_spawn(&child, command[0], &actions, nil, argv + [nil], environ)
        guard spawned == 0 else { throw ScenarioError("spawn \(command[0]): \(String(cString: strerror(spawned)))") }
        return child
    }
}
