import Foundation
import Overtime
import OvertimeSchedulerTesting
import OvertimeSupport
import OvertimeTestSupport
import OvertimeTesting
import Testing

@_spi(ScheduleStore) @testable import OvertimeScheduler

/// Requirements gate runs and stop them, on virtual time with conditions set by hand.
@Suite("Scheduler requirements on virtual time", .serialized, .timeLimit(.minutes(2)))
struct SchedulerRequirementTests {
    /// A source whose changes nobody announces: only looking again sees them (free space).
    final class SilentSource: ConditionSource {
        let conditions = Locked(SystemConditions())
        func read() -> SystemConditions { conditions.withLock { $0 } }
        func start(runtime: Runtime, changed: @escaping @Sendable () -> Void) {}
        func stop() {}
    }

    /// A source that announces a change as it starts, as the kernel's and the system bus's
    /// watchers may, with what Linux reads where metering and idleness cannot be told.
    final class AnnouncingSource: ConditionSource {
        let manual = ManualConditionSource(SystemConditions(networkMetered: nil, deviceIdle: nil))
        func read() -> SystemConditions { manual.read() }
        func start(runtime: Runtime, changed: @escaping @Sendable () -> Void) {
            manual.start(runtime: runtime, changed: changed)
            changed()
        }
        func stop() { manual.stop() }
    }

    private func request(_ requirements: Set<Requirement>) -> ScheduledTaskRequest {
        var request = ScheduledTaskRequest(identifier: "job")
        request.requirements = requirements
        return request
    }

    @Test func aRunWaitsForTheNetworkStartsWhenItComesAndIsStoppedAndRetriedWhenItGoes() async throws {
        try await onOwnThread {
            let network = ManualConditionSource(SystemConditions(networkAvailable: false))
            let h = try SchedulerHarness(configure: { $0.conditions = network })
            defer { h.finish() }
            h.script.withLock { $0 = { _ in .hang } }
            try h.current.start()
            try h.current.submit(request([.network]))
            h.advance(by: .seconds(3600))
            #expect(h.attempts.count == 0, "no network, no run")
            #expect(h.current.pendingRequests().first?.waitingFor == .requirement(.network))
            #expect(h.clock.nextWakeup == nil, "waiting on an announced condition arms no timer")

            let up = h.now
            network.update { $0.networkAvailable = true }
            h.settle()
            #expect(h.attempts.all.map(\.at) == [up], "started the moment the route appeared")
            let task = try #require(h.hanging.all.first)
            task.expirationHandler = { task.setTaskCompleted(success: false) }

            network.update { $0.networkAvailable = false }
            h.settle()
            #expect(task.isExpired, "told to stop")
            let history = try h.current.history("job")
            #expect(history.first?.result == .stopped)
            #expect(history.first?.stopReason?.contains("network") == true)
            #expect(h.attempts.count == 1, "not retried while the network is down")

            h.advance(by: .seconds(10))
            h.script.withLock { $0 = { _ in .succeed } }
            let back = h.now
            network.update { $0.networkAvailable = true }
            h.settle()
            let retry = try #require(h.attempts.all.last)
            #expect(retry.attempt == 2 && retry.runID == task.runID && retry.at == back, "retried at once, no backoff")
            #expect(try h.current.history("job").map(\.result) == [.succeeded, .stopped])
        }
    }

    @Test func storageIsLookedAtAgainOnlyWhileARunWaitsOnIt() async throws {
        try await onOwnThread {
            let source = SilentSource()
            source.conditions.withLock { $0.storageLow = true }
            let h = try SchedulerHarness(configure: {
                $0.conditions = source
                $0.conditionRecheckInterval = .seconds(60)
            })
            defer { h.finish() }
            try h.current.start()
            let start = h.now
            try h.current.submit(request([.storageNotLow]))
            h.settle()
            #expect(h.current.pendingRequests().first?.waitingFor == .requirement(.storageNotLow))
            h.advance(by: .seconds(90))
            source.conditions.withLock { $0.storageLow = false }  // room made, unannounced
            h.advance(by: .seconds(29))
            #expect(h.attempts.count == 0, "not looked at before the next recheck")
            h.advance(by: .seconds(1))
            #expect(h.attempts.all.map(\.at) == [start + .seconds(120)], "seen at the recheck, on the minute")
            h.advance(by: .seconds(3600))
            #expect(h.clock.nextWakeup == nil, "nothing waits: no more looking")
        }
    }

    @Test func backgroundOnlyRunsWaitForTheBackgroundAndStopInTheForeground() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness()
            defer { h.finish() }
            h.script.withLock { $0 = { _ in .hang } }
            try h.current.start()
            try h.current.submit(request([.background]))
            h.advance(by: .seconds(60))
            #expect(h.attempts.count == 0, "active in the foreground: it waits")
            #expect(h.current.pendingRequests().first?.waitingFor == .requirement(.background))
            h.env.runtime.requestBackground()
            h.settle()
            #expect(h.attempts.count == 1, "\(h.current.pendingRequests()) \(h.env.runtime.state)")
            let task = try #require(h.hanging.all.first)
            task.expirationHandler = { task.setTaskCompleted(success: false) }
            h.env.runtime.requestForeground()
            h.settle()
            #expect(task.isExpired)
            #expect(try h.current.history("job").first?.result == .stopped)
            #expect(h.attempts.count == 1, "not again until back in the background")
        }
    }

    /// A daemon's own log goes to its spool: a line at every start would be an upload 30 s
    /// after every start of a log uploader that has nothing else to send.
    @Test func conditionsAnnouncedAtStartAreNoChangeAndAChangeIsLoggedOnce() async throws {
        try await onOwnThread {
            let source = AnnouncingSource()
            let h = try SchedulerHarness(configure: { $0.conditions = source })
            defer { h.finish() }
            try h.current.start()
            h.settle()
            let changes = { h.env.logs.entries.all.filter { $0.message.hasPrefix("conditions changed") } }
            #expect(changes().isEmpty, "the first reading is no change: \(changes().map(\.message))")

            // What a system bus found missing after start announces: only the reason changes.
            source.manual.update { $0.unknown[.deviceIdle] = "no system bus" }
            h.settle()
            source.manual.update { $0.unknown[.deviceIdle] = "no system bus (it does not exist)" }
            h.settle()
            #expect(changes().isEmpty, "a new reason is no change: \(changes().map(\.message))")

            source.manual.update { $0.networkAvailable = false }
            h.settle()
            source.manual.update { _ in }  // announced, nothing changed
            h.settle()
            #expect(changes().map(\.message) == ["conditions changed: \(source.read())"])
            #expect(changes().first?.level == .info)

            try h.current.submit(request([.network]))
            h.settle()
            #expect(h.current.pendingRequests().first?.waitingFor == .requirement(.network), "the change was read")
        }
    }

    @Test func everyRequirementIsAskedOfItsOwnCondition() {
        let all = SystemConditions()
        for requirement in Requirement.all {
            #expect(requirement.isMet(by: all, state: .background), "\(requirement)")
        }
        #expect(!Requirement.network.isMet(by: SystemConditions(networkAvailable: false), state: .background))
        #expect(!Requirement.externalPower.isMet(by: SystemConditions(externalPower: false), state: .background))
        #expect(!Requirement.batteryNotLow.isMet(by: SystemConditions(batteryLow: true), state: .background))
        #expect(!Requirement.storageNotLow.isMet(by: SystemConditions(storageLow: true), state: .background))
        #expect(!Requirement.background.isMet(by: all, state: .active))
        let requirements: Set<Requirement> = [.storageNotLow, .network, .background]
        #expect(
            requirements.firstUnmet(by: SystemConditions(networkAvailable: false, storageLow: true), state: .active)
                == .network, "the first in a stable order")
        #expect(Requirement.all.allSatisfy { Requirement(named: $0.description) == $0 })
    }

    @Test func aSimulatedLaunchAndExpirationAsADeveloperUsesThem() async throws {
        try await onOwnThread {
            let h = try SchedulerHarness()
            defer { h.finish() }
            try h.current.start()
            var hourly = ScheduledTaskRequest(identifier: "job")
            hourly.earliestBegin = h.now + .seconds(3600)
            hourly.repetition = Repetition(every: .seconds(3600))
            try h.current.submit(hourly)
            h.settle()
            let planned = try #require(h.current.pendingRequests().first?.nextRun)
            try h.current.simulateLaunch(for: "job")
            h.settle()
            #expect(h.attempts.count == 1, "launched now")
            #expect(h.current.pendingRequests().first?.nextRun == planned, "the grid stays as it was")
            #expect(throws: SchedulerError.self) { try h.current.simulateLaunch(for: "nothing") }

            h.script.withLock { $0 = { _ in .hang } }
            try h.current.simulateLaunch(for: "job")
            h.settle()
            let task = try #require(h.hanging.all.first)
            task.expirationHandler = { task.setTaskCompleted(success: false) }
            do throws(SchedulerError) {
                try h.current.simulateLaunch(for: "job")
                Issue.record("a second run of one identifier started")
            } catch {
                #expect(error.code == .alreadyRunning)
            }
            try h.current.simulateExpiration(for: "job")
            h.settle()
            #expect(try h.current.history("job").first?.result == .expired)
            #expect(throws: SchedulerError.self) { try h.current.simulateExpiration(for: "job") }
        }
    }
}
