import Foundation
import Overtime
import OvertimeSchedulerTesting
import OvertimeSupport
import OvertimeSystem
import OvertimeTestSupport
import OvertimeTesting
import Testing

@_spi(ScheduleStore) @testable import OvertimeScheduler

/// `.unmeteredNetwork` and `.deviceIdle` as NetworkManager and logind tell them, over a
/// private system bus with python-dbusmock's stand-ins; the scheduler on virtual time.
@Suite(
    "Requirements the system bus tells", .onOwnThread(runningAtMost: .minutes(3)), .serialized,
    .enabled(
        if: SystemBusStandIn.available, "needs dbus-daemon, busctl and python3-dbusmock (scripts/setup installs them)"))
struct SystemBusRequirementTests {
    /// A source reading the stand-in's bus, with a default route laid out in its own
    /// `/proc/net` (the network is up whatever this machine's routes are).
    private func source(_ standIn: SystemBusStandIn, _ folder: TemporaryDirectory) throws -> LinuxConditionSource {
        try FileManager.default.createDirectory(atPath: folder.path + "/net", withIntermediateDirectories: true)
        let route = """
            Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
            eth0\t00000000\t0102A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0

            """
        try Data(route.utf8).write(to: URL(fileURLWithPath: folder.path + "/net/route"))
        var configuration = LinuxConditionSource.Configuration(storagePath: folder.path)
        configuration.procNet = folder.path + "/net"
        configuration.powerSupplies = folder.path + "/none"
        configuration.storageLowBelow = 0
        configuration.watchesKernelEvents = false
        configuration.systemBusAddress = standIn.address
        return LinuxConditionSource(configuration: configuration)
    }

    /// A scheduler whose runs hang, started with a stand-in's conditions, and `body` run
    /// on a thread of its own.
    private func withScheduler(
        _ body: (SystemBusStandIn, LinuxConditionSource, SchedulerHarness) async throws -> Void
    ) async throws {
        let standIn = try SystemBusStandIn()
        let folder = TemporaryDirectory("bus-requirements")
        defer { folder.remove() }
        let conditions = try source(standIn, folder)
        defer { conditions.stop() }
        try await onOwnThread(resuming: {
            let h = try SchedulerHarness(configure: { $0.conditions = conditions })
            defer { h.finish() }
            h.script.withLock { $0 = { _ in .hang } }
            try h.current.start()
            try await body(standIn, conditions, h)
        })
    }

    private func request(_ requirement: Requirement) -> ScheduledTaskRequest {
        var request = ScheduledTaskRequest(identifier: "job")
        request.requirements = [requirement]
        return request
    }

    @Test func anUnmeteredNetworkGatesAndStopsRunsAndIsUnknownWithoutNetworkManager() async throws {
        try await withScheduler { standIn, conditions, h in
            try await h.current.submit(request(.unmeteredNetwork))
            // No NetworkManager on the bus: unknown, and "why not yet" says so.
            #expect(
                try await eventually {
                    if case .requirementUnknown(.unmeteredNetwork, let reason) = h.current.pendingRequests().first?
                        .waitingFor
                    {
                        return reason.contains("NetworkManager")
                    }
                    return false
                })
            #expect(h.attempts.count == 0)

            try standIn.startNetworkManager(metered: 1)
            #expect(try await eventually { conditions.read().networkMetered == true })
            h.settle()
            await #expect(h.current.pendingRequests().first?.waitingFor == .requirement(.unmeteredNetwork))
            #expect(h.attempts.count == 0, "metered: no run")

            try standIn.setMetered(4)  // guess-no
            #expect(try await eventually { h.hanging.all.count == 1 }, "unmetered: it runs")
            let task = try #require(h.hanging.all.first)
            task.expirationHandler = { task.setTaskCompleted(success: false) }

            try standIn.setMetered(3)  // guess-yes
            #expect(try await eventually { task.isExpired }, "metered again: told to stop")
            h.settle()
            let history = try await h.current.history("job")
            #expect(history.first?.result == .stopped)
            #expect(history.first?.stopReason?.contains("unmetered-network") == true)

            h.script.withLock { $0 = { _ in .succeed } }
            try standIn.setMetered(2)
            #expect(try await eventually { (try? h.current.history("job").first?.result) == .succeeded })

            // NetworkManager gone: unknown again.
            standIn.stopNetworkManager()
            #expect(try await eventually { conditions.read().unknown[.unmeteredNetwork] != nil })
            try await h.current.submit(request(.unmeteredNetwork))
            h.settle()
            let waiting = await h.current.pendingRequests().first.map { "\($0.waitingFor)" }
            #expect(waiting?.contains("unknown: NetworkManager is not running") == true, "\(waiting ?? "none")")
        }
    }

    @Test func aDeviceIdleRequirementFollowsLogindsIdleHint() async throws {
        try await withScheduler { standIn, conditions, h in
            try await h.current.submit(request(.deviceIdle))
            #expect(try await eventually { conditions.read().deviceIdle == false })
            h.settle()
            await #expect(h.current.pendingRequests().first?.waitingFor == .requirement(.deviceIdle))
            #expect(h.attempts.count == 0, "someone uses the device: no run")

            try standIn.setIdleHint(true)
            #expect(try await eventually { h.hanging.all.count == 1 })
            let task = try #require(h.hanging.all.first)
            task.expirationHandler = { task.setTaskCompleted(success: false) }
            try standIn.setIdleHint(false)
            #expect(try await eventually { task.isExpired }, "in use again: told to stop")

            // The bus gone: unknown, with the reason.
            standIn.stop()
            #expect(try await eventually { conditions.read().unknown[.deviceIdle]?.contains("went away") == true })
            // Back: known again, without a restart.
            try standIn.start()
            #expect(try await eventually { conditions.read().deviceIdle == false })
        }
    }

    /// The system slept: on resume the scheduler reads its conditions again — even those
    /// only an event announces (the network here, whose change was missed while asleep), and
    /// for a program already suspended before, whose lifecycle the sleep leaves alone.
    @Test(.startsProcesses) func aResumeFromSleepReadsTheConditionsAgain() async throws {
        let standIn = try SystemBusStandIn()
        try await onOwnThread(resuming: {
            let source = SchedulerRequirementTests.SilentSource()
            source.conditions.withLock { $0.networkAvailable = false }
            let h = try SchedulerHarness(configure: { $0.conditions = source })
            defer { h.finish() }
            var configuration = LogindMonitor.Configuration()
            configuration.busAddress = standIn.address
            let monitor = LogindMonitor(runtime: h.env.runtime, configuration: configuration)
            try monitor.start()
            defer { monitor.stop() }
            #expect(try await eventually { monitor.status.holdsLock })
            try h.current.start()
            try await h.current.submit(request(.network))
            h.env.runtime.requestBackground()
            #expect(try await eventually { h.env.runtime.state == .suspended })
            h.settle()
            await #expect(h.current.pendingRequests().first?.waitingFor == .requirement(.network))
            source.conditions.withLock { $0.networkAvailable = true }  // up while asleep, its event missed
            try standIn.emit("PrepareForSleep", true)
            #expect(try await eventually { !monitor.status.holdsLock })
            try standIn.emit("PrepareForSleep", false)
            #expect(try await eventually { h.attempts.count == 1 }, "seen on resume")
        })
    }

    @Test func withoutASystemBusBothAreUnknownWithTheReason() throws {
        let folder = TemporaryDirectory("bus-requirements")
        defer { folder.remove() }
        var configuration = LinuxConditionSource.Configuration(storagePath: folder.path)
        configuration.watchesKernelEvents = false
        configuration.systemBusAddress = "unix:path=\(folder.path)/no-bus.sock"
        let conditions = LinuxConditionSource(configuration: configuration)
        let env = try VirtualRuntime()
        defer { env.shutDown() }
        conditions.start(runtime: env.runtime) {}
        env.waitForQueuedRequests()
        let read = conditions.read()
        #expect(read.networkMetered == nil && read.deviceIdle == nil)
        #expect(read.unknown[.unmeteredNetwork]?.contains("no system bus") == true, "\(read.unknown)")
        #expect(!Requirement.unmeteredNetwork.isMet(by: read, state: .background))
        #expect(!Requirement.deviceIdle.isMet(by: read, state: .background))
        conditions.stop()
    }
}
