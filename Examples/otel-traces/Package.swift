// swift-tools-version: 6.2
// Overtime's spans exported over OTLP/HTTP with swift-otel, in a package of its own so that
// Overtime's daemons never depend on swift-otel, SwiftNIO or AsyncHTTPClient.

import PackageDescription

let package = Package(
    name: "otel-traces",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Overtime", path: "../.."),
        // OTLP over HTTP only: the gRPC exporter's packages are not built.
        .package(url: "https://github.com/swift-otel/swift-otel", from: "1.6.0", traits: ["OTLPHTTP"]),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        .executableTarget(
            name: "otel-traces",
            dependencies: [
                .product(name: "Overtime", package: "Overtime"),
                .product(name: "OvertimeScheduler", package: "Overtime"),
                .product(name: "OvertimeLogUploader", package: "Overtime"),
                .product(name: "OTel", package: "swift-otel"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: [.unsafeFlags(["-warnings-as-errors"])]
        ),
        // Runs the built example against a real OTLP/HTTP receiver (Python, opentelemetry-proto).
        .testTarget(
            name: "TraceExportTests",
            dependencies: ["otel-traces"],
            resources: [.copy("otlp_receiver.py")]
        ),
    ]
)
