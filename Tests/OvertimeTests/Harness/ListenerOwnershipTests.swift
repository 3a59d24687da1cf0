// The harness tells a server's own listening socket from another program's on the same
// port: test servers choose free ports before they bind them, and another test's server can
// take one in between.

import Foundation
import OvertimeTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Who listens on a port") struct ListenerOwnershipTests {
    @Test func aPortIsAProcesssOnlyWhileItOrItsChildrenHoldTheListeningSocket() throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #expect(descriptor >= 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(descriptor, pointer, length) == 0 && listen(descriptor, 1) == 0
                    && getsockname(descriptor, pointer, &length) == 0
            }
        }
        #expect(bound)
        let port = Int(UInt16(bigEndian: address.sin_port))
        // A child started afterwards does not inherit the socket (close-on-exec): it is not its.
        let child = try SpawnedProcess("/bin/sleep", ["30"])
        defer {
            child.send(SIGKILL)
            _ = child.waitForExit()
        }
        #expect(listens(pid: getpid(), port: port), "this process listens on \(port)")
        #expect(!listens(pid: child.pid, port: port), "the child holds no socket of \(port)")
        close(descriptor)
        #expect(!listens(pid: getpid(), port: port), "closed, nobody listens on \(port)")
    }
}
