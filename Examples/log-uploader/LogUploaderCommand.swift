// log-uploader: spools log lines durably and uploads them inside a background grant
// when the program goes to the background (SIGUSR1) or is told to stop (SIGTERM), and
// periodically as a scheduled request (OvertimeScheduler) that needs the network when
// the sink is on one.
//
//   seq 1 1000 | swift run log-uploader --exit-on-eof        (or: scripts/run-example)
import ArgumentParser
import Logging
import Metrics
import Overtime
import OvertimeLogUploader
import OvertimePrometheus
import OvertimeRELP
import OvertimeScheduler
import OvertimeSupport
import OvertimeSystem

#if canImport(Glibc)
    import Glibc
#endif

@main
struct LogUploaderCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "log-uploader",
        abstract: "Spool log lines crash-safely and upload them inside a background grant.",
        subcommands: [Run.self, Redrive.self, Dump.self], defaultSubcommand: Run.self)

    /// Blocks the signals the runtime handles before anything makes a thread, so a SIGTERM
    /// sent while the daemon still starts waits for its stop instead of killing it; the
    /// subcommands that make no runtime unblock them.
    static func main() {
        SignalHandling.default.blockOnThisThread()
        // `log-uploader --help` is the help of what `log-uploader` runs: `run`'s, with its
        // options, and the other commands after it.
        if [["--help"], ["-h"], ["help"]].contains(Array(CommandLine.arguments.dropFirst())) {
            print(helpMessage(for: Run.self))
            print(
                """

                OTHER COMMANDS:
                  redrive                 Queue the spool's dead-lettered segments for upload again.
                  dump                    Print the records of segment files.
                  See 'log-uploader help <command>' for a command's own help.
                """)
            Glibc.exit(0)
        }
        main(nil)
    }
}

struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Read lines from stdin (and sockets), spool them, upload on background and stop.",
        discussion: """
            SIGUSR1 sends the daemon to the background: it uploads what is spooled inside a grant.
            SIGTERM/SIGINT terminate it gracefully: it reads what its inputs already hold, then
            uploads inside the budget, then exits.
            Exit status: 0 done; 3 stopped with segments not yet uploaded (the next run sends
            them); 64 bad arguments; 73 a path that cannot be ours (a file, a link, a read-only
            or missing folder); 75 the spool or a socket is in use by another process; 78 a
            socket the service manager was to pass (fd://) or an address not this machine's.
            """)

    @Option(help: "The spool folder (created with its parents).") var spool = "log-uploader/spool"
    @Option(
        help: """
            Where segments go: a folder (the embedded default), an http:// URL (HTTP PUT), \
            s3://bucket/prefix?endpoint=URL&region=R&addressing=path|virtual (S3 or an S3-compatible \
            store; keys from --sink-credentials, else AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), \
            syslog://host:port (RFC 5424 over TCP) or relp://host:port (RELP, acknowledged).
            """)
    var sink = "log-uploader/collected"
    @Option(
        help: """
            A file holding user:password for an http(s):// sink, or \
            ACCESS_KEY_ID:SECRET_ACCESS_KEY[:SESSION_TOKEN] for an s3:// sink (its first line), so \
            that secrets are not on the command line (/proc/PID/cmdline). Default: the credential \
            'sink-credentials' from systemd's LoadCredential= ($CREDENTIALS_DIRECTORY), else \
            LOG_UPLOADER_SINK_CREDENTIALS (else, for S3, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY).
            """)
    var sinkCredentials: String?
    @Option(help: "Compress segments sent to an http:// or s3:// sink: none, zstd or gzip (default none).")
    var compression: String?
    // Numbers are taken as given, also negative ones (`--quota-mb -1`), so that validation
    // names what is wrong with them rather than the parser saying a value is missing.
    @Option(parsing: .unconditional, help: "The most bytes the spool keeps, in MiB.") var quotaMb = 64
    @Option(parsing: .unconditional, help: "Seal a segment at this size, in KiB.") var segmentKb = 1024
    @Option(parsing: .unconditional, help: "The background budget, in seconds.") var budget = 30.0
    @Option(parsing: .unconditional, help: "How long before the deadline uploads are told to stop, in seconds.")
    var lead = 5.0
    @Option(
        help: """
            Also read lines from a Unix datagram socket at this path (64 KiB a datagram), or from \
            the one systemd passed as fd://NAME (FileDescriptorName=; see log-uploader.socket).
            """)
    var datagramSocket: String?
    @Option(
        help: """
            Also accept acknowledged batches on a Unix stream socket at this path (see README), or \
            on the one systemd passed as fd://NAME.
            """)
    var ingestSocket: String?
    @Option(help: "Listen for overtimectl at this path, or on the socket systemd passed as fd://NAME.")
    var controlSocket: String?
    @Option(
        parsing: .unconditional,
        help: """
            Also upload every N seconds, as a scheduled request that waits for a default route \
            when the sink is on the network: 0 (only on background and stop), or 0.1 to 31536000.
            """)
    var uploadInterval = 30.0
    @Option(help: "The schedule of the periodic upload (SQLite; default: schedule.db in the spool folder).")
    var schedule: String?
    @Option(
        parsing: .unconditional,
        help: """
            Print a progress line every N seconds: 0 (only at the end), or 0.1 to 86400; default: \
            1 when stderr is a terminal, else 0, so a journal gets the final line and an idle \
            daemon no wake-ups.
            """)
    var progressInterval: Double?
    @Option(
        help: "HTTP statuses that dead-letter a segment, comma-separated (default 400,411,413,414,415,422).")
    var permanentStatuses: String?
    @Flag(help: "Terminate (and upload) when stdin closes.") var exitOnEof = false
    @Option(
        help:
            "Serve GET /metrics for Prometheus at ADDR:PORT (a port alone: on loopback); off by default. `overtimectl metrics` prints them either way."
    )
    var metricsListen: String?
    @Flag(
        inversion: .prefixedNo,
        help: """
            Let the system move the lifecycle: logind's sleep and shutdown (when a system bus exists: \
            the spool is uploaded inside the delay logind grants before the system sleeps) and the \
            kernel's memory pressure (memory warnings).
            """)
    var systemEvents = true

    func validate() throws {
        if sink.contains("://"),
            !["http://", "https://", "s3://", "syslog://", "relp://"].contains(where: sink.hasPrefix)
        {
            throw ValidationError(
                "a sink is a folder, an http(s):// or s3:// URL, syslog://host:port or relp://host:port; got '\(HTTPSink.redacting(sink))'"
            )
        }
        if sink.hasPrefix("s3://") {
            do {
                _ = try S3SinkConfiguration(url: sink, credentials: S3Credentials(accessKeyID: "", secretAccessKey: ""))
            } catch {
                throw ValidationError("\(error)")
            }
        }
        if let compression {
            guard SegmentEncoding(name: compression) != nil else {
                throw ValidationError("--compression is none, zstd or gzip; got '\(compression)'")
            }
            guard ["http://", "https://", "s3://"].contains(where: sink.hasPrefix) else {
                throw ValidationError("--compression applies to http(s):// and s3:// sinks")
            }
        }
        if sink.hasPrefix("syslog://") || sink.hasPrefix("relp://"), hostAndPort() == nil {
            throw ValidationError("expected syslog://host:port or relp://host:port; got '\(HTTPSink.redacting(sink))'")
        }
        if let metricsListen {
            do {
                _ = try MetricsListenAddress(parsing: metricsListen)
            } catch {
                throw ValidationError("--metrics-listen: \(error)")
            }
        }
        // Written so that NaN fails each test: every comparison with it is false.
        let year = 86_400.0 * 365
        if !(budget > 0 && budget <= year) {
            throw ValidationError("--budget is a number of seconds above 0, at most \(Int(year)); got \(budget)")
        }
        if !(lead >= 0 && lead < budget) {
            throw ValidationError("--lead is a number of seconds from 0 to below --budget (\(budget)); got \(lead)")
        }
        // Bounded so that the byte counts cannot overflow (MiB and KiB are shifted into bytes).
        if !(1...16_777_216).contains(quotaMb) {
            throw ValidationError("--quota-mb is between 1 and 16777216 (16 TiB); got \(quotaMb)")
        }
        if !(4...1_048_576).contains(segmentKb) {
            throw ValidationError("--segment-kb is between 4 and 1048576 (1 GiB); got \(segmentKb)")
        }
        if quotaMb << 20 < 2 * (segmentKb << 10) {
            throw ValidationError(
                "--quota-mb (\(quotaMb) MiB) must hold at least two segments of --segment-kb (\(segmentKb) KiB)")
        }
        if sink.isEmpty {
            throw ValidationError("--sink is empty: a folder, or an http(s)://, s3://, relp:// or syslog URL")
        }
        if !sink.contains("://") {
            // A folder sink: one that exists must be a folder (a file or a device never is).
            var status = stat()
            if stat(sink, &status) == 0, status.st_mode & S_IFMT != S_IFDIR {
                throw ValidationError(
                    "--sink \(sink) is not a folder (a file or a device); name a folder to store segments in")
            }
        }
        if sink.hasPrefix("http://") || sink.hasPrefix("https://"), let problem = Self.urlProblem(sink) {
            throw ValidationError("--sink \(HTTPSink.redacting(sink)): \(problem)")
        }
        if !(uploadInterval == 0 || (uploadInterval >= 0.1 && uploadInterval <= year)) {
            throw ValidationError(
                "--upload-interval is 0 or between 0.1 (the scheduler's shortest interval) and \(Int(year)) seconds; got \(uploadInterval)"
            )
        }
        // The floor keeps a line a tenth of a second apart at most: below it the printing
        // would be all the daemon does.
        if let progressInterval, !(progressInterval == 0 || (progressInterval >= 0.1 && progressInterval <= 86_400)) {
            throw ValidationError("--progress-interval is 0 or between 0.1 and 86400 seconds; got \(progressInterval)")
        }
        for (option, value) in [
            ("--datagram-socket", datagramSocket), ("--ingest-socket", ingestSocket),
            ("--control-socket", controlSocket),
        ] {
            if let name = value.flatMap({ SocketEndpoint(argument: $0).inheritedName }),
                !SocketEndpoint.isValidName(name)
            {
                throw ValidationError(
                    "\(option) fd://NAME takes a socket's FileDescriptorName= (1 to 255 printable characters but ':'); got '\(value ?? "")'"
                )
            }
        }
        if let permanentStatuses, parsedStatuses(permanentStatuses) == nil {
            throw ValidationError("--permanent-statuses takes HTTP statuses 400...599, comma-separated")
        }
    }

    /// What is wrong with an http(s):// URL, or `nil`: found at start, not by retrying an
    /// upload that can never succeed for the whole budget.
    static func urlProblem(_ url: String) -> String? {
        guard let scheme = url.firstRange(of: "://") else { return "not a URL" }
        let rest = url[scheme.upperBound...]
        if rest.contains(where: { $0.isWhitespace || $0.asciiValue.map { $0 < 0x20 || $0 == 0x7F } == true }) {
            return "spaces or control characters (percent-encode them)"
        }
        var authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        if !authority.contains("@"), authority.contains(":"), rest.dropFirst(authority.count).contains("@") {
            return "the user or password holds '/', '?' or '#': percent-encode them (%2F, %3F, %23)"
        }
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        var host = authority
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return "an IPv6 address without its ']'" }
            host = authority[...close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let port = Int(after.dropFirst()), (1...65535).contains(port) else {
                    return "the port is not a number from 1 to 65535"
                }
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            guard let port = Int(authority[authority.index(after: colon)...]), (1...65535).contains(port) else {
                return "the port is not a number from 1 to 65535"
            }
        }
        return host.isEmpty ? "no host" : nil
    }

    func run() throws {
        do {
            try runDaemon()
        } catch let error as ExitCode {
            throw error
        } catch {
            FileOutput.standardError("log-uploader: cannot start: \(error)")
            throw ExitCode(Self.startFailureStatus(error))
        }
    }

    /// sysexits for what stops a start, so that `Restart=on-failure` and
    /// `RestartPreventExitStatus=` can tell them apart: 75 (temporary) for what another
    /// process holds (the spool, a socket in use), 78 (configuration) for what the service
    /// manager was to pass (an fd:// socket) or an address that is not this machine's, 73
    /// (cannot create) for a path that cannot be ours (a file, a link, a read-only or
    /// missing folder).
    static func startFailureStatus(_ error: any Error) -> Int32 {
        let text = "\(error)"
        if text.contains("is in use") { return 75 }
        if error is MetricsExportError || text.contains("fd://") || text.contains("passed as '")
            || text.contains("systemd passed")
        {
            return 78
        }
        return 73
    }

    private func runDaemon() throws {
        // Before anything sizes itself by it (connection caps are an eighth of the limit).
        DescriptorBudget.raiseSoftLimit()
        // Before the spool and the uploader make their counters: those made earlier record nowhere.
        let metrics = PrometheusExporter()
        MetricsSystem.bootstrap(metrics.factory)
        if sink.hasPrefix("http://") || sink.hasPrefix("https://"), let unavailable = HTTPSink.libcurlUnavailable {
            FileOutput.standardError("log-uploader: an HTTP sink needs libcurl (Debian: libcurl4): \(unavailable)")
            throw ExitCode(69)  // EX_UNAVAILABLE
        }
        if sink.hasPrefix("s3://"), let unavailable = S3Sink.librariesUnavailable {
            FileOutput.standardError(
                "log-uploader: an S3 sink needs libcurl and libcrypto (Debian: libcurl4, libssl3): \(unavailable)")
            throw ExitCode(69)
        }
        if let encoding = compression.flatMap(SegmentEncoding.init(name:)),
            let unavailable = encoding.libraryUnavailable
        {
            FileOutput.standardError("log-uploader: --compression \(encoding) cannot load its library: \(unavailable)")
            throw ExitCode(69)
        }
        let s3 = try sink.hasPrefix("s3://") ? s3Configuration() : nil
        if sink.hasPrefix("relp://"), let unavailable = RELPSink.librelpUnavailable {
            FileOutput.standardError("log-uploader: a RELP sink needs librelp (Debian: librelp0): \(unavailable)")
            throw ExitCode(69)
        }
        var spoolOptions = SpoolConfiguration()
        spoolOptions.quotaBytes = quotaMb << 20
        spoolOptions.segmentBytes = segmentKb << 10
        let store = try openSpool(spool, spoolOptions)
        let writer = SpoolLogWriter(spool: store)
        LoggingSystem.bootstrap { label in
            var console = StreamLogHandler.standardError(label: label)
            console.logLevel = .notice
            return MultiplexLogHandler([console, SpoolLogHandler(label: label, writer: writer)])
        }
        let logger = Logger(label: "log-uploader")
        if !store.recovery.isClean || store.recovery.startedNewStream {
            print("recovered the spool: \(store.recovery)")
        }

        var configuration = RuntimeConfiguration()
        configuration.backgroundBudget = .milliseconds(Int(budget * 1000))
        configuration.expirationLeadTime = .milliseconds(Int(lead * 1000))
        configuration.controlSocket = controlSocket.map(SocketEndpoint.init(argument:))
        let runtime = try Runtime(configuration: configuration)
        // A start that fails from here on still runs the loop to its end: it removes the
        // control socket and everything else the runtime holds, and leaves nothing behind.
        var running = false
        defer {
            if !running {
                runtime.requestTermination()
                runtime.run()
            }
        }
        if let endpoint = try metrics.serve(
            on: runtime, listeningAt: metricsListen.map { try MetricsListenAddress(parsing: $0) })
        {
            logger.notice("metrics at \(endpoint.url)")
        }
        let uploader = LogUploader(runtime: runtime, spool: store, sink: try makeSink(runtime, s3: s3))
        uploader.start()
        let scheduler = uploadInterval > 0 ? try schedulePeriodicUpload(uploader, runtime) : nil
        // Moving the dead letters back renames and syncs files: done off the loop.
        let redriving = SerialWorkQueue(name: "log-redrive")
        runtime.addControlCommand("redrive") { _, reply in
            redriving.async {
                do {
                    let count = try store.redriveDeadLetters()
                    if count > 0 { uploader.drainInGrant(reason: "redrive") }
                    reply(.success("\(count) dead-lettered segments queued for upload"))
                } catch {
                    reply(.failure(ControlCommandError("\(error)")))
                }
            }
        }

        let input = LineInput(spool: store)
        input.readStandardInput { if exitOnEof { runtime.requestTermination() } }
        if let datagramSocket { try input.readDatagrams(from: SocketEndpoint(argument: datagramSocket)) }
        let ingest = try ingestSocket.map {
            try SpoolIngestServer(endpoint: SocketEndpoint(argument: $0), spool: store)
        }
        if let warning = ingestSocket.flatMap({ SocketEndpoint(argument: $0).path })
            .flatMap(SocketPathClaim.sharedFolderWarning(for:))
        {
            logger.warning("ingest socket: \(warning)")
        }
        let unused = SocketEndpoint.untakenInheritedNames
        if !unused.isEmpty {
            logger.warning(
                "systemd passed sockets no option names, so nothing answers on them: \(unused.map { "fd://\($0)" }.joined(separator: ", "))"
            )
        }
        // On termination: what the inputs already hold goes into the spool, and into the final drain.
        // Waits for the log writer off the loop (a write and its sync).
        let stopping = SerialWorkQueue(name: "log-upload-stop")
        let token = runtime.observe { event in
            guard event == .willTerminate else { return }
            let id = runtime.beginBackgroundTask(name: "read-input-to-end")
            input.readToEnd {
                ingest?.stop()
                // Its own lines from here on go to stderr only: the stop must not leave them
                // behind to upload; what was logged so far goes into this drain.
                writer.stopSpooling()
                stopping.async {
                    writer.flush()
                    // Its own lines never hold a stop (an outage would keep it for the whole
                    // budget for the line saying it stops): they wait for the next run.
                    if store.holdsProducerLines() {
                        uploader.drainInGrant(reason: "input read to its end")
                    } else if store.pendingLines > 0 {
                        FileOutput.standardError(
                            "log-uploader: nothing of the producers' waits; the daemon's own \(store.pendingLines) lines wait for the next run"
                        )
                    }
                    runtime.endBackgroundTask(id)
                }
            }
        }
        let system = systemEvents ? startSystemMonitors(runtime) : nil
        let progress = Progress(runtime: runtime, spool: store, uploader: uploader, input: input)
        let interval = progressInterval ?? (isatty(STDERR_FILENO) != 0 ? 1 : 0)
        if interval > 0 { progress.every(seconds: interval) }

        let room = DescriptorBudget.room(
            ingest: ingestSocket != nil, control: controlSocket != nil, metrics: metricsListen != nil,
            uploads: UploaderConfiguration().maximumUploadsInFlight, systemEvents: systemEvents)
        if let shortage = DescriptorBudget.check(room: room) {
            FileOutput.standardError("log-uploader: \(shortage)")
            throw ExitCode(71)  // EX_OSERR
        }
        if uploadInterval == 0 {
            logger.warning(
                "uploads only on background and stop: once the spool holds --quota-mb, the oldest lines are dropped (counted on the progress line)"
            )
        }
        running = true
        runtime.run()  // until terminated: SIGTERM, or stdin closing with --exit-on-eof
        withExtendedLifetime(token) {}
        withExtendedLifetime(scheduler) {}
        withExtendedLifetime(system) {}
        ingest?.stop()
        writer.flush()
        progress.print()
        let left = store.sealedSegments
        if !left.isEmpty, store.holdsProducerLines() {
            FileOutput.standardError(
                "log-uploader: stopped with \(left.count) segments (\(left.reduce(0) { $0 + $1.records }) lines) "
                    + "not uploaded; the next run uploads them")
            throw ExitCode(3)
        }
    }

    /// logind's sleep and shutdown (a system bus that is not there yet waited for) and the kernel's memory
    /// pressure, moving `runtime`. Their lines go to stderr only: a sleep must not leave the
    /// daemon's own notices behind in the spool it is emptying.
    private func startSystemMonitors(_ runtime: Runtime) -> (LogindMonitor, MemoryPressureMonitor) {
        var logger = Logger(label: "log-uploader.system") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = .notice
        let memory = MemoryPressureMonitor(runtime: runtime, logger: logger)
        do {
            try memory.start()
        } catch {
            logger.notice("memory warnings from the kernel: off (\(error))")
        }
        let logind = LogindMonitor(runtime: runtime, logger: logger)
        do {
            try logind.start()
        } catch {
            logger.notice("sleep and shutdown from logind: off (\(error))")
        }
        return (logind, memory)
    }

    /// The periodic upload (``UploadSchedule``) in a schedule at `--schedule` (by default in
    /// the spool folder, whose lock already keeps it to one process).
    private func schedulePeriodicUpload(_ uploader: LogUploader, _ runtime: Runtime) throws -> Scheduler {
        let opened = Result { () throws(SchedulerError) in
            try Scheduler(
                runtime: runtime, configuration: SchedulerConfiguration(storePath: schedule ?? spool + "/schedule.db"))
        }
        if case .failure(let error) = opened, error.code == .storeInUse {
            FileOutput.standardError("log-uploader: \(error)")
            throw ExitCode(75)
        }
        let scheduler = try opened.get()
        if let aside = scheduler.recovery.movedAside {
            print("the schedule was damaged: moved aside to \(aside)")
        }
        // A folder needs no network; any other sink does.
        let requirements: Set<Requirement> = sink.contains("://") ? [.network] : []
        if let reason = LinuxConditionSource(configuration: .init(storagePath: spool)).unevaluable()[.network],
            requirements.contains(.network)
        {
            // It would never upload: say so now, not by dropping lines at the quota later.
            FileOutput.standardError("log-uploader: the network requirement cannot be told here: \(reason)")
            throw ExitCode(78)
        }
        // Kept alive by the spool, which calls it on every append.
        let upload = UploadSchedule(
            scheduler: scheduler, uploader: uploader, interval: .nanoseconds(Int64(uploadInterval * 1e9)),
            requirements: requirements, logger: Logger(label: "log-uploader"))
        try upload.register()
        try scheduler.start()
        upload.start()
        return scheduler
    }

    /// The S3 sink's configuration: the URL's, with keys from the credential (see
    /// ``credentialLine()``: `ACCESS_KEY_ID:SECRET_ACCESS_KEY[:SESSION_TOKEN]`), else the
    /// environment, and `--compression` if given. Missing or malformed keys end the program
    /// with status 64, naming where they were looked for (never their content).
    private func s3Configuration() throws -> S3SinkConfiguration {
        do {
            let credentials: S3Credentials
            if let (source, line) = try credentialLine() {
                let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
                guard parts.count >= 2, !parts[0].isEmpty, !parts[1].isEmpty else {
                    FileOutput.standardError(
                        "log-uploader: \(source) does not hold ACCESS_KEY_ID:SECRET_ACCESS_KEY[:SESSION_TOKEN] on its first line"
                    )
                    throw ExitCode(64)
                }
                credentials = S3Credentials(
                    accessKeyID: parts[0], secretAccessKey: parts[1], sessionToken: parts.count > 2 ? parts[2] : nil)
            } else {
                credentials = try S3Credentials.fromEnvironment()
            }
            var configuration = try S3SinkConfiguration(url: sink, credentials: credentials)
            if let encoding = compression.flatMap(SegmentEncoding.init(name:)) { configuration.encoding = encoding }
            return configuration
        } catch let error as ExitCode {
            throw error
        } catch {
            FileOutput.standardError("log-uploader: \(error)")
            throw ExitCode(64)
        }
    }

    /// The sink's credential — `--sink-credentials`, systemd's credential
    /// `sink-credentials` ($CREDENTIALS_DIRECTORY, from `LoadCredential=`), or
    /// `LOG_UPLOADER_SINK_CREDENTIALS`, in that order — as its first line and where it came
    /// from; `nil` when none is given. A `--sink-credentials` file that cannot be read ends
    /// the program with status 64, naming the file.
    func credentialLine() throws -> (source: String, line: String)? {
        var text: String?
        var source = ""
        if let sinkCredentials {
            source = sinkCredentials
            text = Self.contents(of: sinkCredentials)
            if text == nil {
                FileOutput.standardError("log-uploader: cannot read --sink-credentials \(sinkCredentials)")
                throw ExitCode(64)
            }
        } else if let folder = getenv("CREDENTIALS_DIRECTORY").map({ String(cString: $0) }),
            let credential = Self.contents(of: folder + "/sink-credentials")
        {
            (source, text) = ("$CREDENTIALS_DIRECTORY/sink-credentials", credential)
        } else if let variable = getenv("LOG_UPLOADER_SINK_CREDENTIALS").map({ String(cString: $0) }) {
            (source, text) = ("LOG_UPLOADER_SINK_CREDENTIALS", variable)
        }
        guard let text else { return nil }
        return (source, text.split(whereSeparator: \.isNewline).first.map(String.init) ?? "")
    }

    /// The http(s):// sink's URL with the user and password from the credential (see
    /// ``credentialLine()``: `user:password`) when the URL names none. A credential that
    /// holds no `user:password` ends the program with status 64, naming where it came from.
    func sinkURLWithCredentials() throws -> String {
        guard let scheme = sink.firstRange(of: "://") else { return sink }
        let authority = sink[scheme.upperBound...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard !authority.contains("@") else { return sink }  // the URL names its own
        guard let (source, line) = try credentialLine() else { return sink }
        guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else {
            FileOutput.standardError("log-uploader: \(source) does not hold user:password on its first line")
            throw ExitCode(64)
        }
        let user = Self.percentEncoded(line[..<colon])
        let password = Self.percentEncoded(line[line.index(after: colon)...])
        return String(sink[..<scheme.upperBound]) + "\(user):\(password)@" + String(sink[scheme.upperBound...])
    }

    /// A small file's text, or `nil`.
    private static func contents(of path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 65_536 {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += chunk.prefix(count)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `text` with every byte but RFC 3986's unreserved ones percent-encoded (user-info).
    private static func percentEncoded(_ text: Substring) -> String {
        var encoded = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                encoded.append(Character(UnicodeScalar(byte)))
            default:
                let hex = Array("0123456789ABCDEF")
                encoded += "%" + String(hex[Int(byte >> 4)]) + String(hex[Int(byte & 0xF)])
            }
        }
        return encoded
    }

    private func makeSink(_ runtime: Runtime, s3: S3SinkConfiguration?) throws -> any LogSink {
        if let s3 { return try S3Sink(configuration: s3, runtime: runtime, logger: Logger(label: "log-uploader")) }
        if let (host, port) = hostAndPort() {
            return sink.hasPrefix("relp://")
                ? RELPSink(host: host, port: port, appName: "log-uploader")
                : SyslogSink(host: host, port: port, appName: "log-uploader")
        }
        if sink.contains("://") {
            var options = HTTPSinkConfiguration()
            if let permanentStatuses, let statuses = parsedStatuses(permanentStatuses) {
                options.permanentStatuses = statuses
            }
            if let encoding = compression.flatMap(SegmentEncoding.init(name:)) { options.encoding = encoding }
            return HTTPSink(baseURL: try sinkURLWithCredentials(), runtime: runtime, configuration: options)
        }
        return DirectorySink(root: sink)
    }
}

/// Opens the spool; another process holding it ends this one with status 75 and its PID.
func openSpool(_ path: String, _ options: SpoolConfiguration = SpoolConfiguration()) throws -> Spool {
    let error: SpoolError
    do {
        return try Spool(directory: path, configuration: options, clock: SystemClock())
    } catch let failure {
        error = failure
    }
    guard case .locked(let path, let holder) = error else { throw error }
    let who = holder.map { "process \($0)" } ?? "another process"
    FileOutput.standardError("log-uploader: the spool \(path) is in use by \(who); one process per spool")
    throw ExitCode(75)
}

extension Run {
    /// `(host, port)` of a `syslog://host:port` or `relp://host:port` sink.
    func hostAndPort() -> (String, Int)? {
        guard let scheme = ["syslog://", "relp://"].first(where: sink.hasPrefix) else { return nil }
        let address = sink.dropFirst(scheme.count)
        guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]),
            (1...65535).contains(port), colon > address.startIndex
        else { return nil }
        return (String(address[..<colon]), port)
    }

    func parsedStatuses(_ text: String) -> Set<Int>? {
        let statuses = text.split(separator: ",").map { Int($0.trimmingPrefix(" ")) }
        guard !statuses.isEmpty, statuses.allSatisfy({ $0.map { (400...599).contains($0) } ?? false }) else {
            return nil
        }
        return Set(statuses.compactMap { $0 })
    }
}

struct Redrive: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "redrive",
        abstract: "Queue the spool's dead-lettered segments for upload again (the daemon must be stopped).",
        discussion: """
            With the daemon running, use its control socket instead: overtimectl call redrive.
            The next run uploads them first, under their own names.
            """)

    @Option(help: "The spool folder.") var spool = "log-uploader/spool"

    func run() throws {
        SignalHandling.default.unblockOnThisThread()  // no runtime: the signals' defaults
        let store = try openSpool(spool)
        print("\(try store.redriveDeadLetters()) dead-lettered segments queued for upload")
    }
}

/// A scheduled upload that could not store every sealed segment (it is retried).
struct UploadLeftSegments: Error, CustomStringConvertible {
    let count: Int
    let lastError: String?
    var description: String { "\(count) segments not uploaded" + (lastError.map { ": \($0)" } ?? "") }
}

/// Writes a line to standard error.
enum FileOutput {
    static func standardError(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }
}

struct Dump: ParsableCommand {
    static let configuration = CommandConfiguration(
        // Named here: a name derived from the type costs a reflection of it at every start.
        commandName: "dump",
        abstract: "Print the records of segment files (spooled .seg or uploaded .log).")

    @Argument(help: "Segment files.") var files: [String]

    func run() throws {
        SignalHandling.default.unblockOnThisThread()  // no runtime: the signals' defaults
        var problems = 0
        for file in files {
            var status = stat()
            if stat(file, &status) == 0, status.st_mode & S_IFMT == S_IFDIR {
                print("\(file): a folder; dump takes segment files (\(file)/segments/*.seg, or uploaded .log files)")
                problems += 1
                continue
            }
            guard let bytes = readFile(file) else {
                print("\(file): cannot read")
                problems += 1
                continue
            }
            guard !bytes.isEmpty else {
                print("\(file): empty, not a segment")
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
