// A listening Unix stream socket whose accepting never spins when descriptors run out.

import CLibUV
import OvertimeSupport
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A bound, listening, non-blocking Unix stream socket, accepted from by one thread.
///
/// When the process is out of descriptors (EMFILE, ENFILE) a waiting client keeps the
/// listener readable, and a poll on it returns at once, forever: the loop spins and
/// nothing else runs (libuv's own accept loop does exactly that once its reserve is
/// gone). So one descriptor is held in reserve and given up for a moment to take the
/// waiting client and tell it why it is turned away; if even that fails, ``accept(refusal:)``
/// says ``Accepted/exhausted`` and the caller stops watching the listener for a while.
package final class ListeningSocket: Sendable {
    /// The listening descriptor.
    package let fd: Int32
    /// The socket file (for a passed socket: where its service manager bound it).
    package let path: String
    /// The claim on the path; `nil` for a socket the service manager passed, whose path is its own.
    private let claim: SocketPathClaim?
    /// The reserve descriptor (-1 while given up), and whether the listener was closed.
    private let reserve: Locked<Int32>
    private let closed = Atomic<Bool>(false)

    /// Why the socket could not be made.
    package enum Failure: Error, Sendable {
        /// The path is not free for us: anything but a stale socket of an earlier run, or too long.
        case unavailable(String)
        /// A system call failed.
        case system(operation: String, errno: Int32)
    }

    /// What one ``accept(refusal:)`` gave.
    package enum Accepted: Sendable {
        /// A client, non-blocking and close-on-exec: the caller owns the descriptor.
        case connection(Int32)
        /// A client turned away for want of descriptors, told so and closed.
        case turnedAway
        /// Nobody is waiting.
        case none
        /// Out of descriptors with none in reserve: stop watching the listener for a while,
        /// or the poll spins.
        case exhausted
    }

    /// Claims `path` (see ``SocketPathClaim``: a stale socket of ours is replaced, anything
    /// else is refused) and puts a socket there with mode `mode`, already listening.
    package init(path: String, mode: mode_t, backlog: Int32) throws(Failure) {
        let claim = try SocketPathClaim(path: path, datagram: false)
        let fd = makeUnixSocket(datagram: false, nonBlocking: true)
        guard fd >= 0 else { throw .system(operation: "socket", errno: errno) }
        do throws(Failure) {
            try claim.place(fd, mode: mode) { listen($0, backlog) }
        } catch {
            close(fd)
            throw error
        }
        self.fd = fd
        self.claim = claim
        self.path = path
        reserve = Locked(Self.openReserve())
    }

    /// Takes the listening socket the service manager passed under `name`
    /// (see ``SocketEndpoint``): nothing is claimed, and nothing removed when it closes.
    package init(inheritedName name: String) throws(Failure) {
        (fd, path) = try InheritedSockets.passed.take(name: name, datagram: false)
        claim = nil
        reserve = Locked(Self.openReserve())
    }

    /// Binds `endpoint`'s path (see ``init(path:mode:backlog:)``) or takes the socket
    /// passed under its name.
    package convenience init(_ endpoint: SocketEndpoint, mode: mode_t, backlog: Int32) throws(Failure) {
        if let name = endpoint.inheritedName {
            try self.init(inheritedName: name)
        } else {
            try self.init(path: endpoint.path ?? "", mode: mode, backlog: backlog)
        }
    }

    /// Whether the socket came from the service manager rather than this process's own bind.
    package var isInherited: Bool { claim == nil }

    /// Whether the path still names this socket (`false` once anyone removed or replaced
    /// it); always `true` for a passed socket, whose path is the service manager's.
    package var isIntact: Bool { claim?.isIntact ?? true }

    /// Accepts the next waiting client. `refusal` is what a client turned away for want
    /// of descriptors is sent before it is closed.
    package func accept(refusal: [UInt8]) -> Accepted {
        reserve.withLock { reserve in
            if reserve < 0 { reserve = Self.openReserve() }
            let client = acceptOne()
            if client >= 0 { return .connection(client) }
            guard errno == EMFILE || errno == ENFILE else { return .none }  // EAGAIN, or a client gone already
            guard reserve >= 0 else { return .exhausted }
            close(reserve)
            let waiting = acceptOne()
            if waiting >= 0 { Self.refuse(waiting, refusal) }
            reserve = Self.openReserve()
            return waiting >= 0 ? .turnedAway : .none
        }
    }

    /// Sends `message` without waiting (it is short and the socket new: it fits) and
    /// closes `client` at once, so a crowd of refused clients never holds descriptors.
    package static func refuse(_ client: Int32, _ message: [UInt8]) {
        _ = message.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        close(client)
    }

    /// Closes the listener and the reserve and removes the socket file (if it is still ours;
    /// a passed socket's file is left to the service manager).
    package func closeAndRemove() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        claim?.remove()
        close(fd)
        reserve.withLock { reserve in
            if reserve >= 0 { close(reserve) }
            reserve = -1
        }
    }

    deinit {
        closeAndRemove()
    }

    private func acceptOne() -> Int32 {
        var client: Int32
        repeat {
            client = overtime_accept4(fd, nil, nil, socketFlags(nonBlocking: true))
        } while client < 0 && errno == EINTR
        return client
    }

    private static func openReserve() -> Int32 {
        open("/dev/null", O_RDONLY | O_CLOEXEC)
    }
}
