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
    /// once when the connection ends (the bus went away).
    init(context: DriverContext, address: String?, onLost: @escaping (String) -> Void) throws(SystemBusError) {
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

    /// Calls each of logind's manager signal `member`'s boolean argument.
    func onManagerSignal(_ member: String, _ body: @escaping (Bool) -> Void) {
        onSignal(sender: Logind.name, path: Logind.path, interface: Logind.manager, member) { message in
            let value = overtime_bus_read_bool(message)
            if value >= 0 { body(value != 0) }
        }
    }

    /// Calls `body` with each signal `member` of `interface` that `sender` sends from `path`.
    func onSignal(
        sender: String, path: String, interface: String, _ member: String, _ body: @escaping (OpaquePointer) -> Void
    ) {
        subscribe(body) { bus, slot, handler, user in
            overtime_bus_match_signal(bus, slot, sender, path, interface, member, handler, user)
        }
    }

    /// Calls `body` whenever an object of `sender` at `path` says its properties changed.
    func onPropertiesChanged(sender: String, path: String, _ body: @escaping () -> Void) {
        onSignal(sender: sender, path: path, interface: "org.freedesktop.DBus.Properties", "PropertiesChanged") { _ in
            body()
        }
    }

    /// Calls `body` whenever the bus name `name` gets an owner (`true`: the service
    /// started) or loses it (`false`).
    func onNameOwnerChange(_ name: String, _ body: @escaping (Bool) -> Void) {
        subscribe(
            { message in
                var changed: UnsafePointer<CChar>?
                var owner: UnsafePointer<CChar>?
                guard overtime_bus_read_name_owner_changed(message, &changed, &owner) >= 0, let changed, let owner,
                    String(cString: changed) == name
                else { return }
                body(owner.pointee != 0)
            }, with: overtime_bus_match_name_owner_changed)
    }

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
        return SystemBusError(
            "\(name.map { String(cString: $0) } ?? ""): \(text.map { String(cString: $0) } ?? "")")
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
    init(_ description: String) { self.description = description }
}
