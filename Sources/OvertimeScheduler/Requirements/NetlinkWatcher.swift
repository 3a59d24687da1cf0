// Kernel announcements on a netlink socket, watched on the runtime's loop: route and link
// changes (NETLINK_ROUTE) and device events (NETLINK_KOBJECT_UEVENT, for power supplies).

import CLibUV
import Overtime

#if canImport(Glibc)
    import Glibc
#endif

/// Calls back on the loop thread when a netlink socket has messages that pass `filter`.
/// Loop-thread only: made, fed and stopped there. While it watches, its libuv handle keeps
/// it alive (a watcher its owner let go of without stopping it is still there when the
/// kernel's next message calls back); ``stop()``, or the runtime's shutdown, lets it go.
final class NetlinkWatcher {
    /// Which kernel messages: a netlink protocol and the multicast groups to join.
    struct Subscription {
        let netlinkProtocol: Int32
        let groups: UInt32

        /// Links, IPv4 and IPv6 addresses and routes: a default route appearing or going.
        static let routes = Subscription(
            netlinkProtocol: 0,  // NETLINK_ROUTE
            groups: 0x1 | 0x10 | 0x40 | 0x100 | 0x400)  // LINK, IPV4_IFADDR, IPV4_ROUTE, IPV6_IFADDR, IPV6_ROUTE
        /// The kernel's device events (udev's source): a power supply plugged or its charge.
        static let deviceEvents = Subscription(netlinkProtocol: 15, groups: 1)  // NETLINK_KOBJECT_UEVENT
    }

    private let descriptor: Int32
    private let poll: UnsafeMutablePointer<uv_poll_t>
    private let filter: ([UInt8]) -> Bool
    private let onChange: () -> Void
    private var buffer = [UInt8](repeating: 0, count: 16 * 1024)

    /// Starts watching; `nil` with the failing call's errno when the kernel refuses.
    init(
        _ subscription: Subscription, context: DriverContext, filter: @escaping ([UInt8]) -> Bool = { _ in true },
        onChange: @escaping () -> Void
    ) throws(SystemCallError) {
        let descriptor = socket(
            AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue),
            subscription.netlinkProtocol)
        guard descriptor >= 0 else { throw SystemCallError(operation: "socket(AF_NETLINK)", errno: errno) }
        // struct sockaddr_nl: family, padding, port ID (0: the kernel picks), groups.
        var address = [UInt8](repeating: 0, count: 12)
        withUnsafeBytes(of: UInt16(AF_NETLINK)) { address.replaceSubrange(0..<2, with: $0) }
        withUnsafeBytes(of: subscription.groups) { address.replaceSubrange(8..<12, with: $0) }
        let bound = address.withUnsafeBytes {
            bind(descriptor, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), 12)
        }
        guard bound == 0 else {
            let code = errno
            close(descriptor)
            throw SystemCallError(operation: "bind(AF_NETLINK)", errno: code)
        }
        self.descriptor = descriptor
        self.filter = filter
        self.onChange = onChange
        poll = context.makeHandle(uv_poll_t.self)
        uv_poll_init(context.loop, poll, descriptor)
        poll.pointee.data = Unmanaged.passRetained(self).toOpaque()  // released by stop()
        uv_poll_start(poll, Int32(UV_READABLE.rawValue)) { handle, _, _ in
            Unmanaged<NetlinkWatcher>.fromOpaque(handle!.pointee.data).takeUnretainedValue().readable()
        }
        context.onShutdown { [weak self] in self?.stop() }
    }

    /// Stops watching, closes the socket and lets go of the handle's hold on the watcher.
    func stop() {
        guard uv_is_closing(UnsafeMutableRawPointer(poll).assumingMemoryBound(to: uv_handle_t.self)) == 0 else {
            return
        }
        uv_poll_stop(poll)
        uv_close(UnsafeMutableRawPointer(poll).assumingMemoryBound(to: uv_handle_t.self), nil)
        close(descriptor)
        Unmanaged<NetlinkWatcher>.fromOpaque(poll.pointee.data).release()  // last: it may end the watcher
    }

    /// Drains every message; one call back for the lot. An overrun (`ENOBUFS`: messages
    /// were lost) counts as a change: the caller reads the state anew anyway.
    private func readable() {
        var changed = false
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                if !changed, filter(Array(buffer.prefix(count))) { changed = true }
                continue
            }
            if count < 0, errno == EINTR { continue }
            if count < 0, errno == ENOBUFS { changed = true }
            break
        }
        if changed { onChange() }
    }
}

/// A system call that failed, named with its errno.
struct SystemCallError: Error, CustomStringConvertible {
    let operation: String
    let errno: Int32

    var description: String { "\(operation): \(String(cString: strerror(errno)))" }
}
