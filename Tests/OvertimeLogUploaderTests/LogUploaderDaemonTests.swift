import Foundation
import Overtime
import OvertimeSupport
import OvertimeTestSupport
import Testing

@testable import OvertimeLogUploader

@Suite(
    "log-uploader daemon, end to end on the directory sink and an S3 store", .onOwnThread(runningAtMost: .minutes(2)))
struct LogUploaderDaemonTests {
    /// The names of the threads of process `pid`.
    static func threadNames(of pid: pid_t) throws -> Set<String> {
        let tasks = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")
        return Set(
            tasks.compactMap { task in
                (try? readWholeFile("/proc/\(pid)/task/\(task)/comm").get()).map {
                    String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                }
            })
    }

    /// The threads Design.md's table says `program` starts.
    static func documentedThreads(of program: String) throws -> Set<String> {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let design = try String(
            contentsOf: root.appendingPathComponent("Sources/Overtime/Overtime.docc/Design.md"), encoding: .utf8)
        var names = Set<String>()
        for line in design.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count == 4,
                cells[3].split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces) == program })
            else { continue }
            names.insert(cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`")))
        }
        return names
    }

    private func collected(_ folder: TemporaryDirectory) throws -> [SpoolRecord] {
        let root = folder.path + "/collected"
        guard let streams = try? FileManager.default.contentsOfDirectory(atPath: root) else { return [] }
        return try streams.flatMap { stream in
            try FileManager.default.contentsOfDirectory(atPath: root + "/" + stream).filter { $0.hasSuffix(".log") }
                .sorted().flatMap {
                    SegmentFormat.parse(Array(try Data(contentsOf: URL(fileURLWithPath: "\(root)/\(stream)/\($0)"))))
                        .records
                }
        }
    }

    @Test(.startsProcesses) func backgroundUploadsWhatIsSpooledAndTerminationUploadsTheRestExactlyOnce() throws {
        let folder = TemporaryDirectory("daemon")
        defer { folder.remove() }
        let socket = folder.path + "/in.sock"
        let child = try RunningChild(
            [
                "--spool", folder.path + "/spool", "--sink", folder.path + "/collected", "--datagram-socket", socket,
                "--progress-interval", "0", "--budget", "10", "--lead", "2",
            ], executable: "log-uploader")
        for _ in 0..<2000 {
            guard access(socket, F_OK) != 0 else { break }
            usleep(5000)
        }
        try sendDatagrams((1...100).map { "first \($0)" }, to: socket)
        usleep(300_000)
        child.send(SIGUSR1)  // background: upload inside a grant
        // The daemon's own log lines are spooled and uploaded too: count only ours.
        let firsts = { try collected(folder).filter { $0.text.hasPrefix("first ") }.count }
        for _ in 0..<2000 {
            guard try firsts() < 100 else { break }
            usleep(5000)
        }
        #expect(try firsts() == 100)
        child.send(SIGUSR2)
        try sendDatagrams((1...50).map { "second \($0)" }, to: socket)
        usleep(300_000)
        child.send(SIGTERM)  // terminate: upload the rest inside the budget, then exit
        #expect(child.waitForExit() == 0)
        // The daemon's own line about the signal went through the spool too. (Logged as the
        // signal arrives, it races the background drain's seal, so it may come with the
        // final drain rather than the first.)
        #expect(try collected(folder).contains { $0.text.contains("received SIGUSR1") })
        let records = try collected(folder).filter { $0.text.hasPrefix("first ") || $0.text.hasPrefix("second ") }
        #expect(records.map(\.text) == (1...100).map { "first \($0)" } + (1...50).map { "second \($0)" })
        let sequences = records.map(\.sequence)
        #expect(Set(sequences).count == sequences.count)  // no duplicates
        // The final progress line. (The daemon's own log lines written after the last
        // drain stay spooled for the next run, so pending may not be zero.)
        let progress = try #require(child.standardError.last { $0.hasPrefix("spooled=") })
        #expect(progress.contains("rejected=0 dropped=0 truncated=0 dead-lettered=0 state=terminated"))
    }

    /// The embedded default loads nothing it does not use: neither libcurl nor librelp
    /// (each loaded by its sink's first request), and, with stderr not a terminal, no
    /// progress line but the last.
    @Test(.startsProcesses) func aFolderSinkLoadsNeitherLibcurlNorLibrelpAndADaemonPrintsOnlyTheFinalProgressLine()
        throws
    {
        let folder = TemporaryDirectory("lean")
        defer { folder.remove() }
        let socket = folder.path + "/in.sock"
        let child = try RunningChild(
            ["--spool", folder.path + "/spool", "--sink", folder.path + "/collected", "--datagram-socket", socket],
            executable: "log-uploader")
        for _ in 0..<2000 {
            guard access(socket, F_OK) != 0 else { break }
            usleep(5000)
        }
        try sendDatagrams((1...20).map { "lean \($0)" }, to: socket)
        usleep(300_000)
        child.send(SIGUSR1)  // a drain to the folder
        let leans = { try collected(folder).filter { $0.text.hasPrefix("lean ") }.count }
        for _ in 0..<2000 {
            guard try leans() < 20 else { break }
            usleep(5000)
        }
        #expect(try leans() == 20)
        usleep(1_500_000)  // more than a progress interval of a terminal
        let maps = String(decoding: (try? readWholeFile("/proc/\(child.pid)/maps").get()) ?? [], as: UTF8.self)
        #expect(maps.contains("log-uploader"), "the maps were read")
        #expect(!maps.contains("libcurl"))
        #expect(!maps.contains("librelp"))
        // Every thread it has after a drain is one Design.md says log-uploader starts.
        let threads = try Self.threadNames(of: child.pid)
        let documented = try Self.documentedThreads(of: "log-uploader")
        #expect(threads.contains("overtime-upload") && documented.count >= 10, "\(threads) against \(documented)")
        for name in threads.subtracting(documented + ["log-uploader"]).sorted() {
            Issue.record("log-uploader runs a thread '\(name)' that Design.md does not list for it")
        }
        #expect(!maps.contains("libgnutls"))
        child.send(SIGTERM)
        #expect(child.waitForExit() == 0)
        #expect(child.standardError.filter { $0.hasPrefix("spooled=") }.count == 1)
    }

    @Test(.startsProcesses) func anUnknownSinkSchemeIsRefusedClearly() throws {
        let child = try RunningChild(["--sink", "ftp://127.0.0.1:9/logs"], executable: "log-uploader")
        #expect(child.waitForExit() == 64)
        #expect(
            child.standardError.contains {
                $0.contains("a sink is a folder, an http(s):// or s3:// URL, syslog://host:port or relp://host:port")
            })
        for (arguments, words) in [
            (["--sink", "s3://Bad_Bucket/x"], "a bucket name is 3 to 63 lowercase letters"),
            (["--sink", "s3://bucket?endpoint=ftp://h"], "an endpoint is http(s)://host[:port]"),
            (["--compression", "lz4", "--sink", "http://127.0.0.1:9/x"], "--compression is none, zstd or gzip"),
            (["--compression", "zstd"], "--compression applies to http(s):// and s3:// sinks"),
        ] {
            let refused = try RunningChild(arguments, executable: "log-uploader")
            #expect(refused.waitForExit() == 64)
            #expect(refused.standardError.contains { $0.contains(words) }, "\(refused.standardError)")
        }
    }

    @Test(.startsProcesses) func anS3SinkTakesItsKeysFromACredentialOrTheEnvironmentAndStoresCompressedObjects()
        async throws
    {
        try await onOwnThread {
            let store = try SeaweedFSServer()
            let folder = TemporaryDirectory("daemon-s3")
            defer { folder.remove() }
            let sink = "s3://\(store.bucket)/daemons/a?endpoint=\(store.endpoint)"
            let arguments = [
                "--spool", folder.path + "/spool", "--sink", sink, "--compression", "zstd", "--exit-on-eof",
                "--upload-interval", "0",
            ]
            // Without keys: a clear refusal naming what is missing, before anything is spooled.
            let refused = try RunningChild(
                arguments, environment: ["AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""],
                executable: "log-uploader")
            #expect(refused.waitForExit() == 64)
            #expect(refused.standardError.joined().contains("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY not set"))
            // systemd's LoadCredential=: a folder holding `sink-credentials`, not the environment.
            let credentials = folder.path + "/credentials"
            try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: true)
            /// The daemon with `credential` as its `sink-credentials` and no keys in its environment.
            func daemon(credential: String) throws -> RunningChild {
                try credential.write(toFile: credentials + "/sink-credentials", atomically: true, encoding: .utf8)
                return try RunningChild(
                    arguments,
                    environment: [
                        "CREDENTIALS_DIRECTORY": credentials, "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "",
                    ],
                    executable: "log-uploader", standardInput: true)
            }
            let malformed = try daemon(credential: "\(store.accessKey)\n")
            #expect(malformed.waitForExit() == 64)
            #expect(
                malformed.standardError.contains { $0.contains("does not hold ACCESS_KEY_ID:SECRET_ACCESS_KEY") },
                "\(malformed.standardError)")
            let child = try daemon(credential: "\(store.accessKey):\(store.secretKey)\n")
            try child.input!.write(contentsOf: Data((1...5000).map { "s3 daemon line \($0)\n" }.joined().utf8))
            try child.input!.close()
            #expect(child.waitForExit() == 0, "\(child.standardError)")
            #expect(!child.standardError.joined().contains(store.secretKey))
            let objects = try store.objects()
            #expect(objects.allSatisfy { $0.key.hasPrefix("daemons/a/") && $0.key.hasSuffix(".log.zst") })
            #expect(objects.allSatisfy { $0.contentEncoding == "zstd" })
            let lines = objects.flatMap { SegmentFormat.parse($0.content).records.map(\.text) }
                .filter { $0.hasPrefix("s3 daemon line ") }
            #expect(lines.sorted() == (1...5000).map { "s3 daemon line \($0)" }.sorted())
        }
    }
}
