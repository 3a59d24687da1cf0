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
    @Test func aDamagedStoreIsMovedAsideReportedAndReplaced() async throws {
        try await onOwnThread {
            let folder = TemporaryDirectory("scheduler-damage")
            do {
                let first = try SchedulerHarness(folder: folder)
                try first.current.start()
                try first.current.submit(ScheduledTaskRequest(identifier: "job"))
                first.settle()
                first.current.abandon()
                first.env.shutDown()
            }
            // Damage past the header: a torn page in the middle of the file.
            let handle = try #require(FileHandle(forUpdatingAtPath: folder.path + "/schedule.db"))
            try handle.seek(toOffset: 100)
            try handle.write(contentsOf: Data(repeating: 0x5A, count: 8000))
            try handle.close()
            let h = try SchedulerHarness(folder: folder)
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

    @Test func aNewerSchemaIsRefusedWithBothVersionsNamed() async throws {
        try await onOwnThread {
            let folder = TemporaryDirectory("scheduler-newer")
            defer { folder.remove() }
            let newer = folder.path + "/newer.db"
            _ = try sqliteShell(newer, "CREATE TABLE future (x); PRAGMA user_version = 7;")
            let before = try Data(contentsOf: URL(fileURLWithPath: newer))
            let env = try VirtualRuntime()
            defer { env.shutDown() }
            do throws(SchedulerError) {
                _ = try Scheduler(runtime: env.runtime, configuration: SchedulerConfiguration(storePath: newer))
                Issue.record("a newer store was opened")
            } catch {
                #expect(error.code == .store)
                #expect(
                    error.message.contains("schema version 7")
                        && error.message.contains("up to version \(SQLiteScheduleStore.schemaVersion)"))
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: newer)) == before, "left as it was")
        }
    }

    @Test func twoSchedulersOnOneStoreAreRefusedInOneProcessAndAcrossTwo() async throws {
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
