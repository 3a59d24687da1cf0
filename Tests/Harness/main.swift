// A child process for tests of behaviour that ends a process: `OvertimeTestHarness <scenario>`.
// Each scenario prints what a test checks; the tests start it and read its output and status.
import Dispatch
import Logging
import Overtime
import OvertimeLogUploader
import OvertimeScheduler
import OvertimeSupport
import OvertimeTesting

#if canImport(Glibc)
    import Glibc
#endif

func say(_ line: String) {
    print(line)
    fflush(nil)  // all streams; `stdout` is a C global Swift 6 will not touch
}

/// A grant never ended, with `.exitProcess(status: 42)`: the report comes first, then exit 42.
func exitPolicy() throws {
    let clock = ManualClock()
    var configuration = RuntimeConfiguration()
    configuration.backgroundBudget = .seconds(30)
    configuration.expirationLeadTime = .seconds(5)
    configuration.terminationPolicy = .exitProcess(status: 42)
    configuration.onTermination = { report in say("REPORT \(report)") }
    let runtime = try Runtime(configuration: configuration, clock: clock)
    runtime.start()
    _ = runtime.beginBackgroundTask(name: "never-ended") { say("EXPIRING") }
    runtime.requestBackground()
    clock.advance(by: .seconds(30))
    say("STILL RUNNING")  // must never be printed
}

/// An expiration handler that blocks the loop: the watchdog names it and exits 70.
func watchdog() throws {
    var configuration = RuntimeConfiguration()
    configuration.backgroundBudget = .milliseconds(600)
    configuration.expirationLeadTime = .milliseconds(300)
    configuration.watchdogTimeout = .milliseconds(300)
    let runtime = try Runtime(configuration: configuration)
    _ = runtime.beginBackgroundTask(name: "blocking") {
        say("HANDLER BLOCKS")
        sleep(30)
        say("HANDLER RETURNED")  // must never be printed
    }
    runtime.requestBackground()
    runtime.run()
    say("RUN RETURNED")  // must never be printed
}

/// A daemon moved from outside (signals, systemd, control socket). Prints `EVENT <event>
/// <state>` for every event, `READY` once the loop runs and `RUN RETURNED` at the end.
/// Environment: HARNESS_BUDGET_MS, HARNESS_LEAD_MS; HARNESS_ON_TERMINATE=hold (a grant
/// never ended) or flush:<ms> (a grant ended after <ms>); HARNESS_RELOAD_BLOCK_MS (a
/// reload observer holds the loop that long); HARNESS_GRANTS (that many grants begun at
/// start, never ended); HARNESS_SELF_TERMINATE (the program asks for its own termination
/// once ready); HARNESS_REPEAT_GRACE_MS (how long a repeated termination request is the
/// same request); OVERTIME_CONTROL_SOCKET.
func daemon() throws {
    func milliseconds(_ name: String, _ fallback: Int) -> Duration {
        .milliseconds(getenv(name).flatMap { Int(String(cString: $0)) } ?? fallback)
    }
    func text(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }
    var configuration = RuntimeConfiguration()
    configuration.backgroundBudget = milliseconds("HARNESS_BUDGET_MS", 30_000)
    configuration.expirationLeadTime = milliseconds("HARNESS_LEAD_MS", 5_000)
    configuration.repeatedTerminationGrace = milliseconds("HARNESS_REPEAT_GRACE_MS", 1_000)
    configuration.onTermination = { say("REPORT \($0)") }
    configuration.controlSocket = text("OVERTIME_CONTROL_SOCKET").map(SocketEndpoint.init(argument:))
    let setup = milliseconds("HARNESS_SETUP_MS", 0)
    if setup > .zero {
        // Started as systemd starts a service: no signal blocked (the tests' spawner blocks some).
        var none = sigset_t()
        sigemptyset(&none)
        pthread_sigmask(SIG_SETMASK, &none, nil)
    }
    let runtime = try Runtime(configuration: configuration)
    for index in 0..<(Int(text("HARNESS_GRANTS") ?? "") ?? 0) {
        _ = runtime.beginBackgroundTask(name: "job-\(index)") { say("EXPIRED job-\(index)") }
    }
    let onTerminate = text("HARNESS_ON_TERMINATE") ?? ""
    let reloadBlock = milliseconds("HARNESS_RELOAD_BLOCK_MS", 0)
    let token = runtime.observe { event in
        say("EVENT \(event) \(runtime.state)")
        if event == .reload, reloadBlock > .zero {
            usleep(
                UInt32(
                    reloadBlock.components.seconds * 1_000_000 + reloadBlock.components.attoseconds / 1_000_000_000_000)
            )
        }
        guard event == .willTerminate else { return }
        if onTerminate == "hold" {
            _ = runtime.beginBackgroundTask(name: "final-flush") { say("EXPIRED final-flush") }
        } else if onTerminate.hasPrefix("flush:"), let ms = Int(onTerminate.dropFirst(6)) {
            let id = runtime.beginBackgroundTask(name: "final-flush")
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(ms)) {
                say("FLUSHED")
                runtime.endBackgroundTask(id)
            }
        }
    }
    // A command that answers later ("hold": once "release" comes) and one that replies
    // twice, for the control socket's tests of commands that answer off the loop.
    let held = Locked<[@Sendable (Result<String, ControlCommandError>) -> Void]>([])
    runtime.addControlCommand("hold") { arguments, reply in
        held.withLock { $0.append(reply) }
        say("HOLDING \(arguments.joined(separator: " "))")
    }
    runtime.addControlCommand("release") {
        let replies = held.withLock { replies in
            defer { replies = [] }
            return replies
        }
        DispatchQueue.global().async {
            for reply in replies { reply(.success("released")) }
        }
        return .success("releasing \(replies.count)")
    }
    runtime.addControlCommand("twice") { _, reply in
        reply(.success("first"))
        reply(.failure(ControlCommandError("second")))
    }
    // A timer that is always due: every HARNESS_BUSY_TIMER_US, its body busy for 2 ms.
    if let interval = text("HARNESS_BUSY_TIMER_US").flatMap({ Int($0) }) {
        @Sendable func tick(at instant: MonotonicInstant) {
            runtime.schedule(at: instant) {
                let until = runtime.clock.now + .milliseconds(2)
                while SystemClock().now < until {}
                tick(at: instant + .microseconds(interval))
            }
        }
        tick(at: runtime.clock.now)
    }
    let selfTerminate = text("HARNESS_SELF_TERMINATE") != nil
    runtime.execute {
        say("READY")
        if selfTerminate { runtime.requestTermination() }
    }
    if setup > .zero {
        // Work between making the runtime and running it (opening stores, reading
        // configuration), as real daemons do.
        say("CREATED")
        usleep(UInt32(setup.components.seconds * 1_000_000 + setup.components.attoseconds / 1_000_000_000_000))
    }
    runtime.run()
    withExtendedLifetime(token) {}
    say("RUN RETURNED")
}

/// A disk that fills up: RLIMIT_FSIZE caps every file at 64 KiB. Appends until the
/// spool reports the full disk, then lifts the limit, reopens the spool and prints what
/// it holds: `ACKED <n>`, `ERROR <full?> <text>`, `REOPENED <records> <last> <clean?>`.
func spoolFullDisk(_ directory: String) throws {
    signal(SIGXFSZ, SIG_IGN)  // over the limit, write fails with EFBIG instead of killing us
    var limit = rlimit(rlim_cur: 64 * 1024, rlim_max: rlim_t.max)
    setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limit)
    var options = SpoolConfiguration()
    options.segmentBytes = 1 << 20  // one segment, so it hits the file size limit
    options.quotaBytes = 4 << 20
    var spool: Spool! = try Spool(directory: directory, configuration: options, clock: SystemClock())
    var acknowledged: UInt64 = 0
    do throws(SpoolError) {
        for index in 0..<100_000 {
            acknowledged = try spool.append(
                ["line \(index) " + String(repeating: "z", count: 100)].map { Array($0.utf8) })!
                .upperBound
        }
    } catch {
        say("ERROR \(error.isDiskFull) \(error)")
    }
    say("ACKED \(acknowledged)")
    limit.rlim_cur = rlim_t.max
    setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limit)
    // After the error the spool keeps working once there is room again.
    say("AFTER \(try spool.append("after the disk had room again"))")
    try spool.sealActiveSegment()
    spool = nil  // one open spool per folder: the lock is released with it
    let reopened = try Spool(directory: directory, configuration: options, clock: SystemClock())
    var records: [SpoolRecord] = []
    for segment in reopened.sealedSegments {
        let bytes = try Array(readWholeFile(segment.path))
        records += SegmentFormat.parse(bytes).records
    }
    let contiguous = records.map(\.sequence) == Array(1...(acknowledged + 1))
    say("REOPENED \(records.count) \(records.last?.text ?? "-") \(reopened.recovery.isClean) \(contiguous)")
}

/// Four threads append batches while the file size limit makes writes fail, and after it
/// is lifted: the lines of failed batches give their numbers back, so the stream on disk
/// runs 1, 2, 3, … without a gap, and every acknowledged range names exactly its lines.
func spoolFullDiskConcurrent(_ directory: String) throws {
    signal(SIGXFSZ, SIG_IGN)
    var limit = rlimit(rlim_cur: 64 * 1024, rlim_max: rlim_t.max)
    setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limit)
    var options = SpoolConfiguration()
    options.segmentBytes = 1 << 20
    options.quotaBytes = 8 << 20
    let spool = try Spool(directory: directory, configuration: options, clock: SystemClock())
    let progress = Locked((failures: 0, lifted: false, acknowledged: [(ClosedRange<UInt64>, [String])]()))
    let writers = DispatchGroup()
    for thread in 0..<4 {
        DispatchQueue.global().async(group: writers) {
            var afterLifting = 0
            for batch in 0... {
                let lines = (0..<(1 + batch % 17)).map { "thread \(thread) batch \(batch) line \($0)" }
                let lifted = progress.withLock { $0.lifted }
                if lifted { afterLifting += 1 }
                if afterLifting > 40 { break }
                do {
                    if let range = try spool.append(lines.map { Array($0.utf8) }) {
                        progress.withLock { $0.acknowledged.append((range, lines)) }
                    }
                } catch {
                    progress.withLock { $0.failures += 1 }
                }
            }
        }
    }
    while progress.withLock({ $0.failures }) < 12 { usleep(1000) }
    limit.rlim_cur = rlim_t.max
    setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limit)
    progress.withLock { $0.lifted = true }
    writers.wait()
    try spool.sealActiveSegment()
    var records: [UInt64: String] = [:]
    var order: [UInt64] = []
    for segment in spool.sealedSegments {
        for record in SegmentFormat.parse(try readWholeFile(segment.path)).records {
            records[record.sequence] = record.text
            order.append(record.sequence)
        }
    }
    let (failures, acknowledged) = progress.withLock { ($0.failures, $0.acknowledged) }
    let contiguous = !order.isEmpty && order == Array(1...UInt64(order.count))
    let matching = acknowledged.allSatisfy { range, lines in range.map { records[$0] ?? "-" } == lines }
    let lines = acknowledged.reduce(0) { $0 + $1.1.count }
    say("CONCURRENT failures=\(failures) records=\(order.count) acknowledged=\(lines) \(contiguous) \(matching)")
}

func readWholeFile(_ path: String) throws -> [UInt8] {
    guard let file = fopen(path, "rb") else { throw SpoolError.io(operation: "fopen", path: path, errno: errno) }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while case let count = fread(&chunk, 1, chunk.count, file), count > 0 { bytes += chunk[0..<count] }
    return bytes
}

/// An uploader to kill: appends lines continuously (printing `ACK <sequence>` once each
/// batch is durable: the acknowledgement to the writer) while uploading to `url` every
/// 20 ms. With `drain` it only uploads what is spooled, prints `DRAINED` and exits.
func crashUploader(directory: String, url: String, drainOnly: Bool) throws {
    var options = SpoolConfiguration()
    options.segmentBytes = 4096
    options.segmentAge = .milliseconds(50)
    let spool = try Spool(directory: directory, configuration: options, clock: SystemClock())
    var configuration = RuntimeConfiguration()
    configuration.signalHandling = nil
    let runtime = try Runtime(configuration: configuration)
    var uploads = UploaderConfiguration()
    uploads.initialRetryDelay = .milliseconds(10)
    uploads.maximumRetryDelay = .milliseconds(50)
    // An s3:// URL: an S3 sink with credentials from the environment; else an HTTP sink.
    let sink: any LogSink =
        url.hasPrefix("s3://")
        ? try S3Sink(
            configuration: S3SinkConfiguration(url: url, credentials: .fromEnvironment()), runtime: runtime)
        : HTTPSink(baseURL: url, runtime: runtime)
    let uploader = LogUploader(runtime: runtime, spool: spool, sink: sink, configuration: uploads)
    uploader.start()
    runtime.start()
    if !drainOnly {
        let recovered = spool.checkpoint.sequence
        Task {
            var reported = recovered
            while (try? await runtime.sleep(for: .milliseconds(20))) != nil {
                uploader.drainInGrant(reason: "interval")
                // An upload ended while this process ran (the checkpoint moved past it): the
                // test lets some children run until then before it kills them.
                let sequence = spool.checkpoint.sequence
                if sequence != reported {
                    reported = sequence
                    say("UPLOADED \(sequence)")
                }
            }
        }
    }
    if drainOnly {
        while spool.pendingLines > 0 {
            uploader.drainInGrant(reason: "drain")
            while uploader.isDraining { usleep(1000) }
        }
        say("DRAINED \(spool.checkpoint.sequence)")
        // Stop the runtime before exit: exit's handlers (libcrypto's cleanup among them)
        // must not run under a loop thread that may still use them.
        uploader.stop()
        runtime.requestTermination()
        runtime.waitUntilTerminated()
        return
    }
    var generator = SystemRandomNumberGenerator()
    while true {
        let count = Int.random(in: 1...20, using: &generator)
        let lines = (0..<count).map { _ in Array("crash test line \(UInt64.random(in: 0...UInt64.max))".utf8) }
        if let range = try spool.append(lines) { say("ACK \(spool.streamID) \(range.upperBound)") }
        usleep(UInt32.random(in: 0...2000, using: &generator))
    }
}

/// A runtime and a scheduler on `<dir>/schedule.db`, runs due together started at once.
func schedulerDaemon(
    directory: String, configure: (inout SchedulerConfiguration) -> Void = { _ in }
) throws -> (Runtime, Scheduler) {
    var configuration = RuntimeConfiguration()
    configuration.watchdogTimeout = nil
    let runtime = try Runtime(configuration: configuration)
    var options = SchedulerConfiguration(storePath: directory + "/schedule.db")
    options.startSpacing = .zero
    configure(&options)
    return (runtime, try Scheduler(runtime: runtime, configuration: options))
}

/// A scheduler daemon for the crash test: five one-shot requests and one repeating every
/// 100 ms, in `<dir>/schedule.db`. Each run appends `START id run attempt`, works a random
/// few milliseconds off the loop, appends `DONE id run attempt` (each line fsynced to
/// `<dir>/effects.log`), then completes. Killed with -9 at random moments by the test.
func schedulerCrash(directory: String) throws {
    let (runtime, scheduler) = try schedulerDaemon(directory: directory)
    let effects = open(directory + "/effects.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
    @Sendable func effect(_ line: String) {
        _ = writeAll(effects, Array((line + "\n").utf8), to: .file)
        fsync(effects)
    }
    let identifiers = (1...5).map { "once-\($0)" } + ["tick"]
    for identifier in identifiers {
        try scheduler.register(identifier) { task in
            effect("START \(task.identifier) \(task.runID) \(task.attempt)")
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int.random(in: 0...60))) {
                effect("DONE \(task.identifier) \(task.runID) \(task.attempt)")
                task.setTaskCompleted(success: true)
            }
        }
    }
    runtime.start()
    try scheduler.start()
    for index in 1...5 {
        var request = ScheduledTaskRequest(identifier: "once-\(index)")
        request.earliestBegin = runtime.clock.wallClockNow + .milliseconds(index * 40)
        // Kept while pending; once it has run (a finished one-shot is submitted anew under
        // every policy), not submitted again: it runs once, ever.
        guard try scheduler.history(request.identifier).isEmpty else { continue }
        try scheduler.submit(request)
    }
    var tick = ScheduledTaskRequest(identifier: "tick")
    tick.repetition = Repetition(every: .milliseconds(100))
    // A run interrupted twice in a row counts as failed; retried by the default policy it
    // would wait 60 s, longer than the test's kills last, and the tick would stop. Given up
    // instead, the tick goes on with its grid (the first interruption is still retried).
    tick.retry.maximumAttempts = 1
    try scheduler.submit(tick)
    say("READY")
    runtime.waitUntilTerminated()
    say("TERMINATED")
}

/// A scheduler daemon for the chain crash test: chains of three links
/// (`chain-K.a` → `chain-K.b` → `chain-K.c`), one after another, in `<dir>/schedule.db`.
/// Each run appends `START id run attempt <outputs handed on>` to `<dir>/effects.log`,
/// works a random 20–120 ms off the loop, appends `DONE id run attempt` (each line
/// fsynced), sets its output to what it was handed and its identifier, joined by `|`, and
/// completes; `c` submits the next chain first (unless `finishing`: the test's last run,
/// which lets the chains submitted finish). Killed with -9 at random moments by the test.
func schedulerChain(directory: String, finishing: Bool) throws {
    let (runtime, scheduler) = try schedulerDaemon(directory: directory)
    let effects = open(directory + "/effects.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
    @Sendable func effect(_ line: String) {
        _ = writeAll(effects, Array((line + "\n").utf8), to: .file)
        fsync(effects)
    }
    /// Submits chain `number` unless it was (a finished link submitted again would run again).
    @Sendable func submitChain(_ number: Int) throws {
        guard try scheduler.workInfo("chain-\(number).a") == nil else { return }
        var links: [ScheduledTaskRequest] = []
        for (link, prerequisite) in [("a", nil), ("b", "a"), ("c", "b")] as [(String, String?)] {
            var request = ScheduledTaskRequest(identifier: "chain-\(number).\(link)")
            // A link interrupted twice in a row is retried after the shortest backoff (10 s),
            // not the default 30 s, doubled.
            request.retry.initialDelay = RetryPolicy.minimumDelay
            request.retry.maximumDelay = RetryPolicy.minimumDelay
            if let prerequisite { request.prerequisites = ["chain-\(number).\(prerequisite)"] }
            links.append(request)
        }
        try scheduler.submit(contentsOf: links)
    }
    try scheduler.register(prefix: "chain-") { task in
        let handed = task.prerequisiteOutputs.values.map { String(decoding: $0, as: UTF8.self) }.sorted()
        effect("START \(task.identifier) \(task.runID) \(task.attempt) \(handed.joined(separator: ","))")
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int.random(in: 20...120))) {
            effect("DONE \(task.identifier) \(task.runID) \(task.attempt)")
            try? task.setOutput(Array((handed + [task.identifier]).joined(separator: "|").utf8))
            if !finishing, task.identifier.hasSuffix(".c"), let number = Int(task.identifier.dropFirst(6).dropLast(2)) {
                try? submitChain(number + 1)
            }
            task.setTaskCompleted(success: true)
        }
    }
    runtime.start()
    try scheduler.start()
    var last = 0
    while try scheduler.workInfo("chain-\(last + 1).a") != nil { last += 1 }
    let lastFinished = try last == 0 || scheduler.workInfo("chain-\(last).c")?.state == .succeeded
    if lastFinished, !finishing { try submitChain(last + 1) }
    say("READY")
    runtime.waitUntilTerminated()
    say("TERMINATED")
}

/// A scheduler daemon for the wake-alarm test: one request that wakes the system, an hour
/// ahead, in `<dir>/schedule.db`. Says `READY` once submitted, or `REFUSED <message>` and
/// exits 1 when the submit is refused (no CAP_WAKE_ALARM).
func schedulerWake(directory: String) throws {
    let (runtime, scheduler) = try schedulerDaemon(directory: directory)
    try scheduler.register("wake") { $0.setTaskCompleted(success: true) }
    runtime.start()
    try scheduler.start()
    var request = ScheduledTaskRequest(identifier: "wake")
    request.earliestBegin = runtime.clock.wallClockNow + .seconds(3600)
    request.wakesSystem = true
    do {
        try scheduler.submit(request)
    } catch {
        say("REFUSED \(error.code): \(error.message)")
        // The loop stopped first: exit(3) runs libuv's destructors, which a loop still
        // starting its drivers would trip over.
        runtime.requestTermination()
        runtime.waitUntilTerminated()
        exit(1)
    }
    say("READY")
    runtime.waitUntilTerminated()
}

/// A scheduler daemon for the network requirement test, run in its own network namespace:
/// one request that needs the network. Each run says `RAN run attempt` and waits; told to
/// stop it says `STOPPED run attempt` and completes unsuccessfully.
func schedulerNetwork(directory: String) throws {
    var request = ScheduledTaskRequest(identifier: "upload")
    request.requirements = [.network]
    try serveOneRequest(request, in: try schedulerDaemon(directory: directory)) { task in
        say("RAN \(task.runID) \(task.attempt)")
        task.expirationHandler = {
            say("STOPPED \(task.runID) \(task.attempt)")
            task.setTaskCompleted(success: false)
        }
    }
}

/// A scheduler daemon whose power supplies are read from `<dir>/power_supply` (laid out
/// by the test) and announced by the kernel's device events only: nothing looks again
/// for an hour. One request requires external power; prints `READY`, then `RAN <run>`.
func schedulerPower(directory: String) throws {
    let daemon = try schedulerDaemon(directory: directory) { options in
        var sources = LinuxConditionSource.Configuration(storagePath: directory)
        sources.powerSupplies = directory + "/power_supply"
        options.conditions = LinuxConditionSource(configuration: sources)
        options.conditionRecheckInterval = .seconds(3600)
    }
    var request = ScheduledTaskRequest(identifier: "charge")
    request.requirements = [.externalPower]
    try serveOneRequest(request, in: daemon, handler: sayRanAndSucceed)
}

/// Linux condition sources on a runtime that runs on: one let go while it watches, one
/// stopped before its loop made its watchers (the loop held until then). Prints the netlink
/// sockets the process holds before, while the first watches, once it is let go and once
/// the second is stopped (`SOCKETS a b c d`), then makes the kernel announce a route change
/// (a link added in this process's network namespace: run it in one of its own) and prints
/// `DONE`: a watcher left listening for a source that is gone would be called back then.
func conditionsLetGo() throws {
    var configuration = RuntimeConfiguration()
    configuration.watchdogTimeout = nil
    var runtime: Runtime! = try Runtime(configuration: configuration)
    runtime.start()
    var sources = LinuxConditionSource.Configuration(storagePath: "/tmp")
    sources.readsSystemBus = false
    let before = netlinkSockets()
    var watching: LinuxConditionSource? = LinuxConditionSource(configuration: sources)
    watching?.start(runtime: runtime) {}
    runtime.waitForQueuedRequests()
    let whileWatching = netlinkSockets()
    watching = nil
    runtime.waitForQueuedRequests()
    let letGo = netlinkSockets()
    let held = DispatchSemaphore(value: 0)
    runtime.execute { held.wait() }
    let early = LinuxConditionSource(configuration: sources)
    early.start(runtime: runtime) {}
    early.stop()
    held.signal()
    runtime.waitForQueuedRequests()
    say("SOCKETS \(before) \(whileWatching) \(letGo) \(netlinkSockets())")
    let added = system("ip link add overtime-v0 type veth peer name overtime-v1 && ip link set overtime-v0 up")
    usleep(200_000)
    runtime.waitForQueuedRequests()
    runtime.requestTermination()
    runtime.waitUntilTerminated()
    // The runtime gone before the source that was stopped early: a source may outlive its
    // runtime, and its release still asks the (closed) loop to close its watchers. (The
    // loop thread lets go of the runtime a moment after it ends.)
    weak let released = runtime
    runtime = nil
    withExtendedLifetime(early) {
        while released != nil { usleep(1_000) }
    }
    say(added == 0 ? "DONE" : "NO LINK \(added)")
}

/// The netlink sockets among this process's open files.
func netlinkSockets() -> Int {
    let table = String(decoding: (try? readWholeFile("/proc/self/net/netlink").get()) ?? [], as: UTF8.self)
    let inodes = Set(
        table.split(separator: "\n").dropFirst().compactMap { $0.split(separator: " ").last.map(String.init) })
    guard let folder = opendir("/proc/self/fd") else { return -1 }
    defer { closedir(folder) }
    var count = 0
    while let entry = readdir(folder) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        var target = [UInt8](repeating: 0, count: 64)
        let length = readlink("/proc/self/fd/" + name, &target, target.count)
        guard length > 0 else { continue }
        let link = String(decoding: target.prefix(length), as: UTF8.self)  // socket:[inode]
        if link.hasPrefix("socket:["), inodes.contains(String(link.dropFirst(8).dropLast())) { count += 1 }
    }
    return count
}

/// A scheduler daemon for scripts/check-clock-steps: one one-shot request whose earliest
/// begin is 120 s of wall-clock time away. Prints `READY`, then `RAN <run>` when it runs:
/// at once when the wall clock is stepped past that time, not 120 s of waiting later.
func schedulerClockStep(directory: String) throws {
    let daemon = try schedulerDaemon(directory: directory)
    var request = ScheduledTaskRequest(identifier: "stepped")
    request.earliestBegin = daemon.0.clock.wallClockNow + .seconds(120)
    try serveOneRequest(request, in: daemon, handler: sayRanAndSucceed)
}

/// Registers `handler` for `request`, starts both, submits it, prints `READY` and runs
/// until terminated.
func serveOneRequest(
    _ request: ScheduledTaskRequest, in daemon: (Runtime, Scheduler),
    handler: @escaping @Sendable (ScheduledTask) -> Void
) throws {
    let (runtime, scheduler) = daemon
    try scheduler.register(request.identifier, handler: handler)
    runtime.start()
    try scheduler.start()
    try scheduler.submit(request)
    say("READY")
    runtime.waitUntilTerminated()
}

/// Prints `RAN <run>` and completes the task successfully.
@Sendable func sayRanAndSucceed(_ task: ScheduledTask) {
    say("RAN \(task.runID)")
    task.setTaskCompleted(success: true)
}

LoggingSystem.bootstrap(StreamLogHandler.standardError)
switch CommandLine.arguments.dropFirst().first {
case "exit-policy": try exitPolicy()
case "watchdog": try watchdog()
case "daemon": try daemon()
case "spool-full-disk": try spoolFullDisk(CommandLine.arguments[2])
case "spool-full-disk-concurrent": try spoolFullDiskConcurrent(CommandLine.arguments[2])
case "scheduler-crash": try schedulerCrash(directory: CommandLine.arguments[2])
case "scheduler-wake": try schedulerWake(directory: CommandLine.arguments[2])
case "scheduler-chain":
    try schedulerChain(
        directory: CommandLine.arguments[2], finishing: CommandLine.arguments.dropFirst(3).first == "finish")
case "scheduler-network": try schedulerNetwork(directory: CommandLine.arguments[2])
case "scheduler-power": try schedulerPower(directory: CommandLine.arguments[2])
case "scheduler-clock-step": try schedulerClockStep(directory: CommandLine.arguments[2])
case "conditions-let-go": try conditionsLetGo()
case "append-batches":
    // Batches of 1 to 3,000 lines, each line naming its batch and size; "ACK b" once stored.
    let spool = try Spool(directory: CommandLine.arguments[2], clock: SystemClock())
    var generator = SystemRandomNumberGenerator()
    for batch in 1... {
        let count = Int.random(in: 1...3_000, using: &generator)
        _ = try spool.append(
            (0..<count).map { Array("batch \(batch) of \(count) line \($0) ".utf8) + Array(repeating: 120, count: 60) })
        say("ACK \(batch)")
    }
case "crash-uploader":
    try crashUploader(
        directory: CommandLine.arguments[2], url: CommandLine.arguments[3],
        drainOnly: CommandLine.arguments.dropFirst(4).first == "drain")
default:
    say("usage: OvertimeTestHarness exit-policy|watchdog|daemon|spool-full-disk DIR")
    exit(64)
}
