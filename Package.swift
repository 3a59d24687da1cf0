// swift-tools-version: 6.1
import PackageDescription

// Linux only: the runtime is built on timerfd, prctl, SO_PEERCRED and libuv's Linux
// backend, and the spool on fdatasync and flock. (SwiftPM has no Linux platform to
// declare; no Apple platform is claimed.)
let package = Package(
    name: "Overtime",
    products: [
        .library(name: "Overtime", targets: ["Overtime"]),
        .library(name: "OvertimeTesting", targets: ["OvertimeTesting"]),
        .library(name: "OvertimeServiceLifecycle", targets: ["OvertimeServiceLifecycle"]),
        .library(name: "OvertimeLogUploader", targets: ["OvertimeLogUploader"]),
        .library(name: "OvertimeRELP", targets: ["OvertimeRELP"]),
        .library(name: "OvertimeScheduler", targets: ["OvertimeScheduler"]),
        .library(name: "OvertimeSchedulerTesting", targets: ["OvertimeSchedulerTesting"]),
        .library(name: "OvertimeSchedulerCodable", targets: ["OvertimeSchedulerCodable"]),
        .library(name: "OvertimeSystem", targets: ["OvertimeSystem"]),
        .library(name: "OvertimePrometheus", targets: ["OvertimePrometheus"]),
        .library(name: "OvertimeControl", targets: ["OvertimeControl"]),
        .executable(name: "overtimectl", targets: ["overtimectl"]),
        .executable(name: "tiny-daemon", targets: ["tiny-daemon"]),
        .executable(name: "log-uploader", targets: ["log-uploader"]),
        .executable(name: "periodic-report", targets: ["periodic-report"]),
    ],
    dependencies: [
        // The core keeps its dependency list short on purpose: users embed it.
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        // The tracing API only (with swift-service-context's context): a program bootstraps a tracer.
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        // Only the command-line tools use it; the Overtime library does not.
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // Only the bridge module uses it, so the core stays free of it.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // Only the Prometheus module uses it (with swift-atomics, its one other dependency).
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        // libuv from the system (Debian: libuv1-dev), found through pkg-config.
        .systemLibrary(
            name: "CLibUV",
            pkgConfig: "libuv",
            providers: [.apt(["libuv1-dev"])]
        ),
        // libcurl from the system (Debian: libcurl4-openssl-dev's headers, libcurl4 at run
        // time), for the HTTP sink only: loaded with dlopen when a sink first needs it.
        .target(name: "CLibCurl", dependencies: ["CSharedLibrary"]),
        // SQLite from the system (Debian: libsqlite3-dev), for the scheduler's store only.
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // librelp from the system (Debian: librelp-dev's headers, librelp0 at run time), for
        // the RELP sink only: loaded with dlopen when a session first needs it.
        .target(name: "CLibRelp", dependencies: ["CSharedLibrary"]),
        // libcrypto from the system (OpenSSL 3, which Debian's libcurl4 already loads), for the
        // S3 sink's SHA-256 and HMAC: loaded with dlopen when a sink first signs.
        .target(name: "CLibCrypto", dependencies: ["CSharedLibrary"]),
        // zstd and zlib from the system (Debian: libzstd-dev and zlib1g-dev's headers), for
        // compressed uploads: each loaded with dlopen when a sink first compresses.
        .target(name: "CCompression", dependencies: ["CSharedLibrary"]),
        // sd-bus from the system (libsystemd0 at run time), for logind's sleep and shutdown
        // in OvertimeSystem only: loaded with dlopen when a monitor starts.
        .target(name: "CSystemdBus", dependencies: ["CSharedLibrary"]),
        // dlopen of a system library on first use, for the ones above.
        .target(name: "CSharedLibrary", linkerSettings: [.linkedLibrary("dl")]),
        // The helpers every module shares and no user sees: locks, serial queues, threads,
        // sockets, file locks, whole-file reads, text tables.
        .target(name: "OvertimeSupport", dependencies: ["CLibUV"]),
        // The control socket's protocol (JSON lines), shared by the runtime and overtimectl,
        // so that overtimectl links no runtime.
        .target(name: "OvertimeControlProtocol"),
        // A client of the control socket: overtimectl's, and programs' (a dashboard's actions).
        .target(name: "OvertimeControl", dependencies: ["OvertimeControlProtocol", "OvertimeSupport"]),
        .target(
            name: "Overtime",
            dependencies: [
                "OvertimeSupport",
                "OvertimeControlProtocol",
                "CLibUV",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // CRC-32C with the CPU's crc32 instruction, for spool records.
        .target(name: "CCRC32C"),
        .target(
            name: "OvertimeTesting",
            dependencies: ["Overtime", "OvertimeSupport"]
        ),
        .target(
            name: "OvertimeLogUploader",
            dependencies: [
                "Overtime",
                "OvertimeSupport",
                "CCRC32C",
                "CLibUV",
                "CLibCurl",
                "CLibCrypto",
                "CCompression",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // The RELP sink: its own module, so only programs that send RELP link librelp.
        .target(
            name: "OvertimeRELP",
            dependencies: ["Overtime", "OvertimeSupport", "OvertimeLogUploader", "CLibRelp"]
        ),
        // The scheduler: deferred, periodic and constrained work, durable in SQLite. Its own
        // module, so that programs without it link no SQLite.
        .target(
            name: "OvertimeScheduler",
            dependencies: [
                "Overtime",
                "OvertimeSupport",
                // NetworkManager's and logind's answers for `.unmeteredNetwork` and `.deviceIdle`.
                "OvertimeSystem",
                "CLibUV",
                "CSQLite",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // Codable values as a request's input and a run's output (JSON): its own module, so
        // programs that pass bytes link no Foundation.
        .target(name: "OvertimeSchedulerCodable", dependencies: ["OvertimeScheduler"]),
        // Conditions set by hand and simulated launches and expirations, for tests of
        // programs that use the scheduler.
        .target(
            name: "OvertimeSchedulerTesting",
            dependencies: ["Overtime", "OvertimeSupport", "OvertimeScheduler"]
        ),
        // The operating system driving the lifecycle: memory pressure as memory warnings.
        // Its own module, so programs that do not want it link nothing of it.
        .target(
            name: "OvertimeSystem",
            dependencies: [
                "Overtime",
                "OvertimeSupport",
                "CLibUV",
                "CSystemdBus",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Prometheus' text exposition of the program's metrics, over the control socket and
        // GET /metrics on the runtime's loop. Its own module, so programs that export no
        // metrics link nothing of it.
        .target(
            name: "OvertimePrometheus",
            dependencies: [
                "Overtime",
                "OvertimeSupport",
                "CLibUV",
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        .target(
            name: "OvertimeServiceLifecycle",
            dependencies: [
                "Overtime",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "overtimectl",
            dependencies: [
                "OvertimeControl",
                "OvertimeControlProtocol",
                "OvertimeSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "getting-started",
            dependencies: ["Overtime"],
            path: "Examples/getting-started"
        ),
        .executableTarget(
            name: "tiny-daemon",
            dependencies: [
                "Overtime", "OvertimeSystem", "OvertimePrometheus", .product(name: "Metrics", package: "swift-metrics"),
            ],
            path: "Examples/tiny-daemon"
        ),
        .executableTarget(
            name: "log-uploader",
            dependencies: [
                "Overtime",
                "OvertimeSupport",
                "OvertimeLogUploader",
                "OvertimeRELP",
                "OvertimeScheduler",
                "OvertimeSystem",
                "OvertimePrometheus",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            path: "Examples/log-uploader"
        ),
        .executableTarget(
            name: "periodic-report",
            dependencies: [
                "Overtime",
                "OvertimeSupport",
                "OvertimeScheduler",
                "OvertimePrometheus",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            path: "Examples/periodic-report"
        ),
        // A child process the tests start to check behaviour that ends a process
        // (exit policies, the watchdog) and the libuv path end to end.
        .executableTarget(
            name: "OvertimeTestHarness",
            dependencies: [
                "Overtime",
                "OvertimeSupport",
                "OvertimeTesting",
                "OvertimeLogUploader",
                "OvertimeScheduler",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/Harness"
        ),
        // libFuzzer target for the spool record parser (built with -sanitize=fuzzer, see the file).
        .executableTarget(
            name: "FuzzSpoolParser",
            dependencies: ["OvertimeLogUploader"],
            path: "Tests/Fuzz/SpoolParser",
            exclude: ["corpus"]
        ),
        // The GNU spawn and pipe calls the tests' process spawner needs.
        .target(name: "CSpawn", path: "Tests/CSpawn"),
        // What every test target shares: servers the tests start, child processes,
        // virtual runtimes, log and metric capture.
        .target(
            name: "OvertimeTestSupport",
            dependencies: [
                "CSpawn",
                "Overtime",
                "OvertimeSupport",
                "OvertimeTesting",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            path: "Tests/Support"
        ),
        // One test target per module. The shared helpers:
        .testTarget(name: "OvertimeSupportTests", dependencies: ["OvertimeSupport"]),
        // The control protocol's JSON, against Foundation's as an independent reader:
        .testTarget(
            name: "OvertimeControlProtocolTests", dependencies: ["OvertimeControlProtocol", "OvertimeTestSupport"]),
        .testTarget(
            name: "OvertimeControlTests", dependencies: ["OvertimeControl", "Overtime", "OvertimeTestSupport"]),
        // The core's parts and runtime:
        .testTarget(
            name: "OvertimeTests",
            dependencies: [
                "Overtime",
                "OvertimeSupport",
                "OvertimeControlProtocol",
                "OvertimeTesting",
                "OvertimeTestSupport",
                "OvertimeTestHarness",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ]
        ),
        // The drivers against real processes: signals, systemd's notify socket, the
        // control socket and overtimectl.
        .testTarget(
            name: "OvertimeDriversTests",
            dependencies: [
                "Overtime",
                "OvertimeSupport",
                "OvertimeControlProtocol",
                "OvertimeTesting",
                "OvertimeTestSupport",
                "OvertimeTestHarness",
                "overtimectl",
                "tiny-daemon",
            ]
        ),
        // The operating system's events: memory pressure through FIFOs, sockets and PSI files.
        .testTarget(
            name: "OvertimeSystemTests",
            dependencies: [
                "Overtime",
                "OvertimeSupport",
                "OvertimeSystem",
                "OvertimeTesting",
                "OvertimeTestSupport",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The documentation's code and the getting-started daemon it teaches.
        .testTarget(
            name: "OvertimeDocsTests",
            dependencies: [
                "Overtime", "OvertimeSupport", "OvertimeScheduler", "OvertimeSystem", "OvertimeTestSupport",
                "getting-started",
            ]
        ),
        .testTarget(
            name: "OvertimeServiceLifecycleTests",
            dependencies: [
                "Overtime",
                "OvertimeSupport",
                "OvertimeServiceLifecycle",
                "OvertimeTestSupport",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The spool, the sinks and the uploader, and the log-uploader daemon, against
        // real file systems, nginx and rsyslog.
        .testTarget(
            name: "OvertimeLogUploaderTests",
            dependencies: [
                "Overtime",
                "OvertimeSupport",
                "OvertimeTesting",
                "OvertimeLogUploader",
                "OvertimeTestSupport",
                "OvertimeTestHarness",
                "overtimectl",
                "log-uploader",
                "tiny-daemon",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ]
        ),
        .testTarget(
            name: "OvertimeSchedulerTests",
            dependencies: [
                "Overtime",
                "OvertimeSupport",
                "OvertimeTesting",
                "OvertimeScheduler",
                "OvertimeSchedulerCodable",
                "OvertimeSchedulerTesting",
                "OvertimeSystem",
                "OvertimeTestSupport",
                "OvertimeTestHarness",
                "overtimectl",
                "periodic-report",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ]
        ),
        // The exposition, the endpoint against real clients, and the daemons scraped by a
        // real Prometheus server.
        .testTarget(
            name: "OvertimePrometheusTests",
            dependencies: [
                "Overtime",
                "OvertimeSupport",
                "OvertimePrometheus",
                "OvertimeLogUploader",
                "OvertimeTestSupport",
                "overtimectl",
                "log-uploader",
                "periodic-report",
                "tiny-daemon",
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        .testTarget(
            name: "OvertimeRELPTests",
            dependencies: [
                "Overtime",
                "OvertimeSupport",
                "OvertimeTesting",
                "OvertimeLogUploader",
                "OvertimeRELP",
                "OvertimeTestSupport",
            ]
        ),
    ]
)

// OVERTIME_SANITIZE_OWN_MODULES=thread (scripts/test's runs of this package and the fleet
// package under ThreadSanitizer): this package's modules are instrumented and linked with its
// runtime, and the dependencies are not, so that both build into the plain build's folder and
// take their dependencies (SwiftNIO, postgres-nio and both copies of BoringSSL among them)
// from it rather than compiling them a second time, instrumented. ThreadSanitizer reports
// races between instrumented accesses: Overtime's own code, the part under test.
if Context.environment["OVERTIME_SANITIZE_OWN_MODULES"] == "thread" {
    for target in package.targets where [.regular, .executable, .test].contains(target.type) {
        target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-sanitize=thread"])]
        target.cSettings = (target.cSettings ?? []) + [.unsafeFlags(["-fsanitize=thread"])]
        target.linkerSettings = (target.linkerSettings ?? []) + [.unsafeFlags(["-sanitize=thread"])]
    }
}
