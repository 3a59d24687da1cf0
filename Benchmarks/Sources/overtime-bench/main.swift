import ArgumentParser
import BenchmarkScenarios
import Foundation

/// The runner behind `Benchmarks/run`: every scenario, for Overtime and each peer, in one
/// run; writes `latest.json` (metric → implementation → number) and `latest.md`.
struct OvertimeBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "overtime-bench", abstract: "Overtime against the timers a user would pick instead.")

    @Option(help: "full, quick or smoke.")
    var mode: String = "full"

    @Option(help: "Where latest.json and latest.md go.")
    var output: String = "results"

    @Option(help: "Base URL of a local nginx that stores PUTs (the upload rows need it).")
    var nginx: String?

    @Option(
        help: ArgumentHelp(
            "Endpoint of a local S3 store with a bucket overtime-bench that takes the keys in AWS_ACCESS_KEY_ID "
                + "and AWS_SECRET_ACCESS_KEY (the S3 upload rows need it)."))
    var s3: String?

    @Option(help: "A folder on disk (not tmpfs) for spools.")
    var scratch: String = "/var/tmp"

    @Option(help: "Only these metrics (comma-separated names).")
    var only: String?

    @Option(help: "Only these implementations (comma-separated names), e.g. for profiling one.")
    var implementations: String?

    @Option(help: "The shipped programs' static release builds (scripts/check-static-binaries makes them).")
    var programs: String = "../.build-static/release"

    @Option(help: "overtime-dashboard's build (Packages/OvertimeDashboard), for the dashboard rows.")
    var dashboard: String?

    @Option(help: "The Python of the peers' environment (APScheduler, huey), for the scheduler rows' peers.")
    var peerPython: String?

    @Option(help: "The peers' scripts (Benchmarks/Peers).")
    var peers: String?

    @Option(help: "The floor program's static release build (Benchmarks/run makes it with scripts/build-static).")
    var floor: String = "Floor/.build-static/release/swift-floor"

    @Option(help: .hidden)
    var childMemory: String?

    @Option(help: .hidden)
    var childIdle: String?

    @Option(help: .hidden)
    var childPairs: String?

    @Option(help: .hidden)
    var open: Int = 0

    @Option(help: .hidden)
    var childLateness: String?

    @Option(help: .hidden)
    var count: Int = 0

    @Option(help: .hidden)
    var spread: Double = 0

    func run() throws {
        if let implementation = childMemory {
            // One row of bytes_per_open_grant, in a process of its own.
            print(try OpenGrantMemory.measure(implementation, count: count))
            return
        }
        if let implementation = childPairs {
            // Pairs for an instruction count taken from outside.
            try GrantPairs.run(implementation, open: open, pairs: count)
            return
        }
        if let implementation = childIdle {
            // Rests with grants open until killed; measured from outside.
            try IdleWakeups.restInChild(implementation, grants: count, scratch: scratch)
        }
        if let implementation = childLateness {
            // One implementation's lateness, in a process of its own: "p50 p99 p99.9 max" in µs,
            // then the machine's steal time over the measurement, in percent.
            let before = CPUTimes.now()
            let samples = try ExpirationLateness.measure(implementation, count: count, spreadSeconds: spread)
            let steal = CPUTimes.now().stealPercent(since: before)
            let figures = [0.5, 0.99, 0.999, 1].map { Double(percentile(samples, $0)) / 1_000 }
            print(figures.map { "\($0)" }.joined(separator: " "), steal)
            return
        }
        guard let mode = BenchmarkMode(rawValue: mode) else {
            throw ValidationError("unknown mode \(self.mode): use full, quick or smoke")
        }
        let selected = only.map { Set($0.split(separator: ",").map(String.init)) }
        if let selected, let unknown = selected.first(where: { name in !MetricSpec.all.contains { $0.name == name } }) {
            throw ValidationError("unknown metric \(unknown)")
        }
        var report = Report(mode: mode)
        var failures = 0
        let sizes = mode.sizes
        let store = try s3.map { endpoint in
            guard let store = UploadThroughput.S3Store(endpoint: endpoint, bucket: "overtime-bench") else {
                throw ValidationError("--s3 needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
            }
            return store
        }
        let scenarios = Scenarios(
            sizes: sizes, nginx: nginx, s3: store, scratch: scratch, programs: programs, floor: floor, mode: mode,
            dashboard: dashboard,
            peers: peerPython.map { SchedulerPeers(python: $0, folder: peers ?? "Peers", scratch: scratch) })
        for spec in MetricSpec.all where selected?.contains(spec.name) ?? true {
            let chosen = implementations.map { Set($0.split(separator: ",").map(String.init)) }
            for (implementation, measure) in scenarios.rows(for: spec.name)
            where chosen?.contains(implementation) ?? true {
                log("\(spec.name) / \(implementation) …")
                do {
                    let value = try measure()
                    report.record(spec.name, implementation, value)
                    log("  \(Report.format(value)) \(spec.unit)")
                } catch {
                    failures += 1
                    report.note("\(spec.name) / \(implementation) not measured: \(error)")
                    log("  not measured: \(error)")
                }
            }
        }
        report.notes += scenarios.notes.value
        try report.write(to: output)
        print(report.markdown())
        if failures > 0 {
            log("\(failures) rows could not be measured (see the notes)")
            throw ExitCode(1)
        }
    }
}

func log(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}

OvertimeBench.main()
