// One scrape of a daemon's GET /metrics, timed from outside as Prometheus sees it: connect,
// request, the whole exposition read.

import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `metrics_scrape_ms`: GET /metrics of a daemon started with `--metrics-listen`, at rest
/// and while it works (lines streaming in on stdin, spooled and counted).
public enum MetricsScrape {
    /// What the scrapes took and what they read.
    public struct Figures: Sendable {
        /// Microseconds from connect to the last byte, each scrape, in order.
        public var microseconds: [Int64]
        /// The exposition's size, bytes (the last scrape's).
        public var bytes: Int
    }

    /// Starts `executable` with `arguments` (in a folder of its own), waits for READY=1,
    /// then scrapes `port` `scrapes` times, 20 ms apart; `busy`: while a thread writes
    /// lines to its stdin throughout (about 50,000 a second).
    public static func measure(
        _ executable: String, _ arguments: [String], port: Int, scrapes: Int, busy: Bool
    ) throws -> Figures {
        let folder = try MeasuredProcess.temporaryFolder()
        defer { _ = try? FileManager.default.removeItem(atPath: folder) }
        let process = try MeasuredProcess(executable, arguments, folder: folder)
        _ = try process.waitForReady()
        let stop = Flag()
        let finished = DispatchSemaphore(value: 0)
        let writing = Unprotected(process)  // written only by the thread below until it signals
        let writer = Thread {
            defer { finished.signal() }
            var index = 0
            while busy, !stop.isSet {
                var batch: [UInt8] = []
                for _ in 0..<500 {
                    batch += Array("scrape line \(index) with some text as a daemon would log it\n".utf8)
                    index += 1
                }
                guard (try? writing.value.write(batch)) != nil else { return }
                usleep(10_000)
            }
        }
        writer.start()
        defer { stop.set() }  // also when a scrape fails
        usleep(busy ? 500_000 : 200_000)  // the spool has work, or the start has settled
        var figures = Figures(microseconds: [], bytes: 0)
        for _ in 0..<scrapes {
            let started = monotonicNanoseconds()
            let body = try scrape(port: port)
            figures.microseconds.append((monotonicNanoseconds() - started) / 1000)
            figures.bytes = body
            usleep(20_000)
        }
        stop.set()
        finished.wait()
        let (_, status) = try process.terminate(timeout: 60)
        guard status == 0 else {
            throw ScenarioError("\(executable) exited with status \(status): \(process.standardError.suffix(400))")
        }
        return figures
    }

    /// One GET /metrics on loopback `port`: the body's size, or an error unless 200.
    static func scrape(port: Int) throws -> Int {
        let answer = try LoopbackHTTP.exchange(port: port, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        guard answer.starts(with: Array("HTTP/1.1 200".utf8)),
            let split = answer.firstRange(of: Array("\r\n\r\n".utf8))
        else { throw ScenarioError("the scrape was not answered with 200") }
        return answer.count - split.upperBound
    }

    /// A loopback port nothing listens on now.
    public static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
                guard bind(fd, pointer, length) == 0 else { return -1 }
                return getsockname(fd, pointer, &length)
            }
        }
        guard bound == 0 else { throw ScenarioError("no free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    private static func monotonicNanoseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }

    /// A flag one thread sets and another reads.
    private final class Flag: @unchecked Sendable {
        private let lock = NSLock()
        private var value = false
        var isSet: Bool { lock.withLock { value } }
        func set() { lock.withLock { value = true } }
    }
}
