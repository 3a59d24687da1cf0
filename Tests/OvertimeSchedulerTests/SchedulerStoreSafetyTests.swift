import Foundation
import Overtime
import OvertimeTestSupport
import Testing

@_spi(ScheduleStore) @testable import OvertimeScheduler

#if canImport(Glibc)
    import Glibc
#endif

/// What an operator does to a store: damages it, opens it twice, points the scheduler at a
/// file that is not a store, downgrades the program.
@Suite("Scheduler store safety", .serialized, .timeLimit(.minutes(2)))
struct SchedulerStoreSafetyTests {
    /// Damage past the header: a torn page in the middle of the file.
    static func tearAPage(of path: String) throws {
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        try handle.seek(toOffset: 100)
        try handle.write(contentsOf: Data(repeating: 0x5A, count: 3000))
        try handle.close()
    }

    @Test func aDamagedStoreIsMovedAsideReportedAndReplaced() async throws {
        try await onOwnThread {
            let folder = TemporaryDirectory("scheduler-damage")
            do {
                let first = try SchedulerHarness(store: .sqlite, folder: folder)
                try first.current.start()
                try first.current.submit(ScheduledTaskRequest(identifier: "job"))
                first.settle()
                first.current.abandon()
                first.env.shutDown()
            }
            try Self.tearAPage(of: folder.path + "/schedule.db")
            let h = try SchedulerHarness(store: .sqlite, folder: folder)
            defer { h.finish() }
            let aside = try #require(h.current.recovery.movedAside)
            #expect(FileManager.default.fileExists(atPath: aside), "kept, not deleted")
            #expect(h.current.recovery.damage != nil)
            #expect(h.env.logs.messages(at: .critical).contains { $0.message.contains("moved aside") })
            try h.current.start()
            try h.current.submit(ScheduledTaskRequest(identifier: "job"))
            h.settle()
            #expect(h.attempts.count == 1, "the new store works")
        }
    }

    @Test func aFileThatIsNotAStoreIsRefusedAndLeftAsItWas() async throws {
        try await onOwnThread {
            let folder = TemporaryDirectory("scheduler-foreign")
            defer { folder.remove() }
            let path = folder.path + "/notes.txt"
            let content = Data("an operator's notes, not a database\n".utf8) + Data(repeating: 0x5A, count: 5000)
            try content.write(to: URL(fileURLWithPath: path))
            let env = try VirtualRuntime()
            defer { env.shutDown() }
            do throws(SchedulerError) {
                _ = try Scheduler(runtime: env.runtime, configuration: SchedulerConfiguration(storePath: path))
                Issue.record("a foreign file was opened as a store")
            } catch {
                #expect(error.code == .store)
                #expect(error.message.contains("not a schedule store"), "\(error)")
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == content, "not touched")
            let entries = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            #expect(!entries.contains { $0.contains("corrupt") }, "nothing moved: \(entries)")

            // A lock path that is someone else's file is not written either.
            let store = folder.path + "/schedule.db"
            let lockContent = Data("#!/bin/sh\necho mine\n".utf8)
            try lockContent.write(to: URL(fileURLWithPath: store + ".lock"))
            do throws(SchedulerError) {
                _ = try Scheduler(runtime: env.runtime, configuration: SchedulerConfiguration(storePath: store))
                Issue.record("a foreign lock file was taken")
            } catch {
                #expect(error.message.contains("not a lock file"), "\(error)")
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: store + ".lock")) == lockContent)
        }
    }

    /// Another program's SQLite database is refused and left byte for byte as it was (no
    /// table added, not switched to WAL, no version set), damaged or not; a store of an
    /// earlier build (no marker, only this schema's tables) is adopted.
    @Test func anotherProgramsDatabaseIsRefusedAndLeftByteForByte() async throws {
        try await onOwnThread {
            let folder = TemporaryDirectory("scheduler-theirs")
            defer { folder.remove() }
            let theirs = folder.path + "/app.db"
            _ = try sqliteShell(
                theirs,
                "CREATE TABLE accounts (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO accounts VALUES (1, 'a');")
            let before = try Data(contentsOf: URL(fileURLWithPath: theirs))
            let env = try VirtualRuntime()
            defer { env.shutDown() }
            do throws(SchedulerError) {
                _ = try Scheduler(runtime: env.runtime, configuration: SchedulerConfiguration(storePath: theirs))
                Issue.record("another program's database was taken")
            } catch {
                #expect(error.message.contains("not an Overtime schedule store"), "\(error)")
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: theirs)) == before, "left byte for byte")
            #expect(!FileManager.default.fileExists(atPath: theirs + "-wal"))
            // Damaged too: still not moved aside.
            try Self.tearAPage(of: theirs)
            let damaged = try Data(contentsOf: URL(fileURLWithPath: theirs))
            #expect(throws: SchedulerError.self) {
                _ = try Scheduler(runtime: env.runtime, configuration: SchedulerConfiguration(storePath: theirs))
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: theirs)) == damaged)
            #expect(
                !(try FileManager.default.contentsOfDirectory(atPath: folder.path)).contains { $0.contains("corrupt") })

            // An earlier build's store: no marker, our tables. Adopted, and marked.
            let earlier = folder.path + "/earlier.db"
            do {
                let made = try Scheduler(
                    runtime: env.runtime, configuration: SchedulerConfiguration(storePath: earlier))
                made.abandon()
            }
            _ = try sqliteShell(earlier, "PRAGMA application_id = 0;")
            let adopted = try Scheduler(runtime: env.runtime, configuration: SchedulerConfiguration(storePath: earlier))
            adopted.abandon()
            #expect(try sqliteShell(earlier, "PRAGMA application_id;") == [["\(SQLiteScheduleStore.applicationID)"]])
        }
    }

    /// A symbolic link at the store's path is never followed — to another program's file
    /// or dangling (a root daemon would create a file where another user chose) — and a
    /// new store is owner-only, its log too.
    @Test func symbolicLinksAreNotFollowedAndANewStoreIsOwnerOnly() async throws {
        try await onOwnThread {
            let folder = TemporaryDirectory("scheduler-links")
            defer { folder.remove() }
            let env = try VirtualRuntime()
            defer { env.shutDown() }
            let target = folder.path + "/elsewhere.db"
            let link = folder.path + "/schedule.db"
            #expect(symlink(target, link) == 0)
            #expect(throws: SchedulerError.self) {
                _ = try Scheduler(runtime: env.runtime, configuration: SchedulerConfiguration(storePath: link))
            }
            #expect(!FileManager.default.fileExists(atPath: target), "nothing made through the dangling link")
            _ = try sqliteShell(target, "CREATE TABLE requests (x);")
            let before = try Data(contentsOf: URL(fileURLWithPath: target))
            do throws(SchedulerError) {
                _ = try Scheduler(runtime: env.runtime, configuration: SchedulerConfiguration(storePath: link))
                Issue.record("opened through a symbolic link")
            } catch {
                #expect(error.message.contains("symbolic link"), "\(error)")
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == before)
            unlink(link)
            let store = try Scheduler(runtime: env.runtime, configuration: SchedulerConfiguration(storePath: link))
            try store.start()
            for suffix in ["", "-wal"] {
                var info = stat()
                #expect(lstat(link + suffix, &info) == 0)
                #expect(info.st_mode & 0o777 == 0o600, "\(suffix): \(String(info.st_mode & 0o777, radix: 8))")
            }
            store.abandon()
        }
    }

    /// Damaged twice within one second: the second saved copy does not overwrite the first.
    @Test func savedCopiesOfDamagedStoresNeverCollide() async throws {
        try await onOwnThread {
            let folder = TemporaryDirectory("scheduler-aside")
            defer { folder.remove() }
            var asides: [String] = []
            for _ in 0..<2 {
                let h = try SchedulerHarness(store: .sqlite, folder: folder)
                try h.current.start()
                try h.current.submit(ScheduledTaskRequest(identifier: "job"))
                h.settle()
                h.current.abandon()
                h.env.shutDown()
                try Self.tearAPage(of: folder.path + "/schedule.db")
                let reopened = try SchedulerHarness(store: .sqlite, folder: folder)  // the same virtual second
                asides.append(try #require(reopened.current.recovery.movedAside))
                reopened.current.abandon()
                reopened.env.shutDown()
            }
            #expect(Set(asides).count == 2, "\(asides)")
            #expect(asides.allSatisfy { FileManager.default.fileExists(atPath: $0) })
        }
    }

    @Test func aNewerSchemaIsRefusedWithBothVersionsNamed() async throws {
        try await onOwnThread {
            let folder = TemporaryDirectory("scheduler-newer")
            defer { folder.remove() }
            let newer = folder.path + "/newer.db"
            // A store of a later build: Overtime's marker, a table this build does not know.
            _ = try sqliteShell(
                newer,
                "CREATE TABLE future (x); PRAGMA user_version = \(SQLiteScheduleStore.schemaVersion + 1);"
                    + " PRAGMA application_id = \(SQLiteScheduleStore.applicationID);"
            )
            let before = try Data(contentsOf: URL(fileURLWithPath: newer))
            let env = try VirtualRuntime()
            defer { env.shutDown() }
            do throws(SchedulerError) {
                _ = try Scheduler(runtime: env.runtime, configuration: SchedulerConfiguration(storePath: newer))
                Issue.record("a newer store was opened")
            } catch {
                #expect(error.code == .store)
                #expect(
                    error.message.contains("schema version \(SQLiteScheduleStore.schemaVersion + 1)")
                        && error.message.contains("up to version \(SQLiteScheduleStore.schemaVersion)"))
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: newer)) == before, "left as it was")
        }
    }

    @Test(.startsProcesses) func twoSchedulersOnOneStoreAreRefusedInOneProcessAndAcrossTwo() async throws {
        try await onOwnThread {
            let folder = TemporaryDirectory("scheduler-twice")
            defer { folder.remove() }
            let path = folder.path + "/schedule.db"
            let env = try VirtualRuntime()
            defer { env.shutDown() }
            do {
                let first = try Scheduler(runtime: env.runtime, configuration: SchedulerConfiguration(storePath: path))
                do throws(SchedulerError) {
                    _ = try Scheduler(runtime: env.runtime, configuration: SchedulerConfiguration(storePath: path))
                    Issue.record("a second scheduler opened the same store")
                } catch {
                    #expect(error.code == .storeInUse)
                    #expect(error.message.contains("process \(getpid())"), "\(error)")
                }
                _ = first
            }
            // Released with the first: a restart in the same process works.
            _ = try Scheduler(runtime: env.runtime, configuration: SchedulerConfiguration(storePath: path))

            // A daemon holds it: this process is refused, named the daemon's PID; after the
            // daemon is killed with -9 the kernel has released it.
            let child = try RunningChild(["scheduler-crash", folder.path])
            #expect(child.waitForLine { $0 == "READY" } != nil)
            do throws(SchedulerError) {
                _ = try Scheduler(runtime: env.runtime, configuration: SchedulerConfiguration(storePath: path))
                Issue.record("the store was opened while a daemon held it")
            } catch {
                #expect(error.code == .storeInUse)
                #expect(error.message.contains("process \(child.pid)"), "\(error)")
            }
            child.send(SIGKILL)
            _ = child.waitForExit()
            let after = try Scheduler(runtime: env.runtime, configuration: SchedulerConfiguration(storePath: path))
            #expect(after.recovery.movedAside == nil, "a killed holder leaves a store, not damage")
        }
    }
}
