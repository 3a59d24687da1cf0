// swift-tools-version: 6.1
import PackageDescription

// Overtime's benchmarks, a package of their own so that users of the library never
// build them (nor SwiftNIO and package-benchmark, which only the peers and the
// micro-benchmarks need). `./run` is the entry point; see README.md here.
let package = Package(
    name: "OvertimeBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Overtime", path: ".."),
        .package(name: "OvertimePostgres", path: "../Packages/OvertimePostgres"),
        // For its program (the dashboard rows), built from here: one resolution of every
        // package the runs build, so that none removes another's checkouts from a shared
        // .build (a removed checkout is cloned again, and all built from it compiled again).
        .package(name: "OvertimeDashboard", path: "../Packages/OvertimeDashboard"),
        // The floor program and READY=1 (Floor/), a package of its own: it has no dependencies.
        .package(name: "OvertimeBenchmarkFloor", path: "Floor"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        // Raw libuv and libcurl for the peers and the ceiling sender (the Overtime package
        // keeps its own C modules internal).
        .systemLibrary(name: "CLibUVPeer", pkgConfig: "libuv", providers: [.apt(["libuv1-dev"])]),
        .systemLibrary(name: "CCurlPeer", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        // Every scenario, for Overtime and each peer, as plain functions.
        .target(
            name: "BenchmarkScenarios",
            dependencies: [
                "CLibUVPeer",
                "CCurlPeer",
                .product(name: "ReadyNotification", package: "OvertimeBenchmarkFloor"),
                .product(name: "Overtime", package: "Overtime"),
                .product(name: "OvertimeLogUploader", package: "Overtime"),
                .product(name: "OvertimeScheduler", package: "Overtime"),
                .product(name: "OvertimeControl", package: "Overtime"),
                .product(name: "OvertimeSystem", package: "Overtime"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The runner behind ./run: every scenario in one process run, results/latest.{json,md}.
        .executableTarget(
            name: "overtime-bench",
            dependencies: [
                "BenchmarkScenarios",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // The fleet rows: workers on a PostgreSQL schedule, a program of its own so that the
        // runner does not link postgres-nio.
        .executableTarget(
            name: "overtime-fleet-bench",
            dependencies: [
                "BenchmarkScenarios",
                .product(name: "ReadyNotification", package: "OvertimeBenchmarkFloor"),
                .product(name: "OvertimePostgres", package: "OvertimePostgres"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // The peer of sigterm_to_exit_ms: a minimal ServiceGroup program.
        .executableTarget(
            name: "service-lifecycle-peer",
            dependencies: [
                .product(name: "ReadyNotification", package: "OvertimeBenchmarkFloor"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // package-benchmark micro-benchmarks (`swift package benchmark`): the begin+end
        // pair per implementation, with allocation and instruction counts.
        .executableTarget(
            name: "GrantPairs",
            dependencies: [
                "BenchmarkScenarios",
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/GrantPairs",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ]
)
