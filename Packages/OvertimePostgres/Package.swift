// swift-tools-version: 6.1
import PackageDescription

// The scheduler on PostgreSQL, for fleets: a package of its own, so that neither the
// Overtime core nor the SQLite scheduler pulls in SwiftNIO (postgres-nio's).
let package = Package(
    name: "OvertimePostgres",
    products: [
        .library(name: "OvertimePostgres", targets: ["OvertimePostgres"]),
        // For tests: a real PostgreSQL server started in a temporary folder (the dashboard's too).
        .library(name: "PostgresTestServer", targets: ["PostgresTestServer"]),
    ],
    dependencies: [
        .package(name: "Overtime", path: "../.."),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
    ],
    targets: [
        .target(
            name: "OvertimePostgres",
            dependencies: [
                .product(name: "Overtime", package: "Overtime"),
                .product(name: "OvertimeScheduler", package: "Overtime"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        .executableTarget(
            name: "overtime-fleet-worker",
            dependencies: [
                "OvertimePostgres",
                .product(name: "Overtime", package: "Overtime"),
                .product(name: "OvertimeScheduler", package: "Overtime"),
            ],
            path: "Tests/FleetWorker"
        ),
        .target(name: "PostgresTestServer", path: "Tests/PostgresTestServer"),
        .testTarget(
            name: "OvertimePostgresTests",
            dependencies: [
                "OvertimePostgres",
                "PostgresTestServer",
                "overtime-fleet-worker",
                .product(name: "Overtime", package: "Overtime"),
                .product(name: "OvertimeTesting", package: "Overtime"),
                .product(name: "OvertimeScheduler", package: "Overtime"),
                .product(name: "OvertimeSchedulerTesting", package: "Overtime"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
    ]
)

// OVERTIME_SANITIZE_OWN_MODULES=thread: this package's modules (and Overtime's, by its
// manifest) under ThreadSanitizer, and its dependencies not, so that scripts/test builds it
// into the plain build's folder without compiling SwiftNIO and BoringSSL again (Overtime's
// Package.swift says why).
if Context.environment["OVERTIME_SANITIZE_OWN_MODULES"] == "thread" {
    for target in package.targets where [.regular, .executable, .test].contains(target.type) {
        target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-sanitize=thread"])]
        target.cSettings = (target.cSettings ?? []) + [.unsafeFlags(["-fsanitize=thread"])]
        target.linkerSettings = (target.linkerSettings ?? []) + [.unsafeFlags(["-sanitize=thread"])]
    }
}
