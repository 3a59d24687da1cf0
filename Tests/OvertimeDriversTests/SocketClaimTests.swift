import Foundation
import Overtime
import OvertimeSupport
import OvertimeTestSupport
import OvertimeTesting
import Synchronization
import Testing

/// Claiming a socket's path is race-free: at most one process (or runtime) holds a path at
/// a time, whatever the interleaving; the socket appears under its name only with its
/// final mode; a socket lost while running is reported; and nothing at the path that is
/// not ours is ever removed.
@Suite("Socket paths: claimed race-free, lost loudly", .blocksBriefly, .timeLimit(.minutes(3)))
struct SocketClaimTests {
    private func makeRuntime(_ path: String, logs: LogCapture = LogCapture()) throws(RuntimeError) -> Runtime {
        var configuration = RuntimeConfiguration()
        configuration.controlSocket = .path(path)
        configuration.signalHandling = nil
        configuration.watchdogTimeout = nil
        configuration.logger = logs.logger
        return try Runtime(configuration: configuration, clock: ManualClock())
    }

    private func answers(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0
            }
        }
    }

    /// A runtime holds its control socket from its creation: a second one for the same
    /// path is refused, naming the holder, even before the first runs; and the socket is
    /// already in place with mode 0600, answering.
    @Test func aSecondRuntimeIsRefusedWhileTheFirstExistsEvenBeforeItRuns() throws {
        let folder = TemporaryDirectory("claim")
        defer { folder.remove() }
        let path = folder.path + "/ctl.sock"
        var first: Runtime? = try makeRuntime(path)
        var info = stat()
        #expect(lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFSOCK)
        #expect(info.st_mode & 0o777 == 0o600)
        #expect(answers(path))
        #expect(!FileManager.default.fileExists(atPath: path + ".new"))
        do {
            _ = try makeRuntime(path)
            Issue.record("a second runtime claimed a path the first holds")
        } catch {
            #expect("\(error)".contains("in use by process \(getpid())"), "\(error)")
        }
        #expect(answers(path), "the first runtime's socket is still the one at the path")
        withExtendedLifetime(first) {}
        first = nil
        #expect(!FileManager.default.fileExists(atPath: path), "removed with its runtime")
        _ = try makeRuntime(path)  // free again
    }

    /// Threads race to claim one path, round after round: exactly one wins each round.
    @Test func racingClaimsLeaveExactlyOneHolder() throws {
        let folder = TemporaryDirectory("claim")
        defer { folder.remove() }
        let path = folder.path + "/ctl.sock"
        for round in 0..<25 {
            let winners = Locked<[Runtime]>([])
            let refusals = Atomic<Int>(0)
            raceOnThreads(4) { _ in
                do {
                    let runtime = try makeRuntime(path)
                    winners.withLock { $0.append(runtime) }
                } catch {
                    refusals.add(1, ordering: .relaxed)
                }
            }
            #expect(winners.withLock { $0.count } == 1, "round \(round)")
            #expect(refusals.load(ordering: .relaxed) == 3)
            #expect(answers(path))
            winners.withLock { $0.removeAll() }
        }
    }

    /// Removing or replacing a running daemon's socket is logged at critical level; at
    /// exit the runtime leaves the file now at the path alone.
    @Test func aSocketLostWhileRunningIsLoudAndWhatReplacedItIsLeftAlone() throws {
        let folder = TemporaryDirectory("claim")
        defer { folder.remove() }
        let path = folder.path + "/ctl.sock"
        let logs = LogCapture()
        let runtime = try makeRuntime(path, logs: logs)
        runtime.start()
        runtime.waitForQueuedRequests()
        #expect(unlink(path) == 0)
        #expect(FileManager.default.createFile(atPath: path, contents: Data("someone else's".utf8)))
        let deadline = ContinuousClock.now + .seconds(10)
        while !logs.messages(at: .critical).contains(where: { $0.message.contains("was removed or replaced") }),
            ContinuousClock.now < deadline
        {
            usleep(10_000)
        }
        #expect(logs.messages(at: .critical).contains { $0.message.contains("\(path) was removed or replaced") })
        runtime.requestTermination()
        runtime.waitUntilTerminated()
        #expect(FileManager.default.contents(atPath: path) == Data("someone else's".utf8))
    }

    /// A stale socket of a runtime that is gone (its lock released) is replaced; a file,
    /// a symbolic link or a lock file that is not Overtime's is refused and left as it was.
    @Test func staleSocketsAreReplacedAndForeignFilesRefused() throws {
        let folder = TemporaryDirectory("claim")
        defer { folder.remove() }
        let path = folder.path + "/ctl.sock"
        // A stale socket: bound, never listening, its process "gone" (no lock held).
        let stale = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(stale, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        close(stale)
        do {
            let runtime = try makeRuntime(path)
            #expect(answers(path))
            withExtendedLifetime(runtime) {}
        }
        for (kind, make) in [
            ("not a socket", { FileManager.default.createFile(atPath: path, contents: Data("data".utf8)) }),
            ("a symbolic link", { symlink(folder.path + "/elsewhere", path) == 0 }),
        ] as [(String, () -> Bool)] {
            #expect(make())
            #expect(throws: RuntimeError.self) { _ = try makeRuntime(path) }
            do { _ = try makeRuntime(path) } catch { #expect("\(error)".contains(kind), "\(error)") }
            unlink(path)
        }
        #expect(FileManager.default.createFile(atPath: path + ".lock", contents: Data("not a lock file\n".utf8)))
        do { _ = try makeRuntime(path) } catch { #expect("\(error)".contains("not an Overtime lock file")) }
        #expect(FileManager.default.contents(atPath: path + ".lock") == Data("not a lock file\n".utf8))
    }
}
