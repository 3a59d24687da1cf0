import Foundation

/// How big each scenario runs: the sizes (`full`), the same shapes run shorter
/// (`quick`, a few minutes in all), or every scenario tiny so the code cannot rot (`smoke`).
public enum BenchmarkMode: String, Sendable, CaseIterable {
    case full, quick, smoke

    /// The sizes for this mode.
    public var sizes: Sizes {
        switch self {
        case .full:
            Sizes(
                openGrants: 1_000_000, pairSeconds: 2, crossThreadPairs: 4_000_000, latenessGrants: 100_000,
                latenessSpreadSeconds: 10, memoryGrants: 1_000_000, idleGrants: 10_000, idleSeconds: 10,
                observers: 1_000, transitions: 20_000, spoolLines: 2_000_000, uploadLines: 2_000_000,
                scheduler: .init(
                    singleSubmits: 2_000, batchedSubmits: 200_000, runs: 1_000_000, latencyPending: 100_000,
                    latencyDue: 2_000, idleRequests: 10_000, memoryPending: 1_000_000))
        case .quick:
            Sizes(
                openGrants: 1_000_000, pairSeconds: 0.5, crossThreadPairs: 2_000_000, latenessGrants: 100_000,
                latenessSpreadSeconds: 10, memoryGrants: 1_000_000, idleGrants: 10_000, idleSeconds: 3,
                observers: 1_000, transitions: 5_000, spoolLines: 1_000_000, uploadLines: 1_000_000,
                scheduler: .init(
                    singleSubmits: 1_000, batchedSubmits: 100_000, runs: 100_000, latencyPending: 100_000,
                    latencyDue: 1_000, idleRequests: 10_000, memoryPending: 1_000_000))
        case .smoke:
            Sizes(
                openGrants: 10_000, pairSeconds: 0.02, crossThreadPairs: 20_000, latenessGrants: 1_000,
                latenessSpreadSeconds: 0.2, memoryGrants: 10_000, idleGrants: 1_000, idleSeconds: 0.2,
                observers: 1_000, transitions: 20, spoolLines: 20_000, uploadLines: 20_000,
                scheduler: .init(
                    singleSubmits: 50, batchedSubmits: 1_000, runs: 100, latencyPending: 100, latencyDue: 20,
                    idleRequests: 100, memoryPending: 1_000))
        }
    }
}

/// How long a process that said it is ready is left before it is watched at rest, in
/// microseconds: 3 s, past the start's last work and the watchdog's last look (a quarter of
/// its 10 s timeout) — or what `OVERTIME_BENCH_SETTLE_SECONDS` says, which
/// `Benchmarks/run --smoke` sets short (no figure of a smoke run means anything). The peers'
/// scripts and overtime-fleet-bench read the same variable.
public let settleMicroseconds: useconds_t = {
    let seconds = ProcessInfo.processInfo.environment["OVERTIME_BENCH_SETTLE_SECONDS"].flatMap(Double.init) ?? 3
    return useconds_t(max(0, min(seconds, 60)) * 1_000_000)
}()

/// Scenario sizes (see ``BenchmarkMode``).
public struct Sizes: Sendable {
    /// Grants (or timers, tasks) kept open while begin+end pairs are timed.
    public var openGrants: Int
    /// How long each implementation's begin+end pairs are timed.
    public var pairSeconds: Double
    /// Begin+end pairs made by the two threads off the loop, together.
    public var crossThreadPairs: Int
    /// Grants whose expiration lateness is measured.
    public var latenessGrants: Int
    /// Their deadlines are spread evenly over this many seconds.
    public var latenessSpreadSeconds: Double
    /// Open grants whose resident memory is measured.
    public var memoryGrants: Int
    /// Open grants while the loop should sleep.
    public var idleGrants: Int
    /// How long the loop thread's wake-ups are counted.
    public var idleSeconds: Double
    /// Observers registered for the transition round trip.
    public var observers: Int
    /// Background→foreground round trips timed.
    public var transitions: Int
    /// 200-byte lines appended to the spool.
    public var spoolLines: Int
    /// 200-byte lines uploaded to nginx.
    public var uploadLines: Int
    /// The scheduler's rows.
    public var scheduler: SchedulerSizes

    /// How long a shipped program at rest is watched (wake-ups, bytes written): at least
    /// three of log-uploader's default 30 s upload intervals in full mode, so that a
    /// periodic tick cannot fall between two looks.
    public var programRestSeconds: Double {
        spoolLines >= 2_000_000 ? 95 : idleSeconds
    }

    /// Warm starts (and stops) of each program whose median is reported: 21, as a median of
    /// 7 moved by a few tenths of a millisecond with whatever else the VM ran.
    public var programStarts: Int {
        spoolLines >= 1_000_000 ? 21 : 1
    }

    /// Begin+end pairs of the shorter of the two runs whose instructions are counted (a
    /// smoke run's few: under callgrind, SwiftNIO's debug build takes seconds a hundred).
    public var instructionPairs: Int {
        spoolLines >= 1_000_000 ? 20_000 : 100
    }

    /// The line without a newline fed to `log-uploader` (``HugeLine``): 20 MiB, a smoke run's 1 MiB.
    public var hugeLineBytes: Int {
        spoolLines >= 1_000_000 ? 20 << 20 : 1 << 20
    }

    /// Lines fed to `log-uploader` before its resident memory is read again.
    public var footprintLines: Int {
        spoolLines >= 1_000_000 ? 1_000_000 : 10_000
    }
}

/// Sizes of the scheduler's rows.
public struct SchedulerSizes: Sendable {
    /// Requests submitted one durable transaction each.
    public var singleSubmits: Int
    /// Requests submitted 1,000 to a transaction.
    public var batchedSubmits: Int
    /// One-shot requests due at once, run to completion.
    public var runs: Int
    /// Requests pending (a day away) while lateness is measured.
    public var latencyPending: Int
    /// Requests whose start lateness is measured, due over a few seconds.
    public var latencyDue: Int
    /// Requests due in an hour while the loop's wake-ups are counted.
    public var idleRequests: Int
    /// Requests pending while resident memory is measured.
    public var memoryPending: Int
}

extension BenchmarkMode {
    /// One-shots the fleet rows' peers run at once (fewer than Overtime's: the slowest take
    /// a minute for 5,000).
    public var fleetPeerRuns: Int {
        switch self {
        case .full: 5_000
        case .quick: 2_000
        case .smoke: 100
        }
    }

    /// One-shots due over how many seconds for the peers' claim latency: Overtime's rate (100
    /// a second in full and quick runs) over a shorter spread.
    public var fleetPeerLatency: (due: Int, spread: Double) {
        switch self {
        case .full, .quick: (500, 5)
        case .smoke: (20, 1)
        }
    }
}
