// swift-tools-version: 6.1
import PackageDescription

// The schedule and fleet dashboard, in the browser: a package of its own, so that neither
// the Overtime core nor the daemons pull in Hummingbird or SwiftNIO. It reads fleets
// through OvertimePostgres (whose postgres-nio shares this package's SwiftNIO).
let package = Package(
    name: "OvertimeDashboard",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "OvertimeDashboard", targets: ["OvertimeDashboard"]),
        .executable(name: "overtime-dashboard", targets: ["overtime-dashboard"]),
    ],
    dependencies: [
        .package(name: "Overtime", path: "../.."),
        .package(name: "OvertimePostgres", path: "../OvertimePostgres"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.1.1"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    ],
    targets: [
        .target(
            name: "OvertimeDashboard",
            dependencies: [
                .product(name: "Overtime", package: "Overtime"),
                .product(name: "OvertimeScheduler", package: "Overtime"),
                .product(name: "OvertimeControl", package: "Overtime"),
                .product(name: "OvertimePostgres", package: "OvertimePostgres"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),
        .executableTarget(
            name: "overtime-dashboard",
            dependencies: [
                "OvertimeDashboard",
                .product(name: "OvertimeScheduler", package: "Overtime"),
                .product(name: "OvertimePostgres", package: "OvertimePostgres"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // A daemon with a schedule in every state, for the browser tests to look at and act on.
        .executableTarget(
            name: "dashboard-fixture-daemon",
            dependencies: [
                .product(name: "Overtime", package: "Overtime"),
                .product(name: "OvertimeScheduler", package: "Overtime"),
                .product(name: "OvertimePostgres", package: "OvertimePostgres"),
            ],
            path: "Tests/DashboardFixtureDaemon"
        ),
        .testTarget(
            name: "OvertimeDashboardTests",
            dependencies: [
                "OvertimeDashboard",
                "overtime-dashboard",
                "dashboard-fixture-daemon",
                .product(name: "Overtime", package: "Overtime"),
                .product(name: "OvertimeControl", package: "Overtime"),
                .product(name: "OvertimeScheduler", package: "Overtime"),
                .product(name: "OvertimePostgres", package: "OvertimePostgres"),
                .product(name: "PostgresTestServer", package: "OvertimePostgres"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
    ]
)
