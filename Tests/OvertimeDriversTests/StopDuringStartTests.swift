import Foundation
import OvertimeSupport
import OvertimeTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `.build-static/release`, when the shipped programs are built there.
private let shippedPrograms: String? = {
    let folder =
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent(".build-static/release").path
    let all = ["tiny-daemon", "log-uploader", "periodic-report"].allSatisfy { access(folder + "/" + $0, X_OK) == 0 }
    return all ? folder : nil
}()

/// A service manager may stop a service it has just started. The shipped programs — their
/// release builds, the Swift runtime linked statically, as `scripts/check-static-binaries`
/// makes them before the tests — started as a service manager starts them (no signal
/// blocked), are sent SIGTERM at random moments of their first 200 ms while both cores are
/// kept busy: each time the documented stop (exit 0), never the signal's default action.
///
/// The programs block the signals first thing in `main`; before that no program can (the
/// kernel has not run it yet — with both cores busy that took up to 9 ms after exec — or
/// the dynamic linker runs): each trial's 0–200 ms count from the moment the program has
/// SIGTERM in hand: its main thread blocks it (`SigBlk`) or, once the loop runs, a handler
/// catches it (`SigCgt`). Before the fix that moment was the runtime's creation, and threads
/// made earlier took the signal by its default action.
///
/// It keeps both cores spinning, which would slow every suite running beside it past its
/// limits (under ThreadSanitizer three did): `scripts/test` runs it with no other tests beside
/// it, with `OVERTIME_STOP_DURING_START=1`, right after it builds the static programs. The three
/// programs are tried at once, under one load: a trial mostly waits (its delay, the
/// program's stop), and one after the other they kept the cores spinning three times as long.
@Suite(
    "A stop at any moment of start-up", .onOwnThread(runningAtMost: .minutes(10)),
    .enabled(
        if: getenv("OVERTIME_STOP_DURING_START") != nil,
        "runs alone: OVERTIME_STOP_DURING_START=1 swift test --filter StopDuringStartTests (scripts/test does)"),
    .enabled(
        if: shippedPrograms != nil,
        "the shipped static builds are not there (scripts/check-static-binaries makes them)"))
struct StopDuringStartTests {
    /// Every core spinning, while any test of the suite runs (``whileCoresAreBusy(_:)``).
    final class BusyCores: Sendable {
        private let spinners: [SpawnedProcess]

        init() throws {
            var spinners: [SpawnedProcess] = []
            for _ in 0..<max(2, sysconf(Int32(_SC_NPROCESSORS_ONLN))) {
                spinners.append(
                    try SpawnedProcess(
                        // Spins while the test process lives: one killed midway leaves none behind.
                        "/bin/sh", ["-c", "while kill -0 $PPID 2>/dev/null; do :; done"], standardOutput: .discard,
                        standardError: .discard))
            }
            self.spinners = spinners
        }

        deinit {
            for spinner in spinners {
                spinner.send(SIGKILL)
                _ = spinner.waitForExit(timeout: .seconds(10))
            }
        }
    }

    /// The load the tests running at once share: the first to begin starts it, the last to
    /// end stops it.
    private static let load = Locked<(users: Int, cores: BusyCores?)>((0, nil))

    /// `body`, with every core spinning meanwhile.
    static func whileCoresAreBusy<T>(_ body: () throws -> T) throws -> T {
        try load.withLock { load in
            if load.users == 0 { load.cores = try BusyCores() }
            load.users += 1
        }
        defer {
            // Stopped (its spinners killed and waited for) outside the lock.
            let last = load.withLock { load -> BusyCores? in
                load.users -= 1
                return load.users == 0 ? load.cores.take() : nil
            }
            withExtendedLifetime(last) {}
        }
        return try body()
    }

    /// Whether `pid` has SIGTERM in hand now: its main thread blocks it (`SigBlk` of
    /// /proc/PID/status) or a handler of its own catches it (`SigCgt`).
    ///
    /// Not the block alone: the program blocks it only until its loop runs, which then
    /// unblocks it and catches it. With both cores busy, this poll was not scheduled within
    /// that window in about one start of twenty, and the trial waited out its 10 s for a
    /// moment that had passed (the suite took 20–70 s by how often that happened).
    static func holdsSIGTERM(_ pid: pid_t) -> Bool {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return false }
        let bit: UInt64 = 1 << (UInt64(SIGTERM) - 1)
        return status.split(separator: "\n").contains { line in
            guard line.hasPrefix("SigBlk:") || line.hasPrefix("SigCgt:"),
                let mask = UInt64(line.dropFirst(7).trimmingCharacters(in: .whitespaces), radix: 16)
            else { return false }
            return mask & bit != 0
        }
    }

    @Test(.startsProcesses, arguments: ["tiny-daemon", "log-uploader", "periodic-report"])
    func aSIGTERMAtAnyMomentOfStartUpGetsTheDocumentedStop(program: String) throws {
        let folder = TemporaryDirectory("stop-during-start")
        defer { folder.remove() }
        let executable = try #require(shippedPrograms) + "/" + program
        let arguments: [String] =
            switch program {
            case "log-uploader": ["--spool", folder.path + "/spool", "--sink", folder.path + "/collected"]
            case "periodic-report": ["--state-directory", folder.path + "/state"]
            default: []
            }
        var random = SplitMix64(seed: 61)
        var endings: [String: [Int]] = [:]  // how each trial ended → its delays in µs
        // Each trial is a start and a whole stop on busy cores (0.1–0.3 s): 60 of each
        // daemon the outside check stopped, 20 of the third, keep the suite's time.
        try Self.whileCoresAreBusy {
            for _ in 0..<(program == "periodic-report" ? 20 : 60) {
                let delay = Int(random.next() % 200_000)
                // Started as a service manager starts a service: no signal blocked, stdin open.
                let child = try SpawnedProcess(
                    executable, arguments, standardInput: true, standardOutput: .discard, standardError: .discard,
                    blocking: [])
                // From the program's first instruction: until the kernel has run any of it (with
                // both cores busy, milliseconds after exec), no program can block a signal.
                let running = ContinuousClock.now + .seconds(10)
                while !Self.holdsSIGTERM(child.pid), child.isRunning, ContinuousClock.now < running { usleep(100) }
                usleep(useconds_t(delay))
                child.send(SIGTERM)
                let status = child.waitForExit(timeout: .seconds(60))
                let ending =
                    switch status {
                    case nil: "still running after 60 s"
                    case .some(let code) where child.killedBySignal: "killed by signal \(code)"
                    case .some(let code): "exit \(code)"
                    }
                endings[ending, default: []].append(delay)
                if status == nil { child.send(SIGKILL) }
            }
        }
        #expect(
            Set(endings.keys) == ["exit 0"],
            "\(endings.mapValues { "\($0.count) trials, e.g. at \($0.prefix(5).map { "\($0 / 1000) ms" })" })")
    }
}
