import Foundation
import Overtime
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Plays systemd: a datagram socket the daemon notifies.
package final class FakeSystemd: @unchecked Sendable {
    package let path: String
    private let socket: Int32
    package let messages = Recorder<(String, ContinuousClock.Instant)>()

    package init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("notify-\(UUID().uuidString)").path
        socket = makeUnixSocket(datagram: true)
        let address = UnixSocketAddress(path)!
        let fd = socket
        let bound = address.withSockAddr { bind(fd, $0, $1) }
        guard bound == 0 else { throw FakeSystemdError(message: "bind: \(errnoDescription())") }
        let messages = self.messages
        Thread.detachNewThread {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = recv(fd, &buffer, buffer.count, 0)
                if count <= 0 { break }
                let datagram = String(decoding: buffer[0..<count], as: UTF8.self)
                // A datagram's lines together: one appended at a time, a test that had just seen
                // `READY=1` could miss the `STATUS=` sent with it, if this thread was stopped
                // between the two (it was, with a debugger sampling the test process).
                let received = ContinuousClock.now
                messages.append(contentsOf: datagram.split(separator: "\n").map { (String($0), received) })
            }
        }
    }

    deinit {
        shutdown(socket, Int32(SHUT_RDWR))
        close(socket)
        unlink(path)
    }

    package var lines: [String] { messages.all.map(\.0) }

    package func waitFor(timeout: Duration = .seconds(20), _ match: (String) -> Bool) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if lines.contains(where: match) { return true }
            usleep(2000)
        }
        return false
    }
}

struct FakeSystemdError: Error {
    let message: String
}
