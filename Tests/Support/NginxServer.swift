import Foundation
import Overtime
import OvertimeSupport

/// A real nginx on a free loopback port, storing PUTs under `root/data` (nginx from
/// Debian, `dav_methods PUT; create_full_put_path on;`). Single process, so the files
/// belong to the test's own user.
package final class NginxServer: @unchecked Sendable {
    package let folder = TemporaryDirectory("nginx")
    package let port: Int
    private let process: SpawnedProcess

    package var baseURL: String { "http://127.0.0.1:\(port)/logs" }
    package var dataPath: String { folder.path + "/data" }

    /// Starts nginx on `requestedPort`, or on a free one.
    package init(port requestedPort: Int? = nil) throws {
        port = try requestedPort ?? freeLoopbackPort()
        try FileManager.default.createDirectory(atPath: folder.path + "/data", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: folder.path + "/body", withIntermediateDirectories: true)
        let configuration = """
            daemon off;
            master_process off;
            worker_processes 1;
            pid \(folder.path)/nginx.pid;
            error_log \(folder.path)/error.log;
            events { worker_connections 256; }
            http {
                access_log off;
                client_body_temp_path \(folder.path)/body;
                client_max_body_size 64m;
                server {
                    listen 127.0.0.1:\(port);
                    root \(folder.path)/data;
                    location = /identity { return 200 "\(folder.path)"; }
                    location /logs/ {
                        dav_methods PUT;
                        create_full_put_path on;
                        dav_access user:rw group:r all:r;
                    }
                    location /refuse/ { return 403; }
                    location /bad-request/ { return 400; }
                    # A collector that answers 404 while a flag file exists (a proxy not yet routing).
                    location /flaky/ {
                        alias \(folder.path)/data/logs/;
                        if (-f \(folder.path)/missing) { return 404; }
                        if (-f \(folder.path)/unavailable) {
                            add_header Retry-After 20 always;
                            return 503;
                        }
                        dav_methods PUT;
                        create_full_put_path on;
                    }
                    location /busy/ {
                        add_header Retry-After 7 always;
                        return 503;
                    }
                }
            }
            """
        try configuration.write(toFile: folder.path + "/nginx.conf", atomically: true, encoding: .utf8)
        process = try launchServer(
            "/usr/sbin/nginx",
            ["-c", folder.path + "/nginx.conf", "-p", folder.path, "-e", folder.path + "/error.log"], port: port)
        // Another test's server may have taken the port meanwhile: what answers must be this one.
        let identity = try SpawnedProcess.run(
            "/usr/bin/curl", ["-s", "--max-time", "5", "http://127.0.0.1:\(port)/identity"])
        guard identity.output == folder.path else {
            stopServer(process)
            throw NSError(
                domain: "NginxServer", code: 1,
                userInfo: [NSLocalizedDescriptionKey: "port \(port) answers for another server, not this nginx"])
        }
    }

    deinit {
        stopServer(process)
        folder.remove()
    }

    /// While `answer` is set, `/flaky/` answers it (404, or 503 with `Retry-After: 20`)
    /// instead of storing; `nil` stores again.
    package func setFlaky(_ answer: Int?) {
        for (status, flag) in [(404, "missing"), (503, "unavailable")] {
            let path = folder.path + "/" + flag
            if answer == status {
                _ = FileManager.default.createFile(atPath: path, contents: nil)
            } else {
                unlink(path)
            }
        }
    }

    package var flakyURL: String { "http://127.0.0.1:\(port)/flaky" }

    /// Every stored file under `logs/`, relative to it.
    package func storedFiles() -> [String] {
        let base = dataPath + "/logs"
        guard let enumerator = FileManager.default.enumerator(atPath: base) else { return [] }
        return enumerator.compactMap { $0 as? String }.filter { $0.hasSuffix(".log") }.sorted()
    }
}

/// Starts a server process and waits until it accepts connections on `port`.
package func launchServer(_ executable: String, _ arguments: [String], port: Int) throws -> SpawnedProcess {
    let process = try SpawnedProcess(executable, arguments, standardOutput: .discard, standardError: .discard)
    for _ in 0..<500 {
        if canConnect(port: port) { return process }
        if !process.isRunning { break }
        usleep(10_000)
    }
    stopServer(process)
    throw NSError(domain: executable, code: 1, userInfo: [NSLocalizedDescriptionKey: "\(executable) did not start"])
}

/// kill -9: a test server has nothing to save (and starts with SIGTERM blocked).
package func stopServer(_ process: SpawnedProcess) {
    process.send(SIGKILL)
    _ = process.waitForExit()
}

/// A loopback port free now, for a server a test starts. Picked below the kernel's
/// ephemeral range (32768–60999 here), where the tests' own client connections take their
/// local ports: a port from that range could be taken by a client between this pick and
/// the server's bind.
///
/// Never the same port twice in a process: picked at random, two tests running side by
/// side could draw the same port between one's pick and its server's bind, and a server
/// restarted on its ports (SeaweedFS) could find one taken by a later pick.
package func freeLoopbackPort() throws -> Int {
    for _ in 0..<200 {
        let port = nextLoopbackPortCandidate()
        if (try? bindLoopback(port: port)) == port { return port }
    }
    return try bindLoopback(port: 0)  // everything tried was taken: any free port
}

/// The ports below the ephemeral range handed out in turn, from a random start (another
/// test process likely starts elsewhere).
private let loopbackPortCandidates = Locked(Int.random(in: 0..<12_768))

private func nextLoopbackPortCandidate() -> Int {
    20_000
        + loopbackPortCandidates.withLock { next in
            defer { next = (next + 1) % 12_768 }
            return next
        }
}

/// A loopback port held for a server a test starts later: bound (without `SO_REUSEADDR`)
/// and not listening, so a client's connection is refused there as if nothing were, and no
/// other server can take it meanwhile; ``release()`` lets it go just before the server starts.
package final class ReservedLoopbackPort: @unchecked Sendable {
    package let port: Int
    private var fd: Int32

    package init() throws {
        for _ in 0..<200 {
            let candidate = nextLoopbackPortCandidate()
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var address = loopbackAddress(port: candidate)
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            if bound == 0 {
                self.port = candidate
                self.fd = fd
                return
            }
            close(fd)
        }
        throw NSError(domain: "ReservedLoopbackPort", code: Int(EADDRINUSE))
    }

    /// Lets the port go (once), for the server that is about to listen on it.
    package func release() {
        if fd >= 0 { close(fd) }
        fd = -1
    }

    deinit { release() }
}

/// Binds a socket to 127.0.0.1:`port` (0: any) and closes it; returns the port bound.
private func bindLoopback(port: Int) throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = loopbackAddress(port: port)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
            guard bind(fd, pointer, length) == 0 else { return -1 }
            return getsockname(fd, pointer, &length)
        }
    }
    guard bound == 0 else { throw NSError(domain: "freeLoopbackPort", code: Int(errno)) }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// 127.0.0.1:`port` (0: any), for `bind` or `connect`.
package func loopbackAddress(port: Int) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    return address
}

package func canConnect(port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = loopbackAddress(port: port)
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
    }
}

/// A TCP listener that accepts connections and never answers: a collector that hangs.
package final class SilentServer: @unchecked Sendable {
    package let port: Int
    private let fd: Int32
    /// Whether a thread of its own accepts the first client (and so closes the listener).
    private let watching: Bool
    /// Whether the first client was accepted, and when it closed its connection (with
    /// `watchingFirstConnection`).
    private let first = Locked<(accepted: Bool, closed: ContinuousClock.Instant?)>((false, nil))

    /// Starts nginx on `requestedPort`, or on a free one. With `watchingFirstConnection`,
    /// a thread of its own accepts the first client and reads (never answering) until the
    /// client closes, noting when.
    package init(port requestedPort: Int? = nil, watchingFirstConnection: Bool = false) throws {
        port = try requestedPort ?? freeLoopbackPort()
        watching = watchingFirstConnection
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = loopbackAddress(port: port)
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        listen(fd, 16)  // the kernel completes handshakes; nobody reads or answers
        guard watchingFirstConnection else { return }
        let (listener, first) = (fd, first)
        Thread.detachNewThread {
            // The thread closes the listener itself, after accept returns (a shutdown in
            // deinit makes it return): closed in deinit instead, the number could be another
            // thread's descriptor by the time this accept ran.
            let client = accept(listener, nil, nil)
            close(listener)
            guard client >= 0 else { return }
            first.withLock { $0.accepted = true }
            var buffer = [UInt8](repeating: 0, count: 4096)
            while recv(client, &buffer, buffer.count, 0) > 0 {}
            first.withLock { $0.closed = .now }
            close(client)
        }
    }

    /// Whether a first client connected, waiting up to `timeout` for one.
    package func firstConnectionAccepted(timeout: Duration = .seconds(60)) -> Bool {
        wait(timeout) { $0.accepted ? true : nil } ?? false
    }

    /// When the first client closed its connection, waiting up to `timeout` for it.
    package func firstConnectionClosed(timeout: Duration = .seconds(60)) -> ContinuousClock.Instant? {
        wait(timeout) { $0.closed }
    }

    private func wait<T>(_ timeout: Duration, _ value: ((accepted: Bool, closed: ContinuousClock.Instant?)) -> T?)
        -> T?
    {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let found = value(first.withLock { $0 }) { return found }
            usleep(5000)
        }
        return value(first.withLock { $0 })
    }

    deinit {
        shutdown(fd, Int32(SHUT_RDWR))  // a watching thread's accept returns, and it closes the listener
        if !watching { close(fd) }
    }
}
