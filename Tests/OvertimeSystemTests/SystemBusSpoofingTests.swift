import Foundation
import Overtime
import OvertimeSupport
import OvertimeTestSupport
import Testing

@testable import OvertimeSystem

#if canImport(Glibc)
    import Glibc
#endif

/// The system bus as an attacker meets it: the distribution's own policy
/// (`/usr/share/dbus-1/system.conf` and systemd's logind policy), and a local user with no
/// privilege (uid 65534) sending every signal the program acts on, addressed to each
/// connection and broadcast. Nothing moves; each forgery that reaches the program is counted.
@Suite(
    "The system bus is hostile: only the owner of a name is heard", .onOwnThread(runningAtMost: .minutes(3)),
    .serialized,
    .enabled(
        if: SystemBusStandIn.available && access("/usr/bin/setpriv", X_OK) == 0
            && access("/usr/share/dbus-1/system.d/org.freedesktop.login1.conf", R_OK) == 0,
        "needs dbus-daemon, busctl, setpriv, systemd's logind policy and python3-dbusmock (scripts/setup)"))
struct SystemBusSpoofingTests {
    let who = "overtime-spoof-\(getpid())"

    /// Every signal a forger could send to move the program: logind's manager signals, the
    /// session's lock, its properties, and the bus's own word that logind went away.
    static func forgeries(session: String) -> [[String]] {
        let manager = ["/org/freedesktop/login1", "org.freedesktop.login1.Manager"]
        let sessionPath = "/org/freedesktop/login1/session/\(session)"
        return [
            manager + ["PrepareForSleep", "b", "true"],
            manager + ["PrepareForShutdown", "b", "true"],
            [sessionPath, "org.freedesktop.login1.Session", "Lock"],
            [
                sessionPath, "org.freedesktop.DBus.Properties", "PropertiesChanged", "sa{sv}as",
                "org.freedesktop.login1.Session", "1", "Active", "b", "false", "0",
            ],
            [
                "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameOwnerChanged", "sss", "org.freedesktop.login1",
                ":1.1", "",
            ],
        ]
    }

    /// Sends each forgery broadcast and addressed to every connection on the bus, as uid
    /// 65534; returns how many were addressed to `target`.
    static func forge(_ forgeries: [[String]], on standIn: SystemBusStandIn) throws {
        let names = try standIn.uniqueNames()
        for forgery in forgeries {
            let broadcast = try standIn.asUnprivileged(["emit"] + forgery)
            #expect(broadcast.status == 0, "the policy lets anyone send a signal: \(broadcast.errors)")
            for name in names {
                _ = try standIn.asUnprivileged(["emit", "--destination=\(name)"] + forgery)
            }
        }
    }

    @Test(.startsProcesses) func forgedSignalsFromAnUnprivilegedUserMoveNothingAndAreCounted() async throws {
        let standIn = try SystemBusStandIn(delay: .seconds(5), policy: .distribution)
        try standIn.addSession("c7", active: true)
        let env = try VirtualRuntime()
        var configuration = LogindMonitor.Configuration()
        configuration.who = who
        configuration.busAddress = standIn.address
        configuration.session = "c7"
        let monitor = LogindMonitor(runtime: env.runtime, configuration: configuration, logger: env.logs.logger)
        try monitor.start()
        #expect(try await eventually { (try? standIn.inhibitors()) == [who] && monitor.status.sessionActive == true })
        let events = Recorder<LifecycleEvent>()
        let token = env.runtime.observe { events.append($0) }

        try Self.forge(Self.forgeries(session: "c7"), on: standIn)
        // Broadcasts stop at the bus (the match names logind); each addressed one reaches
        // the program's connection and is counted there, not acted on.
        let forged = Self.forgeries(session: "c7").count
        #expect(try await eventually { monitor.status.ignoredSignals == forged })
        env.waitForQueuedRequests()
        #expect(env.runtime.state == .active)
        #expect(events.all.isEmpty, "\(events.all)")
        #expect(try standIn.inhibitors() == [who], "the delay lock is still held")
        #expect(monitor.status.holdsLock && monitor.status.lastEvent == nil)
        #expect(monitor.status.sessionActive == true && monitor.status.sessionLocked == false)
        #expect(
            env.counter("overtime_system_bus_ignored_signals_total", [("claimed_sender", "org.freedesktop.login1")])
                == Int64(forged - 1))
        #expect(
            env.counter("overtime_system_bus_ignored_signals_total", [("claimed_sender", "org.freedesktop.DBus")]) == 1)
        let debug = env.logs.messages(at: .debug).filter { $0.message.hasPrefix("ignored ") }
        #expect(debug.count == 1, "one line for a flood: \(debug.map(\.message))")
        #expect(monitor.status.summary.contains("\(forged) forged signals ignored"), "\(monitor.status.summary)")

        // logind itself is still heard.
        try standIn.emit("PrepareForSleep", true)
        #expect(try await eventually { (try? standIn.inhibitors()) == [] })
        #expect(env.runtime.state == .suspended)
        try standIn.emit("PrepareForSleep", false)
        #expect(try await eventually { (try? standIn.inhibitors()) == [who] && env.runtime.state == .active })
        withExtendedLifetime(token) {}
        monitor.stop()
        env.shutDown()
    }

    /// The conditions the scheduler reads (metered network, idle device) move only when
    /// NetworkManager and logind say so, not when a forger says they went away.
    @Test(.startsProcesses) func forgedOwnerChangesLeaveTheConditionsAlone() async throws {
        let standIn = try SystemBusStandIn(policy: .distribution)
        try standIn.startNetworkManager(metered: 2)
        let env = try VirtualRuntime()
        let conditions = SystemBusConditions(runtime: env.runtime, address: standIn.address, logger: env.logs.logger)
        conditions.start {}
        #expect(
            try await eventually {
                conditions.reading.networkMetered == false && conditions.reading.deviceIdle == false
            })
        let forgeries = ["org.freedesktop.NetworkManager", "org.freedesktop.login1"].map { name in
            ["/org/freedesktop/DBus", "org.freedesktop.DBus", "NameOwnerChanged", "sss", name, ":1.1", ""]
        }
        try Self.forge(forgeries, on: standIn)
        #expect(
            try await eventually {
                env.counter("overtime_system_bus_ignored_signals_total", [("claimed_sender", "org.freedesktop.DBus")])
                    == 2
            })
        #expect(conditions.reading.networkMetered == false && conditions.reading.deviceIdle == false)
        // The real owner going is heard, in the documented words.
        standIn.stopNetworkManager()
        #expect(try await eventually { conditions.reading.meteredUnknown == "NetworkManager is not running" })
        conditions.stop()
        env.shutDown()
    }

    /// NetworkManager not running at start is said in the documented words, not as the
    /// bus's raw error (`ServiceUnknown`).
    @Test(.startsProcesses) func aServiceNotRunningAtStartIsSaidInTheDocumentedWords() async throws {
        let standIn = try SystemBusStandIn(policy: .distribution)
        let env = try VirtualRuntime()
        let conditions = SystemBusConditions(runtime: env.runtime, address: standIn.address, logger: env.logs.logger)
        conditions.start {}
        #expect(try await eventually { conditions.reading.deviceIdle == false })
        #expect(conditions.reading.meteredUnknown == "NetworkManager is not running")
        conditions.stop()
        env.shutDown()
    }

    /// Only the names followed wake the program: the bus holds a `NameOwnerChanged` match
    /// for each (arg0), none for every client that comes and goes.
    @Test(.startsProcesses) func ownerChangesAreMatchedByName() async throws {
        let standIn = try SystemBusStandIn(policy: .distribution)
        let env = try VirtualRuntime()
        var configuration = LogindMonitor.Configuration()
        configuration.who = who
        configuration.busAddress = standIn.address
        let monitor = LogindMonitor(runtime: env.runtime, configuration: configuration, logger: env.logs.logger)
        try monitor.start()
        #expect(try await eventually { monitor.status.holdsLock })
        let rules = try standIn.matchRules(ofProcess: getpid()).filter { $0.contains("NameOwnerChanged") }
        #expect(!rules.isEmpty)
        #expect(rules.allSatisfy { $0.contains("arg0='org.freedesktop.login1'") }, "\(rules)")
        monitor.stop()
        env.shutDown()
    }

    /// The bus's errors in the words the documentation uses.
    @Test func busErrorsSayWhatTheyMean() {
        let error = { (name: String) in SystemBusError("\(name): text", name: name) }
        #expect(
            error("org.freedesktop.DBus.Error.ServiceUnknown").reason(asking: "NetworkManager")
                == "NetworkManager is not running")
        #expect(
            error("org.freedesktop.DBus.Error.NameHasNoOwner").reason(asking: "systemd-logind")
                == "systemd-logind is not running")
        #expect(error("org.freedesktop.DBus.Error.AccessDenied").reason(asking: "NetworkManager").contains("policy"))
        #expect(error("org.freedesktop.DBus.Error.NoReply").reason(asking: "NetworkManager").contains("did not answer"))
        #expect(error("com.example.Odd").reason(asking: "NetworkManager").contains("com.example.Odd"))
    }
}
