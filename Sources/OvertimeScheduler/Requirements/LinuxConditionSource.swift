// The machine's conditions as Linux shows them: routes from the kernel over netlink (or
// /proc/net), power supplies in sysfs, free space from statvfs; changes announced by
// netlink on the runtime's loop.

import Logging
import Overtime
import OvertimeSupport
import OvertimeSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Reads the conditions a run may require from Linux. Every root is injectable, so that a
/// test can lay out its own `/proc/net` or `/sys/class/power_supply`.
///
/// - **Network**: a default route, IPv4 or IPv6, unicast, not on `lo`, its link up: asked
///   of the kernel over netlink (`RTM_GETROUTE`, as `ip route` does; no `/proc` needed),
///   else read from `/proc/net` (`route`, `ipv6_route`). Route and link changes arrive on a
///   netlink socket watched by the loop: no polling. Where neither works,
///   ``unevaluable()`` says so and a request that needs the network is refused.
/// - **Power**: a supply that is not a battery is online, or a battery is charging; a
///   machine with no supply at all (a server, a container) counts as powered. A battery is
///   low at ``Configuration/batteryLowPercent`` or below while not charging. The kernel's
///   device events (netlink) announce changes; the scheduler also looks again while a run
///   waits on power, since not every driver announces.
/// - **Storage**: `statvfs` of ``Configuration/storagePath``; low below
///   ``Configuration/storageLowBelow`` bytes available. Nothing announces it: the scheduler
///   looks again while a run waits on it.
/// - **Unmetered network, device idle**: NetworkManager's `Metered` and systemd-logind's
///   `IdleHint` over the system bus (``Configuration/readsSystemBus``), followed by their
///   change signals on the loop: no polling. Without a system bus, NetworkManager or logind
///   they cannot be told: ``SystemConditions/unknown`` says why, and a run that needs one
///   waits with the reason shown.
public final class LinuxConditionSource: ConditionSource {
    /// Where to read and what counts as low.
    public struct Configuration: Sendable {
        /// The folder with `route` and `ipv6_route`. Default `/proc/net`.
        public var procNet = "/proc/net"
        /// The folder of power supplies. Default `/sys/class/power_supply`.
        public var powerSupplies = "/sys/class/power_supply"
        /// A path on the file system whose room counts.
        public var storagePath: String
        /// Storage is low below this many bytes available. Default 64 MiB.
        public var storageLowBelow: UInt64 = 64 << 20
        /// A discharging battery is low at this charge or below. Default 15 %.
        public var batteryLowPercent = 15
        /// Whether changes are announced by netlink (off: only looking again announces them,
        /// for roots that are not the kernel's).
        public var watchesKernelEvents = true
        /// Whether NetworkManager and logind are asked over the system bus (for
        /// `.unmeteredNetwork` and `.deviceIdle`). Default on; off, both are unknown.
        public var readsSystemBus = true
        /// The system bus's address; `nil`: `$DBUS_SYSTEM_BUS_ADDRESS`, else the standard socket.
        public var systemBusAddress: String?

        /// Reads the real system, measuring storage at `storagePath`.
        public init(storagePath: String) {
            self.storagePath = storagePath
        }
    }

    /// Where it reads.
    public let configuration: Configuration
    /// The netlink watchers, and the loop they were made on (``start(runtime:changed:)``).
    private let watchers = Locked<(context: DriverContext?, made: [NetlinkWatcherBox])>((nil, []))
    private let systemBus = Locked<SystemBusConditions?>(nil)

    /// A source reading as `configuration` says.
    public init(configuration: Configuration) {
        self.configuration = configuration
    }

    // Let go while watching (a scheduler released while its runtime runs on): the watchers
    // are stopped on their loop rather than left listening for nobody.
    deinit { Self.stopWatching(watchers) }

    /// Reads every condition now.
    public func read() -> SystemConditions {
        let power = readPower()
        var conditions = SystemConditions(
            networkAvailable: hasDefaultRoute(), externalPower: power.external, batteryLow: power.batteryLow,
            storageLow: storageLow())
        let bus =
            systemBus.withLock { $0?.reading }
            ?? .unknown(Self.notAsked)
        conditions.networkMetered = bus.networkMetered
        conditions.deviceIdle = bus.deviceIdle
        if let reason = bus.meteredUnknown, bus.networkMetered == nil { conditions.unknown[.unmeteredNetwork] = reason }
        if let reason = bus.idleUnknown, bus.deviceIdle == nil { conditions.unknown[.deviceIdle] = reason }
        return conditions
    }

    private static let notAsked = "the system bus is not asked (readsSystemBus is off, or the source is not started)"

    /// Watches route changes and power-supply events on `runtime`'s loop.
    public func start(runtime: Runtime, changed: @escaping @Sendable () -> Void) {
        if configuration.readsSystemBus {
            let made = SystemBusConditions(
                runtime: runtime, address: configuration.systemBusAddress, logger: Logger(label: "overtime.scheduler"))
            let previous = systemBus.withLock { current in
                defer { current = made }
                return current
            }
            previous?.stop()
            made.start(changed: changed)
        }
        guard configuration.watchesKernelEvents else { return }
        let context = runtime.driverContext
        watchers.withLock { $0.context = context }
        runtime.execute { [self] in
            var made: [NetlinkWatcherBox] = []
            do {
                made.append(
                    NetlinkWatcherBox(
                        try NetlinkWatcher(.routes, context: context, onChange: changed), context: context))
                let powerSupply = Array("SUBSYSTEM=power_supply".utf8)
                made.append(
                    NetlinkWatcherBox(
                        try NetlinkWatcher(
                            .deviceEvents, context: context, filter: { $0.contains(subsequence: powerSupply) },
                            onChange: changed), context: context))
            } catch {
                context.logger.error("cannot watch the kernel's network and power events: \(error)")
            }
            watchers.withLock { $0.made += made }
        }
    }

    /// Stops watching.
    public func stop() {
        Self.stopWatching(watchers)
        systemBus.withLock { $0 }?.stop()
    }

    /// Stops the watchers on their loop, after everything queued there before: a
    /// ``start(runtime:changed:)`` that has not made its watchers yet makes them first.
    private static func stopWatching(_ watchers: Locked<(context: DriverContext?, made: [NetlinkWatcherBox])>) {
        guard let context = watchers.withLock({ $0.context }) else { return }
        _ = context.execute {
            let stopping = watchers.withLock { watchers in
                defer { watchers.made = [] }
                return watchers.made
            }
            for watcher in stopping { watcher.stopOnLoop() }
        }
    }

    // MARK: Reading

    /// The text of a small file, or `nil` when it cannot be read.
    private static func text(_ path: String) -> String? {
        (try? readWholeFile(path).get()).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Whether a default route is up, IPv4 or IPv6; `false` when it cannot be told
    /// (``unevaluable()`` says why).
    func hasDefaultRoute() -> Bool {
        (try? defaultRoute().get()) ?? false
    }

    /// Whether a default route is up: asked of the kernel over netlink (which needs no
    /// `/proc`, hidden under systemd's `ProcSubset=pid`), else read from `/proc/net`; a
    /// failure when neither can be read. A test's own ``Configuration/procNet`` is read
    /// as files.
    func defaultRoute() -> Result<Bool, RouteError> {
        var netlinkFailure: String?
        if configuration.procNet == "/proc/net" {
            do {
                return .success(try RouteTable.hasDefaultRoute())
            } catch {
                netlinkFailure = "\(error)"
            }
        }
        let readable = [configuration.procNet + "/route", configuration.procNet + "/ipv6_route"].contains {
            Self.text($0) != nil
        }
        guard readable else {
            let netlink = netlinkFailure.map { "the kernel cannot be asked (\($0)), and " } ?? ""
            return .failure(
                RouteError(
                    description:
                        "\(netlink)\(configuration.procNet)/route cannot be read (hidden by ProcSubset=pid or a"
                        + " private /proc?): allow AF_NETLINK, or show /proc/net"))
        }
        return .success(hasDefaultRouteInFiles())
    }

    /// Why the network requirement cannot be told.
    public struct RouteError: Error, Sendable, CustomStringConvertible {
        /// What cannot be read, and what would let it.
        public let description: String
    }

    /// The requirements this source cannot tell at all here, with the reason: a run that
    /// needs one would wait for good.
    public func unevaluable() -> [Requirement: String] {
        guard case .failure(let error) = defaultRoute() else { return [:] }
        return [.network: error.description]
    }

    /// Whether `route` or `ipv6_route` in ``Configuration/procNet`` has a default route up.
    private func hasDefaultRouteInFiles() -> Bool {
        let flagUp: UInt32 = 0x1
        let flagReject: UInt32 = 0x200
        if let table = Self.text(configuration.procNet + "/route") {
            for line in table.split(separator: "\n").dropFirst() {
                let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
                guard fields.count >= 8, fields[0] != "lo", fields[1] == "00000000", fields[7] == "00000000",
                    let flags = UInt32(fields[3], radix: 16), flags & flagUp != 0, flags & flagReject == 0
                else { continue }
                return true
            }
        }
        if let table = Self.text(configuration.procNet + "/ipv6_route") {
            for line in table.split(separator: "\n") {
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                guard fields.count >= 10, fields[9] != "lo", fields[0].allSatisfy({ $0 == "0" }), fields[1] == "00",
                    let flags = UInt32(fields[8], radix: 16), flags & flagUp != 0, flags & flagReject == 0
                else { continue }
                return true
            }
        }
        return false
    }

    /// Whether external power is connected and a battery is low.
    func readPower() -> (external: Bool, batteryLow: Bool) {
        let root = configuration.powerSupplies
        let supplies = (try? listDirectory(root).get()) ?? []
        func read(_ supply: String, _ name: String) -> String? {
            Self.text("\(root)/\(supply)/\(name)").map { text in
                String(text.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
            }
        }
        var sawSupply = false
        var external = false
        var batteryLow = false
        for supply in supplies {
            guard let type = read(supply, "type") else { continue }
            sawSupply = true
            if type == "Battery" {
                let status = read(supply, "status") ?? "Unknown"
                let charging = status == "Charging" || status == "Full"
                if charging { external = true }
                if !charging, let capacity = read(supply, "capacity").flatMap({ Int($0) }),
                    capacity <= configuration.batteryLowPercent
                {
                    batteryLow = true
                }
            } else if read(supply, "online") == "1" {
                external = true
            }
        }
        return (external || !sawSupply, batteryLow)
    }

    /// Whether the watched file system has less room than the threshold.
    func storageLow() -> Bool {
        var info = statvfs()
        guard statvfs(configuration.storagePath, &info) == 0 else { return false }
        return UInt64(info.f_bavail) * UInt64(info.f_frsize) < configuration.storageLowBelow
    }
}

/// A watcher handed between threads: made and stopped on the loop.
private final class NetlinkWatcherBox: Sendable {
    private let watcher: LoopBound<NetlinkWatcher>

    init(_ watcher: NetlinkWatcher, context: DriverContext) {
        self.watcher = LoopBound(watcher, context: context)
    }

    /// Stops the watcher. On its loop.
    func stopOnLoop() {
        watcher.value.stop()
    }
}

extension Array where Element == UInt8 {
    fileprivate func contains(subsequence: [UInt8]) -> Bool {
        guard subsequence.count <= count else { return false }
        return (0...(count - subsequence.count)).contains {
            self[$0..<($0 + subsequence.count)].elementsEqual(subsequence)
        }
    }
}
