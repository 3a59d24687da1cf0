// swift-tools-version: 6.2
// Overtime embedded in a Hummingbird 2 HTTP server, in a package of its own so that
// Overtime itself never depends on Hummingbird or SwiftNIO.

import PackageDescription

let package = Package(
    name: "hummingbird-server",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "Overtime", path: "../.."),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        .executableTarget(
            name: "hummingbird-server",
            dependencies: [
                .product(name: "Overtime", package: "Overtime"),
                .product(name: "OvertimeServiceLifecycle", package: "Overtime"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: [.unsafeFlags(["-warnings-as-errors"])]
        ),
        // Drives the built server with real HTTP requests (curl) and a real SIGTERM.
        .testTarget(
            name: "EmbeddedServerTests",
            dependencies: ["hummingbird-server"]
        ),
    ]
)
