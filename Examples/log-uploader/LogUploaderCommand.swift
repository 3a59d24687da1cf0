// log-uploader: spools log lines durably and uploads them inside a background grant
// when the program goes to the background (SIGUSR1) or is told to stop (SIGTERM).
//
//   seq 1 1000 | swift run log-uploader --exit-on-eof        (or: scripts/run-example)
import ArgumentParser
import Logging
import Overtime
import OvertimeLogUploader

#if canImport(Glibc)
    import Glibc
#endif

@main
struct LogUploaderCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "log-uploader",
        abstract: "Spool log lines crash-safely and upload them inside a background grant.",
        subcommands: [Run.self, Dump.self], defaultSubcommand: Run.self)
}

struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Read lines from stdin (and a datagram socket), spool them, upload on background and stop.",
        discussion: """
            SIGUSR1 sends the daemon to the background: it uploads what is spooled inside a grant.
            SIGTERM/SIGINT terminate it gracefully: it uploads inside the budget, then exits.
            """)

    @Option(help: "The spool folder.") var spool = "log-uploader/spool"
    @Option(
        help: "Where segments go: a folder (the embedded default), an http:// URL (HTTP PUT) or syslog://host:port.")
    var sink = "log-uploader/collected"
    @Option(help: "The most bytes the spool keeps, in MiB.") var quotaMb = 64
    @Option(help: "Seal a segment at this size, in KiB.") var segmentKb = 1024
    @Option(help: "The background budget, in seconds.") var budget = 30.0
    @Option(help: "How long before the deadline uploads are told to stop, in seconds.") var lead = 5.0
    @Option(help: "Also read lines from a Unix datagram socket at this path.") var datagramSocket: String?
    @Option(help: "Listen for overtimectl at this path.") var controlSocket: String?
    @Option(help: "Also upload in the foreground every N seconds (0: never).") var uploadInterval = 0.0
    @Option(help: "Print a progress line every N seconds (0: only at the end).") var progressInterval = 1.0
    @Flag(help: "Terminate (and upload) when stdin closes.") var exitOnEof = false

    func validate() throws {
        if sink.contains("://"), !["http://", "https://", "syslog://"].contains(where: sink.hasPrefix) {
            throw ValidationError("a sink is a folder, an http(s):// URL or syslog://host:port; got '\(sink)'")
        }
        if sink.hasPrefix("syslog://"), syslogTarget() == nil {
            throw ValidationError("expected syslog://host:port; got '\(sink)'")
        }
        if quotaMb < 1 || segmentKb < 4 || budget <= 0 || lead < 0 || lead >= budget {
            throw ValidationError("need quota-mb ≥ 1, segment-kb ≥ 4, budget > 0 and 0 ≤ lead < budget")
        }
    }

    func run() throws {
        var spoolOptions = SpoolConfiguration()
        spoolOptions.quotaBytes = quotaMb << 20
        spoolOptions.segmentBytes = segmentKb << 10
        let store = try Spool(directory: spool, configuration: spoolOptions)
        let writer = SpoolLogWriter.shared(for: store)
        LoggingSystem.bootstrap { label in
            var console = StreamLogHandler.standardError(label: label)
            console.logLevel = .notice
            return MultiplexLogHandler([console, SpoolLogHandler(label: label, writer: writer)])
        }
        if !store.recovery.isClean { print("recovered the spool: \(store.recovery)") }

        var configuration = RuntimeConfiguration()
        configuration.backgroundBudget = .milliseconds(Int(budget * 1000))
        configuration.expirationLeadTime = .milliseconds(Int(lead * 1000))
        configuration.controlSocketPath = controlSocket
        let runtime = try Runtime(configuration: configuration)
        var uploaderOptions = UploaderConfiguration()
        if uploadInterval > 0 { uploaderOptions.foregroundInterval = .milliseconds(Int(uploadInterval * 1000)) }
        let destination: any LogSink
        if let (host, port) = syslogTarget() {
            destination = SyslogSink(host: host, port: port, appName: "log-uploader")
        } else if sink.contains("://") {
            destination = HTTPSink(baseURL: sink, runtime: runtime)
        } else {
            destination = DirectorySink(root: sink)
        }
        let uploader = LogUploader(runtime: runtime, spool: store, sink: destination, configuration: uploaderOptions)
        uploader.start()

        let input = LineInput(spool: store)
        input.readStandardInput { if exitOnEof { runtime.requestTermination() } }
        if let datagramSocket { try input.readDatagrams(at: datagramSocket) }
        let progress = Progress(runtime: runtime, spool: store, uploader: uploader, input: input)
        if progressInterval > 0 { progress.every(seconds: progressInterval) }

        runtime.run()  // until terminated: SIGTERM, or stdin closing with --exit-on-eof
        writer.flush()
        progress.print()
    }
}

extension Run {
    /// `(host, port)` of a `syslog://host:port` sink.
    func syslogTarget() -> (String, Int)? {
        guard sink.hasPrefix("syslog://") else { return nil }
        let address = sink.dropFirst("syslog://".count)
        guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]),
            (1...65535).contains(port), colon > address.startIndex
        else { return nil }
        return (String(address[..<colon]), port)
    }
}

struct Dump: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the records of segment files (spooled .seg or uploaded .log).")

    @Argument(help: "Segment files.") var files: [String]

    func run() throws {
        var problems = 0
        for file in files {
            guard let bytes = readFile(file) else {
                print("\(file): cannot read")
                problems += 1
                continue
            }
            let parsed = SegmentFormat.parse(bytes)
            for record in parsed.records {
                print("\(parsed.streamID.map { "\($0)" } ?? "?") #\(record.sequence) \(record.text)")
            }
            if let problem = parsed.problem {
                print("\(file): \(problem)")
                problems += 1
            }
        }
        if problems > 0 { throw ExitCode(1) }
    }
}

func readFile(_ path: String) -> [UInt8]? {
    guard let file = fopen(path, "rb") else { return nil }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let count = fread(&chunk, 1, chunk.count, file)
        if count == 0 { return bytes }
        bytes += chunk[0..<count]
    }
}
