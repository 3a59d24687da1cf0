// Lines sent as datagrams to a daemon's Unix datagram socket, as syslog(3) producers do.

import Foundation
import OvertimeSupport

/// Sends each of `lines` as one datagram to the Unix socket at `path`; throws with the
/// system's reason when one cannot be sent.
package func sendDatagrams(_ lines: [String], to path: String) throws {
    let socket = makeUnixSocket(datagram: true)
    defer { close(socket) }
    guard let address = UnixSocketAddress(path) else {
        throw NSError(domain: "sendDatagrams", code: 1, userInfo: [NSLocalizedDescriptionKey: "bad path \(path)"])
    }
    for line in lines {
        let sent = address.withSockAddr { pointer, length in
            line.withCString { sendto(socket, $0, strlen($0), 0, pointer, length) }
        }
        guard sent > 0 else {
            throw NSError(
                domain: "sendDatagrams", code: Int(errno),
                userInfo: [NSLocalizedDescriptionKey: "sendto: \(errnoDescription())"])
        }
    }
}
