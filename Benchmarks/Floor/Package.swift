// swift-tools-version: 6.1
import PackageDescription

// The footprint rows' floor program and the READY=1 notification the benchmarks' programs
// share: a package without dependencies, so that the floor's static release build
// (scripts/build-static) resolves nothing and compiles two small modules, rather than
// cloning and building for the benchmarks' whole graph.
let package = Package(
    name: "OvertimeBenchmarkFloor",
    products: [
        .library(name: "ReadyNotification", targets: ["ReadyNotification"]),
        .executable(name: "swift-floor", targets: ["swift-floor"]),
    ],
    targets: [
        // READY=1 on NOTIFY_SOCKET, for the programs the footprint rows start.
        .target(name: "ReadyNotification"),
        // The smallest static Swift program that says READY=1 and exits on SIGTERM.
        .executableTarget(name: "swift-floor", dependencies: ["ReadyNotification"]),
    ]
)
