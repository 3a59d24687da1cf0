import Foundation
import Logging
import Overtime
import OvertimeTestSupport
import Testing

@_spi(ScheduleStore) @testable import OvertimeScheduler

/// The SQLite store's write-ahead log is copied into the database as it grows and starts
/// over, however long the store and its inspectors stay open: a log that only grows fills
/// the disk and slows every read (each page read searches the whole log).
@Suite("The SQLite store's write-ahead log", .timeLimit(.minutes(2)))
struct SQLiteStoreLogTests {
    static let now = WallClockInstant(secondsSinceEpoch: 1_790_000_000)

    @Test func theLogIsCheckpointedAndStartsOverWhileTheStoreAndAnInspectorStayOpen() async throws {
        let folder = TemporaryDirectory("store-log")
        defer { folder.remove() }
        let path = folder.path + "/schedule.db"
        let database = ScheduleDatabase.sqlite(path: path)
        let store = try await database.openStore(
            ScheduleStoreContext(
                now: Self.now, wallClock: { Self.now },
                logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })))
        defer { store.close() }
        let inspector = try await database.inspector()
        defer { inspector.close() }
        // Each commit writes a few pages (about 20 kB of log): three times the size at which
        // the syncing thread checkpoints, as a scheduler commits, syncs and is inspected.
        for round in 0..<1_200 {
            try await Self.commitAndSync(store, "job-\(round % 300)", round)
            if round % 100 == 0 {
                _ = try await inspector.requests(RequestQuery(limit: 5), now: Self.now)
                _ = try await inspector.overview(now: Self.now)
            }
        }
        let log = try #require(try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int)
        #expect(log < 2 * SQLiteScheduleStore.checkpointBytes, "the log started over once checkpointed: \(log) bytes")
        // No connection holds a read where it began: a checkpoint now copies all of the log.
        let probe = try SQLiteConnection(path: path)
        defer { probe.close() }
        let frames = try probe.rows("PRAGMA wal_checkpoint(PASSIVE)") { [$0.int(0), $0.int(1), $0.int(2)] }
        #expect(frames.first?[0] == 0 && frames.first?[1] == frames.first?[2], "busy, log, copied: \(frames)")
        #expect(try await store.pendingCount() == 300)
    }

    /// Each start reads all of the log to index it, so what a process left in it when it
    /// ended goes into the database at the next process's first sync, however little
    /// (the size that checkpoints is far off): the log starts over at the commit after.
    @Test func whatAnEarlierProcessLeftInTheLogGoesAtTheFirstSync() async throws {
        let folder = TemporaryDirectory("store-log-left")
        defer { folder.remove() }
        let path = folder.path + "/schedule.db"
        let left = folder.path + "/left.db"
        let context = ScheduleStoreContext(
            now: Self.now, wallClock: { Self.now },
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        // A process that ends without closing its store leaves the database and its log as
        // a copy taken while it is open.
        let earlier = try await ScheduleDatabase.sqlite(path: path).openStore(context)
        for round in 0..<200 { try await Self.commitAndSync(earlier, "job-\(round % 50)", round) }
        for suffix in ["", "-wal"] { try FileManager.default.copyItem(atPath: path + suffix, toPath: left + suffix) }
        earlier.close()
        let leftBytes = try #require(try FileManager.default.attributesOfItem(atPath: left + "-wal")[.size] as? Int)
        #expect(leftBytes > 100 * 4096 && leftBytes < SQLiteScheduleStore.checkpointBytes)

        let store = try await ScheduleDatabase.sqlite(path: left).openStore(context)
        defer { store.close() }
        try await Self.commitAndSync(store, "job-0", 200)  // its sync copies the log into the database
        try await Self.commitAndSync(store, "job-1", 201)  // and this commit starts the log over
        let probe = try SQLiteConnection(path: left)
        defer { probe.close() }
        let frames = try probe.rows("PRAGMA wal_checkpoint(PASSIVE)") { [$0.int(0), $0.int(1), $0.int(2)] }
        let logFrames = try #require(frames.first?[1])
        #expect(logFrames > 0 && logFrames < 20, "the log holds the last commit only: \(frames) (busy, log, copied)")
        #expect(try await store.pendingCount() == 50)
    }

    /// Opening checks an existing file through a read-only connection before the writer
    /// opens it, and the first connection to a database whose log holds frames reads every
    /// frame to index it: the writer must find that index still held, not read the log
    /// again. Counted in read calls of this thread (`/proc/thread-self/io`), on a copy of a
    /// store left open by an earlier process.
    @Test func openingReadsWhatAnEarlierProcessLeftInTheLogOnce() async throws {
        let folder = TemporaryDirectory("store-log-read-once")
        defer { folder.remove() }
        let path = folder.path + "/schedule.db"
        let left = folder.path + "/left.db"
        let earlier = try await ScheduleDatabase.sqlite(path: path).openStore(
            ScheduleStoreContext(
                now: Self.now, wallClock: { Self.now },
                logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })))
        for round in 0..<200 { try await Self.commitAndSync(earlier, "job-\(round % 50)", round) }
        for suffix in ["", "-wal"] { try FileManager.default.copyItem(atPath: path + suffix, toPath: left + suffix) }
        earlier.close()
        let logBytes = try #require(try FileManager.default.attributesOfItem(atPath: left + "-wal")[.size] as? Int)
        let frames = (logBytes - 32) / (4096 + 24)
        #expect(frames > 100)

        let before = try Self.readCallsOfThisThread()
        let connection = try SQLiteScheduleStore.open(left)
        let reads = try Self.readCallsOfThisThread() - before
        connection.close()
        // Each frame is one read; the rest (headers, the schema, the check) are a few dozen.
        #expect(reads < frames + frames / 2, "\(reads) reads for a log of \(frames) frames")
    }

    /// The read calls this thread has made (`syscr` of `/proc/thread-self/io`).
    static func readCallsOfThisThread() throws -> Int {
        let text = try String(contentsOfFile: "/proc/thread-self/io", encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix("syscr:") })
        return try #require(Int(line.dropFirst("syscr:".count).trimmingCharacters(in: .whitespaces)))
    }

    /// Saves `identifier`'s request, due `round` seconds on, and syncs, as the scheduler
    /// commits and syncs.
    static func commitAndSync(_ store: any ScheduleStore, _ identifier: String, _ round: Int) async throws {
        var request = ScheduledTaskRequest(identifier: identifier)
        request.earliestBegin = now + .seconds(Int64(round))
        let stored = StoredRequest(request: request, plan: PlanState(anchor: now), submittedAt: now, currentRunID: nil)
        _ = try await store.commit(ScheduleBatch(writes: [.save(stored)]), lastRunID: store.lastRunID())
        try store.sync()
    }
}
