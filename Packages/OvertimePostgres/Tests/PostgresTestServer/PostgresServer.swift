// A real PostgreSQL server for one test: initdb in a temporary folder, pg_ctl on a free
// loopback port, stopped and removed at the end. A library of its own, so that the
// dashboard's fleet tests start the same server.

import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A PostgreSQL server the test started, as the `postgres` user (the server refuses root).
public final class PostgresServer: Sendable {
    /// Its folder: the data, the log and the Unix socket.
    public let folder: String
    /// Its loopback TCP port.
    public let port: Int
    /// Where the server's programs are.
    public let bin: String
    /// The server's certificates and a client's, when it takes TLS connections only.
    public let tls: Certificates?

    /// A server on loopback; with `tls`, its TCP connections must use TLS and
    /// authenticate by a client certificate its authority signed (`hostssl … cert`).
    /// With `password`, TCP connections authenticate by it (SCRAM); the Unix socket
    /// trusts its users.
    public init(tls: Bool = false, password: String? = nil) throws {
        bin = try Self.findBin()
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("overtime-pg-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try Self.run("/bin/chown", ["postgres:postgres", folder])
        try Self.run("/bin/chmod", ["700", folder])
        let authentication =
            password == nil ? ["-A", "trust"] : ["--auth-local=trust", "--auth-host=scram-sha-256"]
        try Self.asPostgres(
            bin + "/initdb", ["-D", folder + "/data", "-U", "postgres", "--no-sync"] + authentication)
        if tls {
            let certificates = try Certificates(in: folder + "/tls")
            try Self.demandTLS(certificates, data: folder + "/data")
            // Made by root: the server reads them as `postgres`.
            try Self.run("/bin/chown", ["-R", "postgres:postgres", folder])
            self.tls = certificates
        } else {
            self.tls = nil
        }
        port = try Self.freePort()
        try pgctl("start")
        if let password { try psql("ALTER USER postgres PASSWORD '\(password)'") }
    }

    /// `pg_ctl stop`: the server down, its data kept for ``start()``.
    public func pause() throws {
        try pgctl("stop -m fast")
    }

    /// Sends `signal` to the server and every process it started (SIGSTOP: a server
    /// that hangs, or its machine frozen; SIGCONT to go on).
    public func signalAll(_ signal: Int32) {
        guard let text = try? String(contentsOfFile: folder + "/data/postmaster.pid", encoding: .utf8),
            let postmaster = text.split(separator: "\n").first.flatMap({ Int32($0) })
        else { return }
        kill(postmaster, signal)
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int32(entry),
                let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { continue }
            // pid (comm) state ppid …: the parent is the second field after the name.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 1, Int32(fields[1]) == postmaster { kill(pid, signal) }
        }
    }

    /// `pg_ctl start` after ``pause()``.
    public func start() throws {
        try pgctl("start")
    }

    /// Has the server in `data` take TLS connections only, with `certificates`' server
    /// certificate, from clients that show one their authority signed.
    private static func demandTLS(_ certificates: Certificates, data: String) throws {
        let settings =
            "ssl = on\nssl_cert_file = '\(certificates.serverCertificate)'\n"
            + "ssl_key_file = '\(certificates.serverKey)'\nssl_ca_file = '\(certificates.authority)'\n"
        let configuration = try String(contentsOfFile: data + "/postgresql.conf", encoding: .utf8)
        try (configuration + settings).write(toFile: data + "/postgresql.conf", atomically: true, encoding: .utf8)
        try "local all all trust\nhostssl all all 127.0.0.0/8 cert\n".write(
            toFile: data + "/pg_hba.conf", atomically: true, encoding: .utf8)
    }

    /// `pg_ctl restart -m immediate`: the server's processes killed (a crash, to the
    /// clients), started again on the same port, and recovered from its log.
    public func restartImmediately() throws {
        try pgctl("restart -m immediate")
    }

    /// pg_ctl through the shell, waited for with waitpid: the server it leaves running
    /// keeps what pg_ctl had open, which Foundation's Process would wait on for good.
    private func pgctl(_ action: String) throws {
        let command =
            "/usr/sbin/runuser -u postgres -- \(bin)/pg_ctl -D \(folder)/data -l \(folder)/log -w"
            + " -o '-p \(port) -k \(folder) -c listen_addresses=127.0.0.1,127.0.0.2 -c fsync=off' \(action) >/dev/null 2>&1"
        guard system(command) == 0 else {
            throw ServerError(
                "pg_ctl \(action) failed: \((try? String(contentsOfFile: folder + "/log", encoding: .utf8)) ?? "")")
        }
    }

    /// SQL run with psql (through the server's Unix socket) in `database`, its output.
    @discardableResult
    public func psql(_ sql: String, database: String = "postgres") throws -> String {
        try Self.asPostgres(
            bin + "/psql", ["-h", folder, "-p", "\(port)", "-U", "postgres", "-d", database, "-tA", "-c", sql])
    }

    /// `pg_ctl stop`, then the folder removed.
    public func stop() {
        _ = system(
            "/usr/sbin/runuser -u postgres -- \(bin)/pg_ctl -D \(folder)/data -m immediate -w stop >/dev/null 2>&1")
        try? FileManager.default.removeItem(atPath: folder)
    }

    private static func findBin() throws -> String {
        for candidate in ["/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin"]
        where FileManager.default.isExecutableFile(atPath: candidate + "/pg_ctl") {
            return candidate
        }
        throw ServerError("no PostgreSQL server binaries (scripts/setup installs them)")
    }

    @discardableResult
    private static func asPostgres(_ program: String, _ arguments: [String]) throws -> String {
        try run("/usr/sbin/runuser", ["-u", "postgres", "--", program] + arguments)
    }

    /// Runs `program` and returns what it printed; throws when it fails.
    ///
    /// What it prints goes to a file read once it has ended, not to a pipe read to its end:
    /// a server another test starts at the same moment can inherit the pipe's writing end
    /// and hold it open for as long as it runs.
    @discardableResult
    public static func run(_ program: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: "/")
        let outputPath = NSTemporaryDirectory() + "/overtime-run-\(UUID().uuidString).out"
        guard FileManager.default.createFile(atPath: outputPath, contents: nil) else {
            throw ServerError("cannot create \(outputPath)")
        }
        defer { try? FileManager.default.removeItem(atPath: outputPath) }
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        process.standardOutput = output
        process.standardError = output
        do {
            try process.run()
        } catch {
            try? output.close()
            throw error
        }
        try? output.close()
        process.waitUntilExit()
        let text = String(decoding: FileManager.default.contents(atPath: outputPath) ?? Data(), as: UTF8.self)
        guard process.terminationStatus == 0 else {
            throw ServerError(
                "\(program) \(arguments.joined(separator: " ")): exit \(process.terminationStatus): \(text)")
        }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A loopback port nothing listens on now.
    public static func freePort() throws -> Int {
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
        guard bound else { throw ServerError("no free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

/// Certificates made with openssl in a folder: a certificate authority, a server's
/// certificate for 127.0.0.1 and a client's for the role `postgres`, both signed by it, and
/// an authority that signed neither.
public struct Certificates: Sendable {
    /// The authority's certificate (PEM).
    public let authority: String
    /// The server's certificate.
    public let serverCertificate: String
    /// The server's key.
    public let serverKey: String
    /// The client's certificate.
    public let clientCertificate: String
    /// The client's key.
    public let clientKey: String
    /// An authority that signed neither.
    public let strangerAuthority: String

    /// Makes them in `folder`.
    public init(in folder: String) throws {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        func openssl(_ arguments: String) throws {
            try PostgresServer.run("/bin/sh", ["-c", "cd '\(folder)' && openssl \(arguments) 2>&1"])
        }
        let key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
        for authority in ["ca", "stranger"] {
            try openssl(
                "req -x509 \(key) -days 2 -subj '/CN=Overtime test \(authority)' -keyout \(authority).key"
                    + " -out \(authority).pem")
        }
        try "subjectAltName=IP:127.0.0.1\n".write(toFile: folder + "/server.ext", atomically: true, encoding: .utf8)
        for (name, subject, extensions) in [("server", "127.0.0.1", "-extfile server.ext"), ("client", "postgres", "")]
        {
            try openssl("req \(key) -subj '/CN=\(subject)' -keyout \(name).key -out \(name).csr")
            try openssl(
                "x509 -req -in \(name).csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -out \(name).pem"
                    + " \(extensions)")
        }
        try PostgresServer.run("/bin/chmod", ["600", folder + "/server.key", folder + "/client.key"])
        authority = folder + "/ca.pem"
        serverCertificate = folder + "/server.pem"
        serverKey = folder + "/server.key"
        clientCertificate = folder + "/client.pem"
        clientKey = folder + "/client.key"
        strangerAuthority = folder + "/stranger.pem"
    }
}

/// What went wrong starting or driving the server.
public struct ServerError: Error, CustomStringConvertible {
    /// What happened.
    public let description: String
    /// An error saying `description`.
    public init(_ description: String) { self.description = description }
}
