import Foundation
import Overtime
import OvertimeRELP
import OvertimeTestSupport
import Testing

@testable import OvertimeLogUploader

#if canImport(Glibc)
    import Glibc
#endif

/// A collector that resets every connection: librelp's plain `send` then meets a broken
/// pipe, which must fail the upload and never end the process.
@Suite("RELP sink against a collector that resets connections", .timeLimit(.minutes(3)))
struct RELPBrokenPipeTests {
    @Test func aResetConnectionFailsTheUploadAndTheProcessLivesOn() async throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) }
        }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        listen(listener, 16)
        let port = Int(UInt16(bigEndian: address.sin_port))
        let resets = Recorder<Int>()
        Thread.detachNewThread {
            while true {
                let connection = accept(listener, nil, nil)
                if connection < 0 { return }
                var buffer = [UInt8](repeating: 0, count: 4096)
                _ = read(connection, &buffer, buffer.count)  // the open command: accept the session
                let offers = "200 OK\nrelp_version=0\nrelp_software=test\ncommands=syslog"
                let response = Array("1 rsp \(offers.utf8.count) \(offers)\n".utf8)
                _ = response.withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
                _ = read(connection, &buffer, buffer.count)  // the first messages, never answered
                var reset = linger(l_onoff: 1, l_linger: 0)
                setsockopt(connection, SOL_SOCKET, SO_LINGER, &reset, socklen_t(MemoryLayout<linger>.size))
                close(connection)  // RST while the client still sends: EPIPE
                resets.append(1)
            }
        }
        let folder = TemporaryDirectory("relp-reset")
        defer { folder.remove() }
        var options = SpoolConfiguration()
        options.segmentBytes = 4096
        let spool = try Spool(directory: folder.path, configuration: options, clock: SystemClock())
        for index in 1...100 { try spool.append("line \(index) " + String(repeating: "p", count: 100)) }
        try spool.sealActiveSegment()
        let sink = RELPSink(host: "127.0.0.1", port: port, timeout: .seconds(2))
        var failures = 0
        for _ in 0..<1 {
            for segment in spool.sealedSegments {
                do {
                    try await sink.store(segment)
                } catch {
                    #expect(error.code == .retryable)
                    failures += 1
                }
            }
        }
        #expect(failures > 0, "a reset connection fails the upload")
        #expect(resets.count > 0)
    }
}
