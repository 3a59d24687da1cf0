import Foundation
import OvertimeLogUploader
import OvertimeTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A sink's password never reaches a message (warnings are spooled and uploaded too), and
/// need not be on the command line: log-uploader takes it from a file, systemd's
/// `LoadCredential=` or the environment.
@Suite("log-uploader: sink credentials stay secret", .serialized, .timeLimit(.minutes(3)))
struct SinkCredentialsTests {
    private typealias Support = UploaderSafetyTests

    @Test func userInfoIsRedactedInWhatIsShown() {
        #expect(HTTPSink.redacting("http://up:s3cret@host:8080/logs?x=1") == "http://up:***@host:8080/logs?x=1")
        #expect(HTTPSink.redacting("https://only-user@host/") == "https://only-user@host/")
        #expect(HTTPSink.redacting("http://host/a@b") == "http://host/a@b", "an @ in the path is not user-info")
        #expect(HTTPSink.redacting("/var/lib/collected") == "/var/lib/collected")
    }

    /// A collector that wants HTTP basic authentication: PUTs with the right credentials are
    /// stored (their bodies appended to a file), others answered 401.
    private func collector(_ folder: TemporaryDirectory, user: String, password: String) throws -> (
        SpawnedProcess, port: Int
    ) {
        let script = """
            import base64, http.server, sys
            expected = "Basic " + base64.b64encode(sys.argv[2].encode()).decode()
            class H(http.server.BaseHTTPRequestHandler):
                def log_message(self, *a): pass
                def do_HEAD(self):
                    self.send_response(404 if self.headers.get("Authorization") == expected else 401)
                    self.send_header("Content-Length", "0"); self.end_headers()
                def do_PUT(self):
                    body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                    if self.headers.get("Authorization") != expected:
                        self.send_response(401); self.send_header("Content-Length", "0"); self.end_headers(); return
                    open(sys.argv[1], "ab").write(body)
                    self.send_response(201); self.send_header("Content-Length", "0"); self.end_headers()
            s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
            print(s.server_address[1], flush=True)
            s.serve_forever()
            """
        let process = try SpawnedProcess(
            "/usr/bin/python3", ["-c", script, folder.path + "/received", "\(user):\(password)"])
        let greeting = String(decoding: process.outputPipe!.availableData, as: UTF8.self)
        let port = try #require(Int(greeting.trimmingCharacters(in: .whitespacesAndNewlines)))
        return (process, port)
    }

    @Test(.startsProcesses, arguments: ["file", "credentials directory", "environment"])
    func credentialsComeFromOutsideTheCommandLine(source: String) async throws {
        try await onOwnThread {
            let folder = TemporaryDirectory("sink-credentials")
            defer { folder.remove() }
            let password = "pa:ss@w/rd%"
            let (server, port) = try collector(folder, user: "uploader", password: password)
            defer {
                server.send(SIGKILL)
                _ = server.waitForExit()
            }
            var arguments = [
                "--spool", folder.path + "/spool", "--sink", "http://127.0.0.1:\(port)/logs",
                "--ingest-socket", folder.path + "/ingest.sock", "--upload-interval", "0.2", "--progress-interval", "0",
            ]
            var environment: [String: String] = [:]
            let line = "uploader:\(password)\n"
            switch source {
            case "file":
                try line.write(toFile: folder.path + "/credentials", atomically: true, encoding: .utf8)
                arguments += ["--sink-credentials", folder.path + "/credentials"]
            case "credentials directory":
                try FileManager.default.createDirectory(
                    atPath: folder.path + "/credentials", withIntermediateDirectories: true)
                try line.write(toFile: folder.path + "/credentials/sink-credentials", atomically: true, encoding: .utf8)
                environment["CREDENTIALS_DIRECTORY"] = folder.path + "/credentials"
            default:
                environment["LOG_UPLOADER_SINK_CREDENTIALS"] = "uploader:\(password)"
            }
            let child = try RunningChild(arguments, environment: environment, executable: "log-uploader")
            Support.waitForSocket(folder.path + "/ingest.sock")
            let client = try SpoolIngestClient(path: folder.path + "/ingest.sock")
            try client.send(Support.lines("secret-safe", 1...10))
            #expect(
                Support.waitFor {
                    // Segments as stored: binary headers around the lines.
                    let bytes = (try? Data(contentsOf: URL(fileURLWithPath: folder.path + "/received"))) ?? Data()
                    let text = String(decoding: bytes, as: UTF8.self)
                    return (1...10).allSatisfy { text.contains("secret-safe \($0) ") }
                }, "uploaded with the credentials: \(child.standardError)")
            let commandLine = (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(child.pid)/cmdline"))) ?? Data()
            #expect(!String(decoding: commandLine, as: UTF8.self).contains(password), "not on the command line")
            child.send(SIGTERM)
            #expect(child.waitForExit() == 0)
        }
    }

    /// A sink URL with a password that fails: the retry warnings (on stderr, and spooled
    /// as the daemon's own lines) name the sink without the password.
    @Test(.startsProcesses) func aPasswordInTheSinkURLIsNeverWrittenOut() async throws {
        try await onOwnThread {
            let folder = TemporaryDirectory("sink-redaction")
            defer { folder.remove() }
            let child = try RunningChild(
                [
                    "--spool", folder.path + "/spool", "--sink", "http://uploader:hunter2-secret@127.0.0.1:9/logs",
                    "--budget", "3", "--lead", "1", "--ingest-socket", folder.path + "/ingest.sock",
                    "--upload-interval", "0.2",
                    "--progress-interval", "0",
                ], executable: "log-uploader")
            Support.waitForSocket(folder.path + "/ingest.sock")
            let client = try SpoolIngestClient(path: folder.path + "/ingest.sock")
            try client.send(Support.lines("line", 1...5))
            #expect(Support.waitFor { child.standardError.contains { $0.contains("upload failed") } })
            child.send(SIGTERM)
            _ = child.waitForExit()
            let said = child.standardError.joined(separator: "\n") + child.output.joined(separator: "\n")
            #expect(!said.contains("hunter2-secret"), "\(said)")
            #expect(said.contains("uploader:***@127.0.0.1:9"), "the sink still named: \(said)")
            var spooled = ""
            let files = FileManager.default.enumerator(atPath: folder.path + "/spool")
            while let file = files?.nextObject() as? String {
                spooled += String(
                    decoding: (try? Data(contentsOf: URL(fileURLWithPath: folder.path + "/spool/" + file))) ?? Data(),
                    as: UTF8.self)
            }
            #expect(spooled.contains("upload failed"), "the daemon's own warnings are spooled")
            #expect(!spooled.contains("hunter2-secret"), "and name no password")
        }
    }
}
