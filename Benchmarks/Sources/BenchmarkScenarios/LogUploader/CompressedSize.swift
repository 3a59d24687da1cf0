import Foundation
import OvertimeLogUploader

/// `compressed_bytes_per_line`: what one log line costs on the wire and in the bucket, per
/// encoding, over sealed 1 MiB segments (records with their headers, as sinks send them) of
/// a corpus shaped like a device's logs: nginx access lines, syslog lines from a few
/// daemons, JSON application events and kernel messages, mixed in a seeded order with
/// varying addresses, paths, IDs and timings.
public enum CompressedSize {
    /// Bytes per line of `lines` corpus lines encoded with `encoding` (named as in
    /// `SegmentEncoding(name:)`), segment by segment.
    public static func bytesPerLine(_ encoding: String, lines: Int, scratch: String) throws -> Double {
        guard let encoding = SegmentEncoding(name: encoding) else { throw ScenarioError("no encoding \(encoding)") }
        let spool = try UploadThroughput.emptySpool(scratch: scratch, name: "compressed")
        defer { try? FileManager.default.removeItem(atPath: spool.directory) }
        var generator = CorpusGenerator(seed: 0x5EED)
        var written = 0
        while written < lines {
            let batch = (0..<min(1_000, lines - written)).map { _ in Array(generator.next().utf8) }
            try spool.append(batch)
            written += batch.count
        }
        try spool.sealActiveSegment()
        var total = 0
        for segment in spool.sealedSegments {
            let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: segment.path)).prefix(segment.bytes))
            total += try encoding.encode(bytes).count
        }
        return Double(total) / Double(lines)
    }
}

/// Log lines of a small Linux device, seeded.
struct CorpusGenerator {
    private var state: UInt64
    private var second = 1_795_000_000

    init(seed: UInt64) { state = seed }

    private mutating func random(_ bound: Int) -> Int {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return Int((z ^ (z >> 31)) % UInt64(bound))
    }

    private static let paths = [
        "/api/v1/telemetry", "/api/v1/config", "/healthz", "/static/app.js", "/static/style.css", "/api/v1/events",
        "/login", "/api/v2/devices/%d/state", "/metrics", "/favicon.ico",
    ]
    private static let agents = [
        "curl/7.88.1", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0",
        "Prometheus/2.45.0", "python-requests/2.31.0", "Go-http-client/1.1",
    ]
    private static let daemons = ["sshd", "systemd", "NetworkManager", "chronyd", "dnsmasq", "cron"]
    private static let messages = [
        "Accepted publickey for deploy from 10.0.%d.%d port %d ssh2: ED25519 SHA256:Zq3x7LkP0vN8",
        "Started Session %d of User deploy.", "device (wlan0): state change: activated -> activated (reason 'none')",
        "Selected source 162.159.200.%d (2.debian.pool.ntp.org)", "query[A] updates.example.net from 10.0.%d.%d",
        "(root) CMD (/usr/local/bin/rotate-logs --keep %d)", "pam_unix(sshd:session): session closed for user deploy",
    ]
    private static let events = ["upload.started", "upload.finished", "sensor.read", "config.reloaded", "cache.miss"]

    /// The next line.
    mutating func next() -> String {
        second += random(3)
        let time = "2026-11-22T\(two(second / 3600 % 24)):\(two(second / 60 % 60)):\(two(second % 60))"
        switch random(10) {
        case 0..<4:
            let path = Self.paths[random(Self.paths.count)].replacingOccurrences(of: "%d", with: "\(random(5000))")
            return "10.0.\(random(4)).\(random(255)) - - [\(time)Z] \"\(["GET", "GET", "POST", "PUT"][random(4)]) "
                + "\(path) HTTP/1.1\" \([200, 200, 200, 204, 304, 404, 500][random(7)]) \(random(40_000)) \"-\" "
                + "\"\(Self.agents[random(Self.agents.count)])\" rt=0.\(String(format: "%03d", random(1000)))"
        case 4..<7:
            var message = Self.messages[random(Self.messages.count)]
            while let range = message.range(of: "%d") { message.replaceSubrange(range, with: "\(random(60_000))") }
            return "\(time).\(String(format: "%06d", random(1_000_000)))+00:00 edge-\(random(3)) "
                + "\(Self.daemons[random(Self.daemons.count)])[\(300 + random(30_000))]: \(message)"
        case 7..<9:
            return
                "{\"ts\":\"\(time).\(String(format: "%03d", random(1000)))Z\",\"level\":\"\(["info", "info", "warn", "debug"][random(4)])\","
                + "\"event\":\"\(Self.events[random(Self.events.count)])\",\"device\":\"dev-\(String(format: "%04x", random(65536)))\","
                + "\"request_id\":\"\(String(format: "%08x%08x", random(1 << 32), random(1 << 32)))\",\"duration_ms\":\(random(2500)),"
                + "\"bytes\":\(random(1 << 20))}"
        default:
            return
                "\(time) edge-\(random(3)) kernel: [\(String(format: "%6d.%06d", random(900_000), random(1_000_000)))] "
                + "\(["usb 1-1.2: new high-speed USB device number \(random(99)) using xhci_hcd", "EXT4-fs (mmcblk0p2): mounted filesystem with ordered data mode", "eth0: Link is Up - 1Gbps/Full - flow control rx/tx", "nf_conntrack: table full, dropping packet"][random(4)])"
        }
    }

    private func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
}
