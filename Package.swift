// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "Overtime",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Overtime", targets: ["Overtime"]),
        .library(name: "OvertimeTesting", targets: ["OvertimeTesting"]),
        .library(name: "OvertimeServiceLifecycle", targets: ["OvertimeServiceLifecycle"]),
        .library(name: "OvertimeLogUploader", targets: ["OvertimeLogUploader"]),
        .library(name: "OvertimeRELP", targets: ["OvertimeRELP"]),
        .executable(name: "overtimectl", targets: ["overtimectl"]),
        .executable(name: "tiny-daemon", targets: ["tiny-daemon"]),
        .executable(name: "log-uploader", targets: ["log-uploader"]),
    ],
    dependencies: [
        // The core keeps its dependency list short on purpose: users embed it.
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        // Only the command-line tools use it; the Overtime library does not.
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // Only the bridge module uses it, so the core stays free of it.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    ],
    targets: [
        // libuv from the system (Debian: libuv1-dev), found through pkg-config.
        .systemLibrary(
            name: "CLibUV",
            pkgConfig: "libuv",
            providers: [.apt(["libuv1-dev"])]
        ),
        // libcurl from the system (Debian: libcurl4-openssl-dev), for the HTTP sink only.
        .systemLibrary(
            name: "CLibCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        // librelp from the system (Debian: librelp-dev), for the RELP sink only.
        .systemLibrary(
            name: "CLibRelp",
            pkgConfig: "relp",
            providers: [.apt(["librelp-dev"])]
        ),
        .target(
            name: "Overtime",
            dependencies: [
                "CLibUV",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        // CRC-32C with the CPU's crc32 instruction, for spool records.
        .target(name: "CCRC32C"),
        .target(
            name: "OvertimeTesting",
            dependencies: ["Overtime"]
        ),
        .target(
            name: "OvertimeLogUploader",
            dependencies: [
                "Overtime",
                "CCRC32C",
                "CLibUV",
                "CLibCurl",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        // The RELP sink: its own module, so only programs that send RELP link librelp.
        .target(
            name: "OvertimeRELP",
            dependencies: ["Overtime", "OvertimeLogUploader", "CLibRelp"]
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
                "Overtime",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "tiny-daemon",
            dependencies: ["Overtime"],
            path: "Examples/tiny-daemon"
        ),
        .executableTarget(
            name: "log-uploader",
            dependencies: [
                "Overtime",
                "OvertimeLogUploader",
                "OvertimeRELP",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            path: "Examples/log-uploader"
        ),
        // A child process the tests start to check behaviour that ends a process
        // (exit policies, the watchdog) and the libuv path end to end.
        .executableTarget(
            name: "OvertimeTestHarness",
            dependencies: [
                "Overtime",
                "OvertimeTesting",
                "OvertimeLogUploader",
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
        .testTarget(
            name: "OvertimeTests",
            dependencies: [
                "Overtime",
                "OvertimeTesting",
                "OvertimeTestHarness",
                "overtimectl",
                "log-uploader",
                "OvertimeServiceLifecycle",
                "OvertimeLogUploader",
                "OvertimeRELP",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ]
        ),
    ]
)
