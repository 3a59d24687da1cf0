// What a run needs from the machine and the program before it starts and while it runs.

import Overtime

/// One condition a request's runs need: `request.requirements = [.network, .externalPower]`.
/// A struct over a private enum, so that requirements can be added.
///
/// A run starts only while all its requirements hold; one that stops holding while the run
/// is in progress stops the run (its expiration handler), which is recorded as
/// ``RunResult/stopped`` with the requirement named, and retried as soon as they all hold
/// again (counted against the request's maximum attempts, so a flapping network cannot
/// retry it forever).
public struct Requirement: Sendable, Hashable, Comparable, CustomStringConvertible {
    enum Kind: String, Hashable, CaseIterable {
        case network
        case externalPower = "external-power"
        case batteryNotLow = "battery-not-low"
        case storageNotLow = "storage-not-low"
        case background
        case unmeteredNetwork = "unmetered-network"
        case deviceIdle = "device-idle"
    }

    let kind: Kind

    /// A default route exists (IPv4 or IPv6): the machine can reach beyond its own links.
    public static let network = Requirement(kind: .network)
    /// Mains or USB power is connected (a machine without any power supply in sysfs, a
    /// server, counts as powered).
    public static let externalPower = Requirement(kind: .externalPower)
    /// No battery is low while discharging.
    public static let batteryNotLow = Requirement(kind: .batteryNotLow)
    /// The watched file system has room (see ``LinuxConditionSource/Configuration``).
    public static let storageNotLow = Requirement(kind: .storageNotLow)
    /// Only while the program is in the background, like an app refresh task: runs wait
    /// while it is active in the foreground, and one in progress stops when it comes back.
    public static let background = Requirement(kind: .background)
    /// The network is up and not metered, as NetworkManager says (its `Metered` property:
    /// `no` or `guess-no`), like WorkManager's `NetworkType.UNMETERED`. Without
    /// NetworkManager (or a system bus) it cannot be told, and a run that needs it waits:
    /// "why not yet" says so (``PendingRequest/Reason/requirementUnknown(_:because:)``).
    public static let unmeteredNetwork = Requirement(kind: .unmeteredNetwork)
    /// The device is idle, as systemd-logind says (its `IdleHint`: every session idle),
    /// like WorkManager's `requiresDeviceIdle`. Without logind it cannot be told, and a run
    /// that needs it waits.
    public static let deviceIdle = Requirement(kind: .deviceIdle)

    /// Every requirement this build knows.
    public static let all: [Requirement] = Kind.allCases.map(Requirement.init(kind:))

    /// Its name as stored and shown: `network`, `external-power`, …
    public var description: String { kind.rawValue }

    /// The requirement named `name` (as ``description`` spells it).
    public init?(named name: String) {
        guard let kind = Kind(rawValue: name) else { return nil }
        self.init(kind: kind)
    }

    init(kind: Kind) {
        self.kind = kind
    }

    /// In the order ``all`` lists them, so that the first unmet one named is stable.
    public static func < (lhs: Requirement, rhs: Requirement) -> Bool {
        Kind.allCases.firstIndex(of: lhs.kind)! < Kind.allCases.firstIndex(of: rhs.kind)!
    }

    /// Whether it holds under `conditions` with the program in `state`.
    public func isMet(by conditions: SystemConditions, state: LifecycleState) -> Bool {
        switch kind {
        case .network: conditions.networkAvailable
        case .externalPower: conditions.externalPower
        case .batteryNotLow: !conditions.batteryLow
        case .storageNotLow: !conditions.storageLow
        case .background: state == .background
        case .unmeteredNetwork: conditions.networkAvailable && conditions.networkMetered == false
        case .deviceIdle: conditions.deviceIdle == true
        }
    }

    /// Whether it is read from the machine (not from the program's lifecycle).
    var isSystemCondition: Bool { kind != .background }

    /// Whether a change of it is only noticed by looking again (no event announces free
    /// space; power changes are announced, but not by every kernel driver).
    var isPolled: Bool { kind == .storageNotLow || kind == .externalPower || kind == .batteryNotLow }

    /// The bits of the requirements whose changes only looking again shows.
    static let polledMask = all.filter(\.isPolled).reduce(0) { $0 | $1.bit }

    /// Its bit in a stored requirement mask; fixed per requirement, never reused (stores
    /// keep masks across versions).
    var bit: Int64 {
        switch kind {
        case .network: 1
        case .externalPower: 2
        case .batteryNotLow: 4
        case .storageNotLow: 8
        case .background: 16
        case .unmeteredNetwork: 32
        case .deviceIdle: 64
        }
    }
}

extension Set where Element == Requirement {
    /// The first of these (in ``Requirement/all``'s order) that does not hold, or `nil`.
    func firstUnmet(by conditions: SystemConditions, state: LifecycleState) -> Requirement? {
        sorted().first { !$0.isMet(by: conditions, state: state) }
    }

    /// Their bits together, as a store keeps them to select what can run.
    var mask: Int64 { reduce(0) { $0 | $1.bit } }

    /// The bits of every requirement that does not hold under `conditions` in `state`: a
    /// request can run when its mask shares none of them.
    static func unmetMask(by conditions: SystemConditions, state: LifecycleState) -> Int64 {
        Requirement.all.filter { !$0.isMet(by: conditions, state: state) }.reduce(0) { $0 | $1.bit }
    }
}

/// What the machine offers at one moment, as a ``ConditionSource`` reads it.
public struct SystemConditions: Sendable, Hashable, CustomStringConvertible {
    /// A default route exists.
    public var networkAvailable: Bool
    /// External power is connected (or the machine has no battery).
    public var externalPower: Bool
    /// A battery is low and discharging.
    public var batteryLow: Bool
    /// The watched file system is low on room.
    public var storageLow: Bool
    /// The network in use is metered; `nil` when that cannot be told (``unknown`` says why).
    public var networkMetered: Bool?
    /// The device is idle; `nil` when that cannot be told (``unknown`` says why).
    public var deviceIdle: Bool?
    /// Why a requirement cannot be told now (NetworkManager is not running, no system
    /// bus, …), as "why not yet" shows it.
    public var unknown: [Requirement: String]

    /// Conditions as given; by default, everything a run could need holds.
    public init(
        networkAvailable: Bool = true, externalPower: Bool = true, batteryLow: Bool = false, storageLow: Bool = false,
        networkMetered: Bool? = false, deviceIdle: Bool? = true, unknown: [Requirement: String] = [:]
    ) {
        self.networkAvailable = networkAvailable
        self.externalPower = externalPower
        self.batteryLow = batteryLow
        self.storageLow = storageLow
        self.networkMetered = networkMetered
        self.deviceIdle = deviceIdle
        self.unknown = unknown
    }

    /// `network up, external power, battery ok, storage ok, unmetered, device idle`, as
    /// logs show it.
    public var description: String {
        [
            networkAvailable ? "network up" : "network down",
            externalPower ? "external power" : "on battery",
            batteryLow ? "battery low" : "battery ok",
            storageLow ? "storage low" : "storage ok",
            networkMetered.map { $0 ? "metered" : "unmetered" } ?? "metered unknown",
            deviceIdle.map { $0 ? "device idle" : "device in use" } ?? "idle unknown",
        ].joined(separator: ", ")
    }
}

extension SystemConditions {
    /// Whether everything a requirement is decided on reads as in `other`: the reasons in
    /// ``unknown`` aside (what it says, not why it cannot say more).
    func holdsAsBefore(_ other: SystemConditions) -> Bool {
        networkAvailable == other.networkAvailable && externalPower == other.externalPower
            && batteryLow == other.batteryLow && storageLow == other.storageLow
            && networkMetered == other.networkMetered && deviceIdle == other.deviceIdle
    }
}

/// Where a ``Scheduler`` learns the machine's conditions. ``LinuxConditionSource`` reads
/// Linux; tests use a manual one (`OvertimeSchedulerTesting`).
public protocol ConditionSource: AnyObject, Sendable {
    /// The conditions now. Called from the scheduler's queue; must not block for long.
    func read() -> SystemConditions
    /// Starts announcing changes: `changed` is called (from any thread) whenever the
    /// conditions may have changed; the scheduler then reads them.
    func start(runtime: Runtime, changed: @escaping @Sendable () -> Void)
    /// Stops announcing changes.
    func stop()
    /// The requirements this source cannot tell at all here (not "does not hold": cannot
    /// be known), each with the reason. A request that needs one is refused at submission.
    func unevaluable() -> [Requirement: String]
}

extension ConditionSource {
    /// Every requirement can be told.
    public func unevaluable() -> [Requirement: String] { [:] }
}
