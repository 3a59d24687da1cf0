// A connection to the system bus through sd-bus, driven by the runtime's loop.

import CLibUV
import CSystemdBus
import Overtime
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// sd-bus on the runtime's loop: its descriptor polled, its timeout a loop timer, and
/// `sd_bus_process` run whenever either fires, until it has nothing left to do. Every
/// call is asynchronous: nothing here waits for the bus. Loop thread only.
final class SystemBus {
    private let context: DriverContext
    private var bus: OpaquePointer?
    private let poll: UnsafeMutablePointer<uv_poll_t>
    private let timer: UnsafeMutablePointer<uv_timer_t>
    private var slots: [OpaquePointer] = []
    private var callbacks: [Unmanaged<Callback>] = []
    private let onLost: (String) -> Void
    private var closed = false
    /// Inside `sd_bus_process` (a callback runs): calling it again would be refused
    /// (EBUSY); the running one goes on and re-arms the waits when it is through.
    private var processing = false

    /// A Swift closure sd-bus calls back with a message.
    final class Callback {
        let body: (OpaquePointer) -> Void
        init(_ body: @escaping (OpaquePointer) -> Void) { self.body = body }
    }

    /// Connects to the bus at `address` (the system bus when `nil`); `onLost` is called
    /// once when the connection ends (the bus went away), `onIgnored` with each signal not
    /// acted on (the name it claimed to come from, what it was, its real sender).
    init(
        context: DriverContext, address: String?, onLost: @escaping (String) -> Void,
        onIgnored: @escaping (_ claimed: String, _ what: String, _ sender: String?) -> Void
    ) throws(SystemBusError) {
        context.assertOnLoop()
        var failure = [CChar](repeating: 0, count: 256)
        guard overtime_bus_load(&failure, failure.count) == 0 else {
            throw SystemBusError("libsystemd cannot be loaded: \(LogindMonitor.text(failure))")
        }
        var opened: OpaquePointer?
        let result = address.map { overtime_bus_open_address(&opened, $0) } ?? overtime_bus_open_system(&opened)
        guard result >= 0, let opened else {
            throw SystemBusError("cannot connect to the system bus: \(errnoDescription(-result))")
        }
        self.context = context
        self.onLost = onLost
        self.onIgnored = onIgnored
        bus = opened
        poll = context.makeHandle(uv_poll_t.self)
        timer = context.makeHandle(uv_timer_t.self)
        uv_poll_init(context.loop, poll, overtime_bus_get_fd(opened))
        uv_timer_init(context.loop, timer)
        let me = Unmanaged.passUnretained(self).toOpaque()
        poll.pointee.data = me
        timer.pointee.data = me
        process()
    }

    /// Calls logind's `Inhibit`; `reply` gets the lock's descriptor or why not.
    func inhibit(what: String, who: String, why: String, reply: @escaping (Result<Int32, SystemBusError>) -> Void) {
        call(
            failed: { reply(.failure($0)) },
            reply: { message in
                if let error = Self.error(in: message) { return reply(.failure(error)) }
                let descriptor = overtime_bus_read_fd(message)
                reply(
                    descriptor >= 0
                        ? .success(descriptor)
                        : .failure(SystemBusError("Inhibit's reply: \(errnoDescription(-descriptor))")))
            }
        ) { bus, slot, handler, user in
            overtime_bus_call_inhibit(bus, slot, what, who, why, "delay", handler, user)
        }
    }

    /// Reads a `t` property of logind's manager.
    func managerProperty(_ name: String, reply: @escaping (Result<UInt64, SystemBusError>) -> Void) {
        property(
            of: Logind.name, at: Logind.path, interface: Logind.manager, name,
            read: { message in
                var value: UInt64 = 0
                let result = overtime_bus_read_variant_u64(message, &value)
                return result >= 0 ? value : nil
            }, reply: reply)
    }

    /// Reads the property `name` of `interface` on `destination`'s object `path` with
    /// `read` (`nil`: not of the type expected).
    func property<Value>(
        of destination: String, at path: String, interface: String, _ name: String,
        read: @escaping (OpaquePointer) -> Value?, reply: @escaping (Result<Value, SystemBusError>) -> Void
    ) {
        call(
            failed: { reply(.failure($0)) },
            reply: { message in
                if let error = Self.error(in: message) { return reply(.failure(error)) }
                guard let value = read(message) else {
                    return reply(.failure(SystemBusError("\(destination) \(path) \(name): not of the type expected")))
                }
                reply(.success(value))
            }
        ) { bus, slot, handler, user in
            overtime_bus_call_get_property(bus, slot, destination, path, interface, name, handler, user)
        }
    }

    /// Asks logind for the object path of session `id`.
    func sessionPath(_ id: String, reply: @escaping (Result<String, SystemBusError>) -> Void) {
        call(
            failed: { reply(.failure($0)) },
            reply: { message in
                if let error = Self.error(in: message) { return reply(.failure(error)) }
                var path: UnsafePointer<CChar>?
                guard overtime_bus_read_object_path(message, &path) >= 0, let path else {
                    return reply(.failure(SystemBusError("GetSession's reply is not an object path")))
                }
                reply(.success(String(cString: path)))
            }
        ) { bus, slot, handler, user in
            overtime_bus_call_get_session(bus, slot, id, handler, user)
        }
    }

    /// Calls `body` with each of logind's manager signal `member`'s boolean argument.
    func onManagerSignal(_ member: String, _ body: @escaping (Bool) -> Void) {
        onSignal(
            from: Logind.name, path: Logind.path, interface: Logind.manager, member,
            read: { message in
                let value = overtime_bus_read_bool(message)
                return value >= 0 ? value != 0 : nil
            }, body)
    }

    /// Calls `body` with each signal `member` of `interface` that the owner of `name` sends
    /// from `path`, read with `read` (`nil`: not of the form expected, dropped).
    ///
    /// The bus daemon filters broadcasts by the match's sender, but a signal addressed to
    /// this connection reaches it whatever its match rules say, from any local client, and
    /// sd-bus (with no list of the sender's well-known names) lets it through. So each one
    /// is checked here: its sender, stamped by the bus daemon, must be the connection that
    /// owns `name` now (followed with `GetNameOwner` and `NameOwnerChanged`). Anything else
    /// is ignored and counted.
    func onSignal<Value>(
        from name: String, path: String, interface: String, _ member: String,
        read: @escaping (OpaquePointer) -> Value?, _ body: @escaping (Value) -> Void
    ) {
        follow(name)
        subscribe(
            { [weak self] message in
                guard let self, let value = read(message) else { return }
                self.deliver(from: name, message: message, what: "\(interface).\(member)") { body(value) }
            },
            with: { bus, slot, handler, user in
                overtime_bus_match_signal(bus, slot, name, path, interface, member, handler, user)
            })
    }

    /// Calls `body` whenever the owner of `name` says the properties of its object at
    /// `path` changed (checked as ``onSignal(from:path:interface:_:read:_:)`` checks).
    func onPropertiesChanged(of name: String, path: String, _ body: @escaping () -> Void) {
        onSignal(
            from: name, path: path, interface: "org.freedesktop.DBus.Properties", "PropertiesChanged",
            read: { _ in () }, body)
    }

    /// Calls `body` with `true` when the bus name `name` has an owner (known at first, or
    /// a service started or took it over) and `false` when it has none (at first, or it
    /// went): once the first answer is in, then at each change.
    func onNameOwnerChange(_ name: String, _ body: @escaping (Bool) -> Void) {
        follow(name)
        followers[name, default: []].append(body)
        if case .known(let owner) = owners[name] { body(owner != nil) }
    }

    /// Signals that were not acted on: sent by a connection that does not own the name
    /// they claim to come from (or owner changes not sent by the bus itself).
    private(set) var ignoredSignals = 0

    // MARK: Who owns the names followed

    /// What is known of who owns a well-known name.
    private enum Owner {
        /// `GetNameOwner` not answered yet: signals wait here (at most a few) until it is.
        case asking(pending: [(sender: String?, deliver: () -> Void)])
        /// The owner's unique name, `nil` when the name has none.
        case known(String?)
    }

    private var owners: [String: Owner] = [:]
    private var followers: [String: [(Bool) -> Void]] = [:]
    private let onIgnored: (_ claimed: String, _ what: String, _ sender: String?) -> Void

    /// Starts following `name`'s owner, once: its `NameOwnerChanged` (arg0: nothing for
    /// other names), then its owner now. The bus answers in the order asked, so what comes
    /// last is what holds.
    private func follow(_ name: String) {
        guard owners[name] == nil, !closed else { return }
        owners[name] = .asking(pending: [])
        subscribe(
            { [weak self] message in self?.nameOwnerChanged(message, following: name) },
            with: { bus, slot, handler, user in
                overtime_bus_match_name_owner_changed(bus, slot, name, handler, user)
            })
        call(
            failed: { [weak self] _ in self?.ownerLearned(nil, of: name) },
            reply: { [weak self] message in
                var owner: UnsafePointer<CChar>?
                let known = Self.error(in: message) == nil && overtime_bus_read_string(message, &owner) >= 0
                self?.ownerLearned(known ? owner.map { String(cString: $0) } : nil, of: name)
            }
        ) { bus, slot, handler, user in
            overtime_bus_call_get_name_owner(bus, slot, name, handler, user)
        }
    }

    private func nameOwnerChanged(_ message: OpaquePointer, following name: String) {
        // Only the bus itself says who owns a name; a client's forgery has its own sender.
        let sender = overtime_bus_message_sender(message).map { String(cString: $0) }
        guard sender == "org.freedesktop.DBus" else {
            return ignore(claimed: "org.freedesktop.DBus", what: "NameOwnerChanged", sender: sender)
        }
        var changed: UnsafePointer<CChar>?
        var owner: UnsafePointer<CChar>?
        guard overtime_bus_read_name_owner_changed(message, &changed, &owner) >= 0, let changed, let owner,
            String(cString: changed) == name
        else { return }
        ownerLearned(owner.pointee == 0 ? nil : String(cString: owner), of: name)
    }

    private func ownerLearned(_ owner: String?, of name: String) {
        guard !closed else { return }
        let before = owners[name]
        owners[name] = .known(owner)
        switch before {
        case .asking(let pending):
            for signal in pending {
                if signal.sender != nil, signal.sender == owner {
                    signal.deliver()
                } else {
                    ignore(claimed: name, what: "a signal", sender: signal.sender)
                }
            }
        case .known(let previous):
            if previous == owner { return }
        case nil:
            return
        }
        for follower in followers[name] ?? [] { follower(owner != nil) }
    }

    private func deliver(from name: String, message: OpaquePointer, what: String, _ body: @escaping () -> Void) {
        let sender = overtime_bus_message_sender(message).map { String(cString: $0) }
        switch owners[name] {
        case .known(let owner?) where owner == sender:
            body()
        case .asking(var pending) where pending.count < Self.pendingLimit:
            pending.append((sender, body))
            owners[name] = .asking(pending: pending)
        default:
            ignore(claimed: name, what: what, sender: sender)
        }
    }

    /// Signals kept while a name's owner is asked for; more is a flood, not logind.
    private static let pendingLimit = 8

    private func ignore(claimed: String, what: String, sender: String?) {
        ignoredSignals += 1
        onIgnored(claimed, what, sender)
    }

    /// Whether the connection has ended (closed, or lost — possibly while it was being made).
    var isClosed: Bool { closed }

    /// Closes the connection; nothing is called back after it. Again is nothing.
    func close() {
        guard !closed else { return }
        closed = true
        for slot in slots { overtime_bus_slot_unref(slot) }
        slots = []
        if let bus { overtime_bus_close(bus) }
        bus = nil
        uv_poll_stop(poll)
        uv_timer_stop(timer)
        uv_close(UnsafeMutableRawPointer(poll).assumingMemoryBound(to: uv_handle_t.self), nil)
        uv_close(UnsafeMutableRawPointer(timer).assumingMemoryBound(to: uv_handle_t.self), nil)
        for callback in callbacks { callback.release() }
        callbacks = []
        owners = [:]
        followers = [:]
    }

    // MARK: Driving sd-bus

    private typealias Start = (
        OpaquePointer?, UnsafeMutablePointer<OpaquePointer?>?, overtime_bus_handler?, UnsafeMutableRawPointer?
    ) -> Int32

    /// An asynchronous method call whose reply goes to `reply` (once); `failed` when it
    /// cannot be sent.
    private func call(
        failed: (SystemBusError) -> Void, reply: @escaping (OpaquePointer) -> Void, _ start: Start
    ) {
        guard let bus, !closed else { return failed(SystemBusError("the system bus connection is closed")) }
        var box: Unmanaged<Callback>?
        let callback = Callback { [weak self] message in
            reply(message)
            if let box, let self, let index = self.callbacks.firstIndex(where: { $0.toOpaque() == box.toOpaque() }) {
                self.callbacks.remove(at: index).release()
            }
        }
        box = Unmanaged.passRetained(callback)
        callbacks.append(box!)
        // A floating slot (nil): sd-bus frees it with the reply or the connection.
        let result = start(bus, nil, Self.handler, box!.toOpaque())
        if result < 0 {
            callbacks.removeLast().release()
            return failed(SystemBusError("cannot send the call: \(errnoDescription(-result))"))
        }
        process()
    }

    /// A signal subscription kept until ``close()``.
    private func subscribe(_ body: @escaping (OpaquePointer) -> Void, with start: Start) {
        guard let bus, !closed else { return }
        let box = Unmanaged.passRetained(Callback(body))
        callbacks.append(box)
        var slot: OpaquePointer?
        if start(bus, &slot, Self.handler, box.toOpaque()) >= 0, let slot { slots.append(slot) }
        process()
    }

    private static let handler: overtime_bus_handler = { message, user, _ in
        guard let message, let user else { return 0 }
        Unmanaged<Callback>.fromOpaque(user).takeUnretainedValue().body(message)
        return 0
    }

    private static func error(in message: OpaquePointer) -> SystemBusError? {
        var name: UnsafePointer<CChar>?
        var text: UnsafePointer<CChar>?
        guard overtime_bus_message_error(message, &name, &text) == 1 else { return nil }
        let errorName = name.map { String(cString: $0) } ?? ""
        return SystemBusError("\(errorName): \(text.map { String(cString: $0) } ?? "")", name: errorName)
    }

    /// Runs sd-bus until it is idle, then waits for what it asks (its descriptor's events,
    /// its next timeout) on the loop.
    private func process() {
        guard let bus, !closed, !processing else { return }
        while true {
            processing = true
            let result = overtime_bus_process(bus)
            processing = false
            if closed { return }  // a callback closed it
            if result > 0 { continue }
            if result < 0 {
                close()
                return onLost(errnoDescription(-result))
            }
            break
        }
        let events = overtime_bus_get_events(bus)
        var wanted: Int32 = 0
        if events & Int32(POLLIN) != 0 { wanted |= Int32(UV_READABLE.rawValue) }
        if events & Int32(POLLOUT) != 0 { wanted |= Int32(UV_WRITABLE.rawValue) }
        uv_poll_start(poll, wanted) { handle, _, _ in
            Unmanaged<SystemBus>.fromOpaque(handle!.pointee.data).takeUnretainedValue().process()
        }
        var until: UInt64 = .max
        if overtime_bus_get_timeout(bus, &until) >= 0, until != .max {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            let nowMicroseconds = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
            let milliseconds = until > nowMicroseconds ? (until - nowMicroseconds + 999) / 1000 : 0
            uv_timer_start(
                timer,
                { handle in
                    Unmanaged<SystemBus>.fromOpaque(handle!.pointee.data).takeUnretainedValue().process()
                }, milliseconds, 0)
        } else {
            uv_timer_stop(timer)
        }
    }
}

/// logind's names on the bus.
enum Logind {
    static let name = "org.freedesktop.login1"
    static let path = "/org/freedesktop/login1"
    static let manager = "org.freedesktop.login1.Manager"
    static let session = "org.freedesktop.login1.Session"
}

/// Why the system bus, or logind on it, cannot be used.
struct SystemBusError: Error, CustomStringConvertible {
    let description: String
    /// The D-Bus error's name (`org.freedesktop.DBus.Error.ServiceUnknown`) when the bus or
    /// the service answered with one.
    let name: String?

    init(_ description: String, name: String? = nil) {
        self.description = description
        self.name = name
    }

    /// What the error means for asking `service` (as a person names it: "NetworkManager"),
    /// in the words the documentation uses; the raw error only where none fits.
    func reason(asking service: String) -> String {
        let prefix = "org.freedesktop.DBus.Error."
        return switch name.map({ $0.hasPrefix(prefix) ? String($0.dropFirst(prefix.count)) : $0 }) {
        case "ServiceUnknown", "NameHasNoOwner":
            "\(service) is not running"
        case "AccessDenied":
            "the system bus's policy does not let this program ask \(service)"
        case "UnknownProperty", "UnknownInterface", "UnknownMethod", "UnknownObject", "InvalidArgs":
            "\(service) does not offer what is asked (a version without it)"
        case "NoReply", "Timeout", "TimedOut":
            "\(service) did not answer"
        default:
            "\(service) cannot be asked (\(description))"
        }
    }
}
