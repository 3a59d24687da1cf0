// Whether the network is metered (NetworkManager) and the device idle (systemd-logind),
// read over the system bus and followed as they change.

import CSystemdBus
import Logging
import Overtime
import OvertimeSupport

/// NetworkManager's `Metered` and logind's `IdleHint`, read on the runtime's loop and
/// read again whenever either says its properties changed, or its service comes or goes.
/// What cannot be told (no system bus, the service not running, NetworkManager itself not
/// knowing) is `nil` with the reason. For the scheduler's `.unmeteredNetwork` and
/// `.deviceIdle`.
package final class SystemBusConditions: Sendable {
    /// What is known now.
    package struct Reading: Sendable, Equatable {
        /// The network in use is metered; `nil`: unknown, ``meteredUnknown`` says why.
        package var networkMetered: Bool?
        package var meteredUnknown: String?
        /// Every session is idle; `nil`: unknown, ``idleUnknown`` says why.
        package var deviceIdle: Bool?
        package var idleUnknown: String?

        /// Nothing known, for `reason`.
        package static func unknown(_ reason: String) -> Reading {
            Reading(networkMetered: nil, meteredUnknown: reason, deviceIdle: nil, idleUnknown: reason)
        }
    }

    private let runtime: Runtime
    private let address: String?
    private let logger: Logger
    private let published = Locked(Reading.unknown("the system bus is not read yet"))
    private let slot: LoopDriverSlot<ConditionsDriver>

    /// Conditions read from the bus at `address` (`nil`: `$DBUS_SYSTEM_BUS_ADDRESS`, else
    /// the standard socket) on `runtime`'s loop.
    package init(runtime: Runtime, address: String?, logger: Logger) {
        self.runtime = runtime
        self.address = address
        self.logger = logger
        slot = LoopDriverSlot(runtime: runtime)
    }

    /// What is known now.
    package var reading: Reading { published.withLock { $0 } }

    /// Connects (or waits for the bus) on the loop; `changed` is called on the loop
    /// whenever the reading changed. A second call does nothing. libsystemd is loaded only
    /// once a bus is there to talk to: a machine without one pays nothing for it.
    package func start(changed: @escaping @Sendable () -> Void) {
        let (address, logger, published) = (address, logger, published)
        slot.install(
            { context in
                ConditionsDriver(
                    context: context, address: address, logger: logger, published: published, changed: changed)
            }, start: { $0.start() }, stop: { $0.stop() })
    }

    /// Disconnects. From any thread; again is nothing.
    package func stop() {
        slot.stop { $0.stop() }
    }
}

/// The loop side of ``SystemBusConditions``. Loop only.
final class ConditionsDriver {
    private static let networkManager = "org.freedesktop.NetworkManager"
    private static let networkManagerPath = "/org/freedesktop/NetworkManager"

    private let address: String?
    private let published: Locked<SystemBusConditions.Reading>
    private let changed: @Sendable () -> Void
    private var link: SystemBusLink!
    private var stopped = false

    init(
        context: DriverContext, address: String?, logger: Logger, published: Locked<SystemBusConditions.Reading>,
        changed: @escaping @Sendable () -> Void
    ) {
        self.address = address
        self.published = published
        self.changed = changed
        link = SystemBusLink(
            context: context, address: address, logger: logger,
            connected: { [unowned self] bus in self.connected(bus) },
            lost: { [unowned self] reason in self.update { $0 = .unknown("the system bus went away (\(reason))") } },
            unusable: { [unowned self] reason in self.update { $0 = .unknown(reason) } },
            ignored: { service in context.countIgnoredSystemBusSignal(claimedSender: service) })
    }

    func start() {
        if !SystemBusLink.exists(address: address) {
            let socket = SystemBusLink.socketPath(ofAddress: SystemBusLink.effectiveAddress(address)) ?? "?"
            update { $0 = .unknown("no system bus (\(socket) does not exist)") }
        }
        link.start()
    }

    func stop() {
        stopped = true
        link.stop()
    }

    private func connected(_ bus: SystemBus) {
        // Each service is read once its owner is known, and again when it changes hands or
        // says its properties changed; a signal from any other connection is not acted on.
        bus.onNameOwnerChange(Self.networkManager) { [weak self] present in
            present ? self?.readMetered() : self?.update { $0.meteredUnknown(because: "NetworkManager is not running") }
        }
        bus.onNameOwnerChange(Logind.name) { [weak self] present in
            present ? self?.readIdle() : self?.update { $0.idleUnknown(because: "systemd-logind is not running") }
        }
        bus.onPropertiesChanged(of: Self.networkManager, path: Self.networkManagerPath) { [weak self] in
            self?.readMetered()
        }
        bus.onPropertiesChanged(of: Logind.name, path: Logind.path) { [weak self] in self?.readIdle() }
    }

    /// NetworkManager's `Metered`: 1 yes, 3 guess-yes; 2 no, 4 guess-no; 0 it does not know.
    private func readMetered() {
        link.bus?.property(
            of: Self.networkManager, at: Self.networkManagerPath, interface: Self.networkManager, "Metered",
            read: { message in
                var value: UInt32 = 0
                return overtime_bus_read_variant_u32(message, &value) >= 0 ? value : nil
            }
        ) { [weak self] result in
            self?.update { reading in
                switch result {
                case .success(1), .success(3): reading.networkMetered = true
                case .success(2), .success(4): reading.networkMetered = false
                case .success: reading.meteredUnknown(because: "NetworkManager does not know whether it is metered")
                case .failure(let error): reading.meteredUnknown(because: error.reason(asking: "NetworkManager"))
                }
                if reading.networkMetered != nil { reading.meteredUnknown = nil }
            }
        }
    }

    private func readIdle() {
        link.bus?.property(
            of: Logind.name, at: Logind.path, interface: Logind.manager, "IdleHint",
            read: { message in
                let value = overtime_bus_read_variant_bool(message)
                return value >= 0 ? value != 0 : nil
            }
        ) { [weak self] result in
            self?.update { reading in
                switch result {
                case .success(let idle):
                    reading.deviceIdle = idle
                    reading.idleUnknown = nil
                case .failure(let error): reading.idleUnknown(because: error.reason(asking: "systemd-logind"))
                }
            }
        }
    }

    private func update(_ body: (inout SystemBusConditions.Reading) -> Void) {
        guard !stopped else { return }
        let different = published.withLock { reading in
            let before = reading
            body(&reading)
            return reading != before
        }
        if different { changed() }
    }
}

extension SystemBusConditions.Reading {
    mutating func meteredUnknown(because reason: String) {
        networkMetered = nil
        meteredUnknown = reason
    }

    mutating func idleUnknown(because reason: String) {
        deviceIdle = nil
        idleUnknown = reason
    }
}
