// Whether the kernel has a default route, asked over netlink (RTM_GETROUTE): no /proc.

import CLibUV

#if canImport(Glibc)
    import Glibc
#endif

/// The kernel's routing tables, dumped over a `NETLINK_ROUTE` socket: what `ip route`
/// reads. It needs no `/proc` (systemd's `ProcSubset=pid` hides `/proc/net`), only the
/// `AF_NETLINK` address family.
enum RouteTable {
    /// Whether a default route (IPv4 or IPv6) is usable: a unicast route to everything in
    /// the main table, through an interface that is not loopback, not marked dead or
    /// link-down. Throws when the kernel cannot be asked (the address family refused).
    static func hasDefaultRoute() throws(SystemCallError) -> Bool {
        let descriptor = socket(
            AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)  // NETLINK_ROUTE
        guard descriptor >= 0 else { throw SystemCallError(operation: "socket(AF_NETLINK)", errno: errno) }
        defer { close(descriptor) }
        var timeout = timeval(tv_sec: 2, tv_usec: 0)  // the kernel answers at once; never hang on it
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        // struct nlmsghdr (16 bytes) + struct rtmsg (12 bytes): a dump of every family's routes.
        var request = [UInt8](repeating: 0, count: 28)
        put(UInt32(28), into: &request, at: 0)  // nlmsg_len
        put(UInt16(26), into: &request, at: 4)  // RTM_GETROUTE
        put(UInt16(0x1 | 0x300), into: &request, at: 6)  // NLM_F_REQUEST | NLM_F_DUMP
        put(UInt32(1), into: &request, at: 8)  // sequence
        // rtm_family AF_UNSPEC (0): IPv4 and IPv6 alike.
        let sent = request.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, 0) }
        guard sent == request.count else { throw SystemCallError(operation: "send(RTM_GETROUTE)", errno: errno) }
        var buffer = [UInt8](repeating: 0, count: 32 * 1024)
        var found = false
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { throw SystemCallError(operation: "recv(RTM_GETROUTE)", errno: errno) }
            var offset = 0
            while offset + 16 <= count {
                let length = Int(read(UInt32.self, buffer, at: offset))
                let type = read(UInt16.self, buffer, at: offset + 4)
                guard length >= 16, offset + length <= count else { break }
                switch type {
                case 3: return found  // NLMSG_DONE
                case 2:  // NLMSG_ERROR
                    let code = read(Int32.self, buffer, at: offset + 16)
                    throw SystemCallError(operation: "RTM_GETROUTE", errno: -code)
                case 24:  // RTM_NEWROUTE
                    if !found, isUsableDefault(buffer, at: offset + 16, end: offset + length) { found = true }
                default: break
                }
                offset += (length + 3) & ~3
            }
        }
    }

    /// One `struct rtmsg` and its attributes, from `start` to `end`.
    private static func isUsableDefault(_ bytes: [UInt8], at start: Int, end: Int) -> Bool {
        guard end - start >= 12 else { return false }
        let destinationLength = bytes[start + 1]
        var table = UInt32(bytes[start + 4])
        let routeType = bytes[start + 7]
        let flags = read(UInt32.self, bytes, at: start + 8)
        // A route to everything, unicast (not unreachable, blackhole or prohibit), alive.
        guard destinationLength == 0, routeType == 1, flags & (0x1 | 0x10) == 0 else { return false }  // DEAD, LINKDOWN
        var outputInterface: UInt32?
        var offset = start + 12
        while offset + 4 <= end {
            let length = Int(read(UInt16.self, bytes, at: offset))
            let kind = read(UInt16.self, bytes, at: offset + 2)
            guard length >= 4, offset + length <= end else { break }
            if kind == 4, length >= 8 { outputInterface = read(UInt32.self, bytes, at: offset + 4) }  // RTA_OIF
            if kind == 15, length >= 8 { table = read(UInt32.self, bytes, at: offset + 4) }  // RTA_TABLE
            offset += (length + 3) & ~3
        }
        guard table == 254 else { return false }  // RT_TABLE_MAIN
        guard let outputInterface else { return true }  // a multipath route: its hops carry the interfaces
        var name = [CChar](repeating: 0, count: Int(IF_NAMESIZE) + 1)
        guard if_indextoname(outputInterface, &name) != nil else { return true }
        return name.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } != "lo"
    }

    private static func put<T: FixedWidthInteger>(_ value: T, into bytes: inout [UInt8], at offset: Int) {
        withUnsafeBytes(of: value.littleEndian) {
            bytes.replaceSubrange(offset..<offset + MemoryLayout<T>.size, with: $0)
        }
    }

    private static func read<T: FixedWidthInteger>(_ type: T.Type, _ bytes: [UInt8], at offset: Int) -> T {
        var value = T.zero
        withUnsafeMutableBytes(of: &value) { target in
            for index in 0..<MemoryLayout<T>.size { target[index] = bytes[offset + index] }
        }
        return T(littleEndian: value)
    }
}
