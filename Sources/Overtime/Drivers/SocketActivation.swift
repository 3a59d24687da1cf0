// Sockets a service manager passes at start (systemd's socket activation), taken by name.

import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Where a listening Unix socket comes from: a path this process binds, or a socket its
/// service manager passed it (systemd's socket activation: `LISTEN_FDS`,
/// `LISTEN_FDNAMES`), named by `FileDescriptorName=`.
///
/// A passed socket belongs to the service manager: its path, mode and group are the
/// `.socket` unit's, nothing is claimed or removed, and what producers send while the
/// daemon restarts waits in the socket for the next start.
public struct SocketEndpoint: Sendable, Hashable, CustomStringConvertible {
    private enum Storage: Hashable {
        case path(String)
        case inherited(String)
    }

    private let storage: Storage

    /// A socket this process binds at `path`.
    public static func path(_ path: String) -> SocketEndpoint { SocketEndpoint(storage: .path(path)) }

    /// The socket the service manager passed under `name` (`FileDescriptorName=`; a socket
    /// unit without one passes its sockets under the unit's name, e.g. `app.socket`).
    public static func inherited(name: String) -> SocketEndpoint { SocketEndpoint(storage: .inherited(name)) }

    /// A command-line argument: `fd://NAME` is the passed socket named `NAME` (the form
    /// Docker and others use), anything else a path.
    public init(argument: String) {
        storage =
            argument.hasPrefix(Self.scheme)
            ? .inherited(String(argument.dropFirst(Self.scheme.count))) : .path(argument)
    }

    private init(storage: Storage) { self.storage = storage }

    private static let scheme = "fd://"

    /// The path to bind, or `nil` for a passed socket.
    public var path: String? {
        if case .path(let path) = storage { return path }
        return nil
    }

    /// The name of the passed socket, or `nil` for a path.
    public var inheritedName: String? {
        if case .inherited(let name) = storage { return name }
        return nil
    }

    /// Whether `name` can name a passed socket, as systemd's `FileDescriptorName=` allows:
    /// 1 to 255 printable ASCII characters but `:`.
    public static func isValidName(_ name: String) -> Bool {
        (1...255).contains(name.utf8.count)
            && name.utf8.allSatisfy { (0x20..<0x7F).contains($0) && $0 != UInt8(ascii: ":") }
    }

    /// The path, or `fd://NAME`.
    public var description: String {
        switch storage {
        case .path(let path): path
        case .inherited(let name): Self.scheme + name
        }
    }

    /// The names of the sockets the service manager passed that nothing has taken yet:
    /// after a program has set up its sockets, each one is a `.socket` unit's socket it
    /// will never answer on (worth a warning).
    public static var untakenInheritedNames: [String] { InheritedSockets.passed.untakenNames }
}

/// The sockets passed to this process, as `sd_listen_fds_with_names(3)` reads them:
/// `LISTEN_PID` must be this process (a child that inherited the variables gets none),
/// the descriptors start at 3, and each is made close-on-exec at once. Each is taken at
/// most once.
package final class InheritedSockets: Sendable {
    /// What was passed to this process, read the first time it is asked for.
    package static let passed = InheritedSockets(
        pid: variable("LISTEN_PID"), count: variable("LISTEN_FDS"), names: variable("LISTEN_FDNAMES"))

    private struct Passed {
        let fd: Int32
        let name: String
        var taken = false
    }

    private let sockets: Locked<[Passed]>
    /// Why nothing was passed, when nothing was: said in a refusal.
    private let absence: String?

    /// The descriptors beyond this many are not believed: a variable that is not the
    /// service manager's.
    private static let maximumCount = 4096

    init(pid: String?, count: String?, names: String?) {
        guard let count else {
            sockets = Locked([])
            absence = "no sockets were passed to this process (LISTEN_FDS is not set)"
            return
        }
        guard let pid, let listener = pid_t(pid), listener == getpid() else {
            sockets = Locked([])
            absence = "the sockets in LISTEN_FDS were passed to process \(pid ?? "(LISTEN_PID unset)"), not to this one"
            return
        }
        guard let number = Int(count), (0...Self.maximumCount).contains(number) else {
            sockets = Locked([])
            absence = "LISTEN_FDS is not a count of descriptors: '\(count)'"
            return
        }
        var labels = names.map { $0.split(separator: ":", omittingEmptySubsequences: false).map(String.init) } ?? []
        if labels.count != number { labels = Array(repeating: "unknown", count: number) }
        var passed: [Passed] = []
        for (offset, label) in labels.enumerated() {
            let fd = Int32(3 + offset)
            let flags = fcntl(fd, F_GETFD)
            guard flags >= 0 else { continue }  // not open: nothing to take
            _ = fcntl(fd, F_SETFD, flags | FD_CLOEXEC)
            passed.append(Passed(fd: fd, name: label))
        }
        sockets = Locked(passed)
        absence = passed.isEmpty ? "LISTEN_FDS passed no open descriptors" : nil
    }

    /// The names not taken yet, in the order they were passed.
    package var untakenNames: [String] { sockets.withLock { $0.filter { !$0.taken }.map(\.name) } }

    /// Takes the passed Unix socket named `name` of the given kind (a listening stream
    /// socket, or a datagram socket), made non-blocking, with the path it is bound to
    /// (empty when it has none). The caller owns the descriptor.
    package func take(name: String, datagram: Bool) throws(ListeningSocket.Failure) -> (fd: Int32, path: String) {
        let wanted = datagram ? "a datagram socket (ListenDatagram=)" : "a stream socket (ListenStream=)"
        return try sockets.withLock { sockets throws(ListeningSocket.Failure) in
            let named = sockets.indices.filter { sockets[$0].name == name }
            guard !named.isEmpty else {
                let passed = sockets.map(\.name)
                throw .unavailable(
                    "no socket named '\(name)' was passed: "
                        + (passed.isEmpty
                            ? absence ?? "none were"
                            : "the service manager passed \(passed.map { "'\($0)'" }.joined(separator: ", "))"))
            }
            let kind = named.filter { Self.isDatagram(sockets[$0].fd) == datagram }
            guard kind.count == 1, let index = kind.first else {
                if kind.isEmpty { throw .unavailable("the socket passed as '\(name)' is not \(wanted)") }
                throw .unavailable(
                    "\(kind.count) sockets passed as '\(name)' are \(wanted): give each its own name (one .socket unit each, FileDescriptorName=)"
                )
            }
            guard !sockets[index].taken else {
                throw .unavailable("the socket passed as '\(name)' is already used by another input of this process")
            }
            let fd = sockets[index].fd
            if let problem = Self.problem(fd, datagram: datagram) {
                throw .unavailable("the socket passed as '\(name)' \(problem)")
            }
            let flags = fcntl(fd, F_GETFL)
            guard flags >= 0, fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0 else {
                throw .system(operation: "fcntl", errno: errno)
            }
            sockets[index].taken = true
            return (fd, Self.boundPath(fd))
        }
    }

    private static func variable(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    private static func option(_ fd: Int32, _ name: Int32) -> Int32? {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        return getsockopt(fd, SOL_SOCKET, name, &value, &length) == 0 ? value : nil
    }

    private static func isDatagram(_ fd: Int32) -> Bool {
        #if canImport(Glibc)
            option(fd, SO_TYPE) == Int32(SOCK_DGRAM.rawValue)
        #else
            option(fd, SO_TYPE) == SOCK_DGRAM
        #endif
    }

    /// Why `fd` cannot serve: not a socket, not a Unix one (peer credentials and paths are
    /// Unix sockets'), a stream socket that does not listen (`Accept=yes` passes
    /// connections).
    private static func problem(_ fd: Int32, datagram: Bool) -> String? {
        guard let domain = option(fd, SO_DOMAIN) else { return "is not a socket" }
        guard domain == AF_UNIX else { return "is not a Unix socket (ListenStream= or ListenDatagram= with a path)" }
        if !datagram, option(fd, SO_ACCEPTCONN) != 1 {
            return "is not listening (a .socket unit with Accept=yes passes connections; use Accept=no)"
        }
        return nil
    }

    private static func boundPath(_ fd: Int32) -> String {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        let offset = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)!
        guard bound == 0, Int(length) > offset else { return "" }
        return withUnsafeBytes(of: address.sun_path) { raw in
            let bytes = raw.prefix(Int(length) - offset)
            if bytes.first == 0 { return "@" + String(decoding: bytes.dropFirst(), as: UTF8.self) }
            return String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
    }
}
