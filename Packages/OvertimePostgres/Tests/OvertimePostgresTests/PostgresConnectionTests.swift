import Foundation
import Logging
import NIOConcurrencyHelpers
import Overtime
@_spi(ScheduleStore) import OvertimeScheduler
import PostgresTestServer
import Testing

@testable import OvertimePostgres

/// How a fleet's scheduler finds its database as libpq does: passwords from `PGPASSWORD`
/// and the password file, a Unix socket folder as the host, and a database that is not up
/// yet when the program starts.
@Suite("The fleet's database: reached as psql reaches it, and lost during a run", .serialized, .blocking)
struct PostgresConnectionTests {
    private static func passwordFile(_ lines: String, mode: mode_t) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pgpass-\(UUID().uuidString)").path
        try lines.write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, mode)
        return path
    }

    /// A started scheduler whose handler for `job` completes at once and counts its runs.
    private static func countingScheduler(_ configuration: SchedulerConfiguration) throws -> (
        Scheduler, NIOLockedValueBox<Int>
    ) {
        let scheduler = try Scheduler(runtime: try PostgresSchedulerTests.runtime(), configuration: configuration)
        let ran = NIOLockedValueBox(0)
        try scheduler.register("job") { task in
            ran.withLockedValue { $0 += 1 }
            task.setTaskCompleted(success: true)
        }
        try scheduler.start()
        return (scheduler, ran)
    }

    @Test func thePasswordFileIsReadAsLibpqReadsIt() throws {
        let file = try Self.passwordFile(
            """
            # comment
            other:5432:*:app:wrong
            db.example:6543:fleet:app:first\\:one
            *:*:*:app:fallback
            """, mode: 0o600)
        defer { unlink(file) }
        var configuration = try PostgresScheduleConfiguration(url: "postgres://app@db.example:6543/fleet")
        var warnings: [String] = []
        #expect(configuration.effectivePassword(["PGPASSFILE": file], warn: { warnings.append($0) }) == "first:one")
        #expect(configuration.effectivePassword(["PGPASSFILE": file, "PGPASSWORD": "env"], warn: { _ in }) == "env")
        configuration.port = 5432
        #expect(configuration.effectivePassword(["PGPASSFILE": file], warn: { _ in }) == "fallback")
        configuration.password = "given"
        #expect(configuration.effectivePassword(["PGPASSFILE": file, "PGPASSWORD": "env"], warn: { _ in }) == "given")
        #expect(warnings.isEmpty)

        chmod(file, 0o644)
        configuration.password = nil
        #expect(configuration.effectivePassword(["PGPASSFILE": file], warn: { warnings.append($0) }) == nil)
        #expect(warnings.count == 1 && warnings[0].contains("group or world access"))
        #expect(configuration.effectivePassword(["HOME": "/nonexistent"], warn: { _ in }) == nil)
    }

    @Test func aURLWithoutAPasswordUsesPGPASSWORDOrThePasswordFile() throws {
        let server = try PostgresServer(password: "s3cret")
        defer { server.stop() }
        let file = try Self.passwordFile("127.0.0.1:\(server.port):postgres:postgres:s3cret\n", mode: 0o600)
        defer { unlink(file) }
        for environment in [["PGPASSWORD": "s3cret"], ["PGPASSFILE": file], [:]] {
            var database = try PostgresScheduleConfiguration(url: "postgres://postgres@127.0.0.1:\(server.port)")
            database.passwordEnvironment = environment
            var configuration = SchedulerConfiguration(database: .postgres(database))
            configuration.startSpacing = .zero
            if environment.isEmpty {
                // No password anywhere: refused at once, saying the server asked for one.
                #expect {
                    try Scheduler(runtime: try PostgresSchedulerTests.runtime(), configuration: configuration)
                } throws: { error in
                    "\(error)".contains("password")
                }
                continue
            }
            let (scheduler, ran) = try Self.countingScheduler(configuration)
            defer {
                // Gone before the next one starts: it must not take the next one's run.
                scheduler.runtime.requestTermination()
                scheduler.runtime.waitUntilTerminated()
            }
            try scheduler.submit(ScheduledTaskRequest(identifier: "job"), ifExists: .replace)
            #expect(PostgresSchedulerTests.eventually(30) { ran.withLockedValue { $0 } == 1 }, "\(environment.keys)")
        }
    }

    @Test func aSocketFolderAsTheHostReachesTheServer() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        for (index, database) in [
            PostgresScheduleConfiguration(host: server.folder, port: server.port, username: "postgres"),
            try PostgresScheduleConfiguration(
                url: "postgres://postgres@/postgres?host=\(server.folder)&port=\(server.port)"),
        ].enumerated() {
            #expect(database.host == server.folder)
            var configuration = SchedulerConfiguration(database: .postgres(database))
            configuration.startSpacing = .zero
            let scheduler = try Scheduler(runtime: try PostgresSchedulerTests.runtime(), configuration: configuration)
            defer {
                scheduler.runtime.requestTermination()
                scheduler.runtime.waitUntilTerminated()
            }
            // Each configuration runs its own one-shot (the history keeps the other's).
            let identifier = "job.\(index)"
            try scheduler.register(prefix: "job.") { $0.setTaskCompleted(success: true) }
            try scheduler.start()
            try scheduler.submit(ScheduledTaskRequest(identifier: identifier))
            #expect(
                PostgresSchedulerTests.eventually(60) {
                    (try? scheduler.history(identifier).first?.result) == .succeeded
                }, "through \(database.serverName)")
        }
    }

    /// A program starts while its database is down: the scheduler is made and started,
    /// says what it waits for, and runs what is submitted once the database is up.
    @Test func aSchedulerMadeWhileTheDatabaseIsDownConnectsWhenItComesUp() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        try server.pause()
        let logs = CapturedLogs()
        var configuration = PostgresSchedulerTests.configuration(server)
        configuration.logger = Logger(label: "test") { _ in logs }
        let (scheduler, ran) = try Self.countingScheduler(configuration)
        defer { scheduler.runtime.requestTermination() }
        #expect(throws: SchedulerError.self) { try scheduler.submit(ScheduledTaskRequest(identifier: "job")) }
        #expect(logs.lines.contains { $0.contains("cannot be reached yet") })
        try server.start()
        #expect(
            PostgresSchedulerTests.eventually(30) {
                (try? scheduler.submit(ScheduledTaskRequest(identifier: "job"))) != nil
            })
        #expect(PostgresSchedulerTests.eventually(30) { ran.withLockedValue { $0 } == 1 })
    }

    /// A store call to a stopped server (SIGSTOP: it takes connections and never answers)
    /// ends by its one deadline, connecting and every statement included, with that said;
    /// the calls after one whose connection went unanswered fail at once, until the
    /// reconnect interval has passed; the first after it, the server going on, connects again. A deadline longer than half
    /// the runtime's watchdog is refused before anything connects.
    @Test func aCallToAStoppedDatabaseEndsByItsDeadlineWhichTheWatchdogBounds() async throws {
        let server = try PostgresServer()
        defer { server.stop() }
        var database = PostgresScheduleConfiguration(host: "127.0.0.1", port: server.port, username: "postgres")
        database.operationTimeout = .seconds(3)
        let now = WallClockInstant(nanosecondsSinceEpoch: Int64(Date().timeIntervalSince1970 * 1e9))
        let logger = Logger(label: "store") { _ in SwiftLogNoOpLogHandler() }
        let watched = ScheduleStoreContext(now: now, wallClock: { now }, logger: logger, watchdogTimeout: .seconds(4))
        await #expect {
            _ = try await ScheduleDatabase.postgres(database).openStore(watched)
        } throws: { error in
            "\(error)".contains("operationTimeout 3.0 seconds is more than half the runtime's watchdog timeout")
        }

        database.operationTimeout = .seconds(1)
        let store = try await ScheduleDatabase.postgres(database).openStore(watched)
        defer { store.close() }
        #expect(try await store.pendingCount() == 0)
        server.signalAll(SIGSTOP)
        defer { server.signalAll(SIGCONT) }
        // On the connection it has, then on a new one it cannot finish making.
        for _ in 0..<2 {
            await #expect {
                _ = try await store.pendingCount()
            } throws: { error in
                "\(error)".contains("no answer in 1.0 s")
            }
        }
        // Then at once, until the reconnect interval (5 s) has passed since that attempt.
        await #expect {
            _ = try await store.pendingCount()
        } throws: { error in
            "\(error)".contains("had no answer in 1.0 s: not connecting again for ")
        }
        server.signalAll(SIGCONT)
        #expect(await PostgresSchedulerTests.eventually(30, reading: { (try? await store.pendingCount()) == 0 }))
    }

    /// A peer that takes connections and never says a word (a stopped server, a network
    /// that drops what comes back): the store's calls do not each wait their deadline on a
    /// new connection to it, one after the other — a call queued behind a few of them did
    /// for seconds. One attempt goes unanswered; the calls after it fail at once, saying
    /// so, and connect no more until the reconnect interval has passed. With no interval,
    /// each call tries, and waits its deadline.
    @Test func callsToAPeerThatNeverAnswersFailAtOnceUntilTheReconnectInterval() async throws {
        let peer = try SilentPeer()
        defer { peer.close() }
        var database = PostgresScheduleConfiguration(host: "127.0.0.1", port: peer.port, username: "postgres")
        database.operationTimeout = .milliseconds(500)
        database.reconnectInterval = .seconds(600)
        let now = WallClockInstant(nanosecondsSinceEpoch: Int64(Date().timeIntervalSince1970 * 1e9))
        let context = ScheduleStoreContext(
            now: now, wallClock: { now }, logger: Logger(label: "store") { _ in SwiftLogNoOpLogHandler() })
        // Opened, not connected: a program may start before its database answers.
        let store = try await ScheduleDatabase.postgres(database).openStore(context)
        defer { store.close() }
        #expect(try peer.connectionsSoFar() == 1)
        var errors: [String] = []
        for _ in 0..<5 {
            do {
                _ = try await store.pendingCount()
                errors.append("answered")
            } catch {
                errors.append("\(error)")
            }
        }
        #expect(try peer.connectionsSoFar() == 1, "connected again: \(errors)")
        #expect(
            errors.allSatisfy {
                $0.contains("a connection 0.") && $0.contains("s ago had no answer in 0.5 s: not connecting again for")
            },
            "\(errors)")

        database.reconnectInterval = .zero
        let eager = try await ScheduleDatabase.postgres(database).openStore(context)
        defer { eager.close() }
        for _ in 0..<2 {
            await #expect {
                _ = try await eager.pendingCount()
            } throws: { error in
                "\(error)".contains("no answer in 0.5 s")
            }
        }
        #expect(try peer.connectionsSoFar() == 4)
    }

    /// A call's deadline is for the server's silence, not for the call's length: each answer
    /// gives it the whole timeout again. A submission of 2,500 requests is written in one
    /// transaction, a thousand to a statement, to a server that takes 1.2 s over each
    /// statement deleting or inserting requests (a trigger's sleep) with a 2 s timeout:
    /// every statement is answered within it, all of them (7 s) long past it. With one
    /// deadline for the whole call, even one statement of each (2.4 s) failed the
    /// submission, as 20,000 requests in two statements did on a loaded machine.
    @Test func aCallWhoseStatementsAreEachAnsweredInTimeIsNotCutShortByItsLength() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let scheduler = try Scheduler(
            runtime: try PostgresSchedulerTests.runtime(),
            configuration: PostgresSchedulerTests.configuration(server, operationTimeout: .seconds(2)))
        defer { scheduler.runtime.requestTermination() }
        try scheduler.register(prefix: "slow.") { $0.setTaskCompleted(success: true) }
        try server.psql(
            """
            CREATE TABLE public.statements (kind text);
            CREATE FUNCTION public.slowly() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN INSERT INTO public.statements VALUES (TG_OP); PERFORM pg_sleep(1.2); RETURN NULL; END $$;
            CREATE TRIGGER slowly AFTER INSERT OR DELETE ON overtime.requests
                FOR EACH STATEMENT EXECUTE FUNCTION public.slowly();
            """)
        let later = WallClockInstant(secondsSinceEpoch: Int64(Date().timeIntervalSince1970) + 3600)
        let outcomes = try scheduler.submit(
            contentsOf: (0..<2_500).map {
                var request = ScheduledTaskRequest(identifier: "slow.\($0)")
                request.earliestBegin = later
                return request
            })
        #expect(outcomes.count == 2_500 && outcomes.allSatisfy { $0 == .added })
        #expect(
            PostgresSchedulerTests.answer(
                server,
                "SELECT string_agg(kind || ' ' || n, ', ' ORDER BY kind) FROM"
                    + " (SELECT kind, count(*) AS n FROM public.statements GROUP BY kind) s") == "DELETE 3, INSERT 3")
        #expect(try scheduler.pendingRequestCount() == 2_500)
    }

    /// The database goes down during a run: the claim cannot be renewed, the run is told
    /// to stop and its handler completes it at once. Its end cannot be written; the grant
    /// ends then, with that said — not at its deadline as a handler that "did not end it".
    @Test func aRunStoppedForALapsingClaimIsReportedAsWhatHappened() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let logs = CapturedLogs()
        var runtimeConfiguration = RuntimeConfiguration()
        runtimeConfiguration.signalHandling = nil
        runtimeConfiguration.systemdNotify = false
        runtimeConfiguration.watchdogTimeout = nil
        runtimeConfiguration.logger = Logger(label: "runtime") { _ in logs }
        let runtime = try Runtime(configuration: runtimeConfiguration)
        runtime.start()
        defer { runtime.requestTermination() }
        var configuration = PostgresSchedulerTests.configuration(server, claim: .seconds(3))
        configuration.logger = Logger(label: "scheduler") { _ in logs }
        let (scheduler, stopped) = try Self.startStoppableJob(runtime: runtime, configuration: configuration)
        var request = ScheduledTaskRequest(identifier: "job")
        request.maximumDuration = .seconds(8)
        try scheduler.submit(request)
        #expect(
            PostgresSchedulerTests.eventually(10) { scheduler.pendingRequests().first?.waitingFor == .running })
        try server.pause()
        #expect(PostgresSchedulerTests.eventually(10) { stopped.withLockedValue { $0 != nil } })
        // Past the grant's deadline (8 s from its start), where it would have been terminated.
        usleep(9_000_000)
        let lines = logs.lines
        #expect(
            lines.contains { $0.contains("cannot be recorded while the schedule store is unreachable") }, "\(lines)")
        #expect(!lines.contains { $0.contains("did not end it") }, "\(lines.filter { $0.contains("did not end it") })")
    }

    /// The database stops answering during a run (SIGSTOP: a hung server; a network that
    /// drops every packet is the same to the client): the renewal of the claim is sent and
    /// never answered, and the run is told to stop once its claim is no longer safe, with
    /// the database still stopped. Not when an answer comes: by then the claim may have
    /// ended and another instance taken the run over.
    @Test func aRunWhoseClaimRenewalGoesUnansweredIsToldToStopWhileTheDatabaseHangs() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let logs = CapturedLogs()
        let runtime = try PostgresSchedulerTests.runtime()
        defer { runtime.requestTermination() }
        var configuration = PostgresSchedulerTests.configuration(server, claim: .seconds(3))
        configuration.logger = Logger(label: "scheduler") { _ in logs }
        let (scheduler, stopped) = try Self.startStoppableJob(runtime: runtime, configuration: configuration)
        try scheduler.submit(ScheduledTaskRequest(identifier: "job"))
        #expect(
            PostgresSchedulerTests.eventually(10) { scheduler.pendingRequests().first?.waitingFor == .running })
        server.signalAll(SIGSTOP)
        defer { server.signalAll(SIGCONT) }
        #expect(PostgresSchedulerTests.eventually(10) { stopped.withLockedValue { $0 != nil } }, "\(logs.lines)")
        #expect(logs.lines.contains { $0.contains("the claims were not renewed in time") }, "\(logs.lines)")
    }

    /// The database dies during a run (every server process killed): the renewals find
    /// no connection, and the run is told to stop when its claim stops being safe — the
    /// claim less its margin — not at the next renewal's turn, which with a margin under a
    /// third of the claim (the defaults: 5 s of 30 s) comes as the claim ends, when
    /// another instance may take the run.
    @Test func aRunWhoseClaimCannotBeRenewedIsToldToStopItsMarginBeforeTheClaimEnds() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let runtime = try PostgresSchedulerTests.runtime()
        defer { runtime.requestTermination() }
        // Renewed every 2 s, safe for 4.8 s: the turns at 4 s and 6 s fall either side.
        let configuration = PostgresSchedulerTests.configuration(server, claim: .seconds(6), margin: .seconds(1.2))
        let (scheduler, stopped) = try Self.startStoppableJob(runtime: runtime, configuration: configuration)
        try scheduler.submit(ScheduledTaskRequest(identifier: "job"))
        #expect(
            PostgresSchedulerTests.eventually(10) { scheduler.pendingRequests().first?.waitingFor == .running })
        // Right after a renewal (the claim's end moves on), so that it is the last one.
        let claimed = try Self.claimEnd(server)
        var renewedUntil = claimed
        _ = FleetTests.waitFor(10) {
            renewedUntil = try Self.claimEnd(server)
            return renewedUntil > claimed
        }
        #expect(renewedUntil > claimed, "no renewal in 10 s")
        server.signalAll(SIGKILL)
        #expect(PostgresSchedulerTests.eventually(10) { stopped.withLockedValue { $0 != nil } })
        let told = stopped.withLockedValue { $0 } ?? .infinity
        #expect(
            told < renewedUntil - 0.6,
            "told \(renewedUntil - told) s before its claim ended (margin 1.2 s)")
    }

    /// The database restarts during a run (a crash, to the clients): the listening
    /// connection is lost, and the renewal whose turn comes while it is down connects it
    /// at once and renews — not after the reconnect interval (here a minute), by which time
    /// the claim would have lapsed and the run been told to stop, the database long back.
    @Test func aClaimOutlivesAnOutageShorterThanItsSafePartWhateverTheReconnectInterval() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let runtime = try PostgresSchedulerTests.runtime()
        defer { runtime.requestTermination() }
        // Renewed every 5 s, safe for 10 s.
        let configuration = PostgresSchedulerTests.configuration(
            server, claim: .seconds(15), reconnectInterval: .seconds(60))
        let (scheduler, stopped) = try Self.startStoppableJob(runtime: runtime, configuration: configuration)
        try scheduler.submit(ScheduledTaskRequest(identifier: "job"))
        #expect(
            PostgresSchedulerTests.eventually(10) { scheduler.pendingRequests().first?.waitingFor == .running })
        let claimed = try Self.claimEnd(server)
        try server.restartImmediately()
        #expect(FleetTests.waitFor(20) { try Self.claimEnd(server) > claimed }, "no renewal in 20 s")
        #expect(stopped.withLockedValue { $0 } == nil, "the run was told to stop")
    }

    /// The statement that starts a run is written although its answer never comes: the
    /// server finishes it after the client's deadline closed the connection. The instance
    /// reads back what was written and runs it here, once, as its first attempt. Taken as
    /// not written, the start was never run nor renewed: the run stayed recorded as running
    /// with no handler called (here, alone, for the 30 s the test waits), until another
    /// instance took it over as interrupted (busy run 140: 64 one-shots so).
    @Test func aStartWrittenWhoseAnswerNeverCameRunsHereOnce() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let runtime = try PostgresSchedulerTests.runtime()
        defer { runtime.requestTermination() }
        let configuration = PostgresSchedulerTests.configuration(
            server, claim: .seconds(8), operationTimeout: .seconds(4))
        let scheduler = try Scheduler(runtime: runtime, configuration: configuration)
        let attempts = NIOLockedValueBox<[Int]>([])
        try scheduler.register("job") { task in
            attempts.withLockedValue { $0.append(task.attempt) }
            task.setTaskCompleted(success: true)
        }
        try scheduler.start()
        // The first start written takes the server 5 s: the client gives up after 4.
        _ = try server.psql(
            """
            CREATE TABLE public.slept ();
            CREATE FUNCTION public.slow_first_start() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF NEW.running AND NOT OLD.running AND NOT EXISTS (SELECT FROM public.slept) THEN
                    INSERT INTO public.slept DEFAULT VALUES;
                    PERFORM pg_sleep(5);
                END IF;
                RETURN NEW;
            END $$;
            CREATE TRIGGER slow_first_start AFTER UPDATE ON overtime.requests FOR EACH ROW
                EXECUTE FUNCTION public.slow_first_start();
            """)
        try scheduler.submit(ScheduledTaskRequest(identifier: "job"))
        #expect(
            PostgresSchedulerTests.eventually(30) { (try? scheduler.history("job").first?.result) == .succeeded },
            "\((try? scheduler.history("job")) ?? [])")
        #expect(
            try server.psql("SELECT count(*) FROM public.slept").trimmingCharacters(in: .whitespacesAndNewlines) == "1",
            "the start's statement was slow")
        #expect(attempts.withLockedValue { $0 } == [1], "run here once, as its first attempt")
        #expect(try scheduler.history("job").map(\.result) == [.succeeded])
    }

    /// The end of the claim on "job", as the database holds it: seconds since 1970.
    static func claimEnd(_ server: PostgresServer) throws -> Double {
        let text = try server.psql(
            "SELECT extract(epoch FROM claim_until) FROM overtime.requests WHERE identifier = 'job'")
        return Double(text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }

    /// A started scheduler with one task, "job", whose runs go on until told to stop; then
    /// `stopped` is set to when (the wall clock, seconds since 1970) and the run ends
    /// unsuccessfully.
    static func startStoppableJob(
        runtime: Runtime, configuration: SchedulerConfiguration
    ) throws -> (Scheduler, NIOLockedValueBox<Double?>) {
        let scheduler = try Scheduler(runtime: runtime, configuration: configuration)
        let stopped = NIOLockedValueBox<Double?>(nil)
        try scheduler.register("job") { task in
            task.expirationHandler = {
                stopped.withLockedValue { $0 = $0 ?? Date().timeIntervalSince1970 }
                task.setTaskCompleted(success: false)
            }
        }
        try scheduler.start()
        return (scheduler, stopped)
    }
}

/// A log handler that keeps every message.
struct CapturedLogs: LogHandler {
    private let box = NIOLockedValueBox<[String]>([])
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    var lines: [String] { box.withLockedValue { $0 } }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        box.withLockedValue { $0.append("\(event.level) \(event.message)") }
    }
}

/// A TCP listener on 127.0.0.1 that accepts every connection, keeps it open and never sends
/// a byte nor reads one: a peer that takes connections and never answers.
final class SilentPeer: Sendable {
    let port: Int
    private let listener: Int32
    /// The connections accepted, with the port each came from.
    private let connections = NIOLockedValueBox<[(descriptor: Int32, port: Int)]>([])

    init() throws {
        listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        guard Self.bindAndListen(listener, &address) else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [listener, connections] in
            while true {
                var from = sockaddr_in()
                var length = socklen_t(MemoryLayout<sockaddr_in>.size)
                let connection = withUnsafeMutablePointer(to: &from) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { accept(listener, $0, &length) }
                }
                guard connection >= 0 else { return }  // closed
                connections.withLockedValue { $0.append((connection, Int(UInt16(bigEndian: from.sin_port)))) }
            }
        }
        thread.start()
    }

    private static func bindAndListen(_ listener: Int32, _ address: inout sockaddr_in) -> Bool {
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        return withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(listener, pointer, length) == 0 && listen(listener, 64) == 0
                    && getsockname(listener, pointer, &length) == 0
            }
        }
    }

    /// How many connections were made to it so far: a connection of its own is made and,
    /// once the listener has accepted it (in order: every earlier one is accepted by then),
    /// the others before it are counted.
    func connectionsSoFar() throws -> Int {
        let own = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { _ = Glibc.close(own) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let connected = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                connect(own, pointer, length) == 0 && getsockname(own, pointer, &length) == 0
            }
        }
        guard connected else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        let ownPort = Int(UInt16(bigEndian: address.sin_port))
        var before: Int?
        _ = FleetTests.waitFor(30) {
            before = connections.withLockedValue { $0.firstIndex { $0.port == ownPort } }
            return before != nil
        }
        guard let before else { throw POSIXError(.ETIMEDOUT) }
        let accepted = connections.withLockedValue { $0.remove(at: before) }
        _ = Glibc.close(accepted.descriptor)
        return before
    }

    func close() {
        shutdown(listener, Int32(SHUT_RDWR))
        _ = Glibc.close(listener)
        for connection in connections.withLockedValue({ $0 }) { _ = Glibc.close(connection.descriptor) }
    }
}
