import Foundation
import Overtime
import OvertimeLogUploader
import OvertimeSupport
import OvertimeTestSupport
import Testing

/// The ingest socket and the datagram socket are claimed as the control socket is (see
/// `SocketClaimTests`): at most one holder, whatever the interleaving.
@Suite("Ingest sockets: claimed race-free", .blocksBriefly, .timeLimit(.minutes(3)))
struct IngestSocketClaimTests {
    /// The ingest socket and the datagram socket are claimed the same way.
    @Test func racingIngestAndDatagramClaimsLeaveExactlyOneHolder() throws {
        let folder = TemporaryDirectory("claim")
        defer { folder.remove() }
        let spool = try Spool(directory: folder.path + "/spool", clock: SystemClock())
        for datagram in [false, true] {
            let path = folder.path + (datagram ? "/dgram.sock" : "/ingest.sock")
            for _ in 0..<10 {
                let servers = Locked<[SpoolIngestServer]>([])
                let inputs = Locked<[LineInput]>([])
                raceOnThreads(4) { _ in
                    if datagram {
                        let input = LineInput(spool: spool)
                        if (try? input.readDatagrams(at: path)) != nil { inputs.withLock { $0.append(input) } }
                    } else if let server = try? SpoolIngestServer(path: path, spool: spool) {
                        servers.withLock { $0.append(server) }
                    }
                }
                #expect(servers.withLock { $0.count } + inputs.withLock { $0.count } == 1)
                var info = stat()
                #expect(lstat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
                for server in servers.withLock({ $0 }) { server.stop() }
                let stopped = DispatchSemaphore(value: 0)
                for input in inputs.withLock({ $0 }) { input.readToEnd { stopped.signal() } }
                if datagram { #expect(stopped.wait(timeout: .now() + 10) == .success) }
                #expect(!FileManager.default.fileExists(atPath: path), "removed when stopped")
            }
        }
    }
}
