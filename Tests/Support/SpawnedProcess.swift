// A child process started with posix_spawn and reaped with waitpid, for the tests.

import CSpawn
import Foundation
import Overtime
import OvertimeSupport

/// A child process the tests start, signal and wait for.
///
/// Not Foundation's `Process`: on Linux it hands every child a socket whose end-of-file
/// announces the exit, on one thread that then blocks in `waitpid`. Children spawned
/// concurrently from other tests can inherit each other's socket, so one exit is not seen
/// until an unrelated child ends, and every wait in the test process stalls behind it.
/// Here the pipes are close-on-exec, everything above standard error is closed in the
/// child, and each wait polls `waitpid(pid, WNOHANG)` for its own child only.
///
/// The child starts with the signals the tests send to daemons blocked, whichever test
/// thread spawns it — as any child of a Dispatch worker thread starts. A daemon's runtime
/// unblocks them on its loop thread, so one sent before it watches them waits instead of
/// killing the process, and the loop thread is the one that takes them (ThreadSanitizer
/// holds back a signal delivered to a thread blocked outside its interceptors).
package final class SpawnedProcess: Sendable {
    /// Where a child's standard output or error goes.
    package enum Destination: Sendable {
        /// `/dev/null`.
        case discard
        /// A pipe the test reads (``outputPipe`` or ``errorPipe``).
        case pipe
        /// Standard error only: the same pipe as standard output.
        case standardOutput
        /// Appended to the file at this path (created if missing), for a server's log.
        case file(String)
    }

    /// The child's process ID.
    package let pid: pid_t
    /// The read end of the child's standard output, when it goes to a pipe.
    package let outputPipe: FileHandle?
    /// The read end of the child's standard error, when it goes to a pipe of its own.
    package let errorPipe: FileHandle?
    /// The write end of the child's standard input, when asked for.
    package let inputPipe: FileHandle?
    /// The status once reaped: the exit status, or the signal that ended it.
    private let reaped = Locked<Int32?>(nil)
    private let endedBySignal = Locked(false)

    /// Reaped, and ended by a signal (its number is what ``waitForExit(timeout:)`` returned).
    package var killedBySignal: Bool { endedBySignal.withLock { $0 } }

    /// Starts `executable` with `arguments`, in a process group of its own, with
    /// `blocking` blocked (``blockedSignals`` unless told; `[]`: as a service manager
    /// starts a service, nothing blocked) and `environment` (the test's own when nil);
    /// `passing` become the child's descriptors 3, 4, … (as a service manager passes sockets).
    package init(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
        standardInput: Bool = false, standardOutput: Destination = .pipe, standardError: Destination = .pipe,
        passing: [Int32] = [], blocking: [Int32] = SpawnedProcess.blockedSignals
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var childEnds: [Int32] = []
        defer { for fd in childEnds { close(fd) } }
        func makePipe() throws -> (read: Int32, write: Int32) {
            var ends: [Int32] = [-1, -1]
            guard cspawn_pipe_cloexec(&ends) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            return (ends[0], ends[1])
        }
        if standardInput {
            let ends = try makePipe()
            childEnds.append(ends.read)
            posix_spawn_file_actions_adddup2(&actions, ends.read, 0)
            inputPipe = FileHandle(fileDescriptor: ends.write, closeOnDealloc: true)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            inputPipe = nil
        }
        var outputWriteEnd: Int32 = -1
        switch standardOutput {
        case .discard, .standardOutput:
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
            outputPipe = nil
        case .file(let path):
            posix_spawn_file_actions_addopen(&actions, 1, path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
            outputPipe = nil
        case .pipe:
            let ends = try makePipe()
            childEnds.append(ends.write)
            outputWriteEnd = ends.write
            posix_spawn_file_actions_adddup2(&actions, ends.write, 1)
            outputPipe = FileHandle(fileDescriptor: ends.read, closeOnDealloc: true)
        }
        switch standardError {
        case .discard:
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
            errorPipe = nil
        case .standardOutput where outputWriteEnd >= 0:
            posix_spawn_file_actions_adddup2(&actions, outputWriteEnd, 2)
            errorPipe = nil
        case .standardOutput:
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
            errorPipe = nil
        case .file(let path):
            posix_spawn_file_actions_addopen(&actions, 2, path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
            errorPipe = nil
        case .pipe:
            let ends = try makePipe()
            childEnds.append(ends.write)
            posix_spawn_file_actions_adddup2(&actions, ends.write, 2)
            errorPipe = FileHandle(fileDescriptor: ends.read, closeOnDealloc: true)
        }
        // Copies above every target first, so that moving one into place never overwrites another.
        let copies = passing.map { fcntl($0, F_DUPFD_CLOEXEC, Int32(3 + passing.count + 64)) }
        defer { for copy in copies where copy >= 0 { close(copy) } }
        for (offset, copy) in copies.enumerated() {
            posix_spawn_file_actions_adddup2(&actions, copy, Int32(3 + offset))
        }
        cspawn_add_close_from(&actions, Int32(3 + passing.count))
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var blocked = sigset_t()
        sigemptyset(&blocked)
        for signal in blocking { sigaddset(&blocked, signal) }
        posix_spawnattr_setsigmask(&attributes, &blocked)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP))
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        let variables = (environment ?? ProcessInfo.processInfo.environment).map { strdup("\($0)=\($1)") } + [nil]
        defer { for variable in variables { free(variable) } }
        var child: pid_t = 0
        let status = posix_spawn(&child, executable, &actions, &attributes, argv, variables)
        guard status == 0 else { throw POSIXError(POSIXErrorCode(rawValue: status) ?? .EIO) }
        pid = child
    }

    /// The signals a child starts with blocked.
    package static let blockedSignals = [SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2]

    deinit {
        if isRunning {
            kill(pid, SIGKILL)
            _ = waitForExit(timeout: .seconds(10))
        }
    }

    /// Whether the child has not exited yet (reaping it if it has).
    package var isRunning: Bool { reap() == nil }

    /// Sends `signal` to the child, unless it has been reaped (its PID may be reused).
    package func send(_ signal: Int32) {
        reaped.withLock { status in
            if status == nil { kill(pid, signal) }
        }
    }

    /// Runs `executable` to its end and collects what it printed (standard error into
    /// `output` too with `mergingErrors`); after `timeout` it is sent SIGTERM.
    package static func run(
        _ executable: String, _ arguments: [String], mergingErrors: Bool = false, timeout: Duration = .seconds(120)
    ) throws -> (status: Int32, output: String, errors: String) {
        let process = try SpawnedProcess(
            executable, arguments, standardError: mergingErrors ? .standardOutput : .pipe)
        // Read while it runs so a full pipe cannot stall it.
        let output = ReadInBackground(process.outputPipe!)
        let errors = process.errorPipe.map(ReadInBackground.init)
        var status = process.waitForExit(timeout: timeout)
        if status == nil {
            process.send(SIGTERM)
            status = process.waitForExit()
        }
        return (status ?? -1, output.text(), errors?.text() ?? "")
    }

    /// Waits for the child to exit and returns its status; nil if it still runs after `timeout`.
    package func waitForExit(timeout: Duration = .seconds(60)) -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let status = reap() { return status }
            if ContinuousClock.now >= deadline { return nil }
            usleep(2000)
        }
    }

    private func reap() -> Int32? {
        reaped.withLock { reaped in
            if let reaped { return reaped }
            var status: Int32 = 0
            var result: pid_t
            repeat { result = waitpid(pid, &status, WNOHANG) } while result < 0 && errno == EINTR
            guard result == pid else { return nil }
            let signal = status & 0x7f
            reaped = signal == 0 ? (status >> 8) & 0xff : signal
            endedBySignal.withLock { $0 = signal != 0 }
            return reaped
        }
    }
}

/// Collects a pipe's bytes until end of file on a thread of its own (not a dispatch
/// queue, whose few threads other tests' blocking reads could hold).
package final class ReadInBackground: Sendable {
    private let data = Locked(Data())
    private let done = DispatchSemaphore(value: 0)

    package init(_ handle: FileHandle) {
        Thread.detachNewThread { [data, done] in
            let all = handle.readDataToEndOfFile()
            data.withLock { $0 = all }
            done.signal()
        }
    }

    /// Everything read, once the pipe's writers have all closed it.
    package func text() -> String {
        done.wait()
        done.signal()
        return String(decoding: data.withLock { $0 }, as: UTF8.self)
    }
}
