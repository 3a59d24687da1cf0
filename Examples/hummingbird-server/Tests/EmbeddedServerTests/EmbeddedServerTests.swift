import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The built server, driven from outside as a user would: real HTTP (curl) and a real SIGTERM.
@Suite("Overtime embedded in a Hummingbird server: SIGTERM stops accepting, then drains the grants")
struct EmbeddedServerTests {
    /// The server beside this test binary in the build folder.
    static let server = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        .appendingPathComponent("hummingbird-server")

    /// A loopback port nothing listens on now.
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw POSIXError(.EADDRINUSE) }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// curl's exit status, the HTTP status and the body.
    static func curl(_ arguments: [String]) throws -> (exit: Int32, status: Int, body: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = ["-s", "--max-time", "5", "-w", "\n%{http_code}"] + arguments
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        let status = Int(text.split(separator: "\n").last ?? "") ?? 0
        return (process.terminationStatus, status, String(text.dropLast(String(status).count)))
    }

    @Test func sigtermStopsAcceptingFinishesShortJobsAndExpiresLongOnesInsideTheBudget() throws {
        let port = try Self.freePort()
        let base = "http://127.0.0.1:\(port)"
        let process = Process()
        process.executableURL = Self.server
        process.arguments = ["--port", "\(port)", "--budget", "5"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

        var ready = false
        for _ in 0..<300 where !ready {
            ready = (try? Self.curl([base + "/jobs"]))?.status == 200
            if !ready { usleep(100_000) }
        }
        try #require(ready, "the server answered within 30 s")
        #expect(try Self.curl(["-X", "POST", base + "/jobs/short?seconds=2"]).status == 202)
        #expect(try Self.curl(["-X", "POST", base + "/jobs/long?seconds=60"]).status == 202)
        let open = try Self.curl([base + "/jobs"]).body
        #expect(open.contains("job short") && open.contains("job long"), "\(open)")

        let signalled = Date()
        kill(process.processIdentifier, SIGTERM)
        // The server stops accepting while the grants still run.
        var refused = false
        for _ in 0..<40 where !refused {
            usleep(50_000)
            refused = try Self.curl([base + "/jobs"]).exit == 7  // couldn't connect
        }
        #expect(refused, "new connections are refused after SIGTERM")
        #expect(process.isRunning, "while the grants drain")

        process.waitUntilExit()
        let took = Date().timeIntervalSince(signalled)
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(process.terminationReason == .exit && process.terminationStatus == 0, "\(printed)")
        #expect(took < 7, "inside the 5 s budget and an exit: \(took) s")
        #expect(took > 3.5, "the long job held it to its expiration at 4 s: \(took) s")
        let lines = printed.split(separator: "\n").map(String.init)
        #expect(lines.contains("job short finished"), "\(printed)")
        #expect(lines.contains { $0.hasPrefix("job long stopped") }, "expired and cancelled: \(printed)")
        #expect(lines.last == "stopped: no grant open", "\(printed)")
    }
}
