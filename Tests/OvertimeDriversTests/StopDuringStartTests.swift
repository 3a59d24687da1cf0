import Foundation
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
/// The programs block the signals first thing in `main`; what comes before `main` is the
/// dynamic linker's. A debug build, which loads the Swift runtime and Foundation as shared
/// libraries, spends milliseconds there (a SIGTERM in them still kills it); the static
/// builds a fraction of one.
@Suite(
    "A stop at any moment of start-up", .onOwnThread, .serialized, .timeLimit(.minutes(10)),
    .enabled(
        if: shippedPrograms != nil,
        "the shipped static builds are not there (scripts/check-static-binaries makes them)"))
struct StopDuringStartTests {
    /// Every core spinning, for the length of a test.
    final class BusyCores {
        private var spinners: [SpawnedProcess] = []

        init() throws {
            for _ in 0..<max(2, sysconf(Int32(_SC_NPROCESSORS_ONLN))) {
                spinners.append(
                    try SpawnedProcess(
                        "/bin/sh", ["-c", "while :; do :; done"], standardOutput: .discard, standardError: .discard))
            }
        }

        deinit {
            for spinner in spinners {
                spinner.send(SIGKILL)
                _ = spinner.waitForExit(timeout: .seconds(10))
            }
        }
    }

    @Test(arguments: ["tiny-daemon", "log-uploader", "periodic-report"])
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
        let load = try BusyCores()
        var random = SplitMix64(seed: 61)
        var endings: [String: [Int]] = [:]  // how each trial ended → its delays in µs
        for _ in 0..<200 {
            let delay = Int(random.next() % 200_000)
            // Started as a service manager starts a service: no signal blocked, stdin open.
            let child = try SpawnedProcess(
                executable, arguments, standardInput: true, standardOutput: .discard, standardError: .discard,
                blocking: [])
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
        withExtendedLifetime(load) {}
        #expect(
            Set(endings.keys) == ["exit 0"],
            "\(endings.mapValues { "\($0.count) trials, e.g. at \($0.prefix(5).map { "\($0 / 1000) ms" })" })")
    }
}
