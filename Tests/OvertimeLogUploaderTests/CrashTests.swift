import Foundation
import OvertimeTestSupport
import Testing

@testable import OvertimeLogUploader

@Suite(
    "Crash safety: kill -9 while spooling and uploading to a real nginx, checkpoint damaged between runs",
    .timeLimit(.minutes(5)))
struct CrashTests {
    @Test func everyAcknowledgedLineIsOnTheServerExactlyOnceAfter100Kills() throws {
        let nginx = try NginxServer()
        let folder = TemporaryDirectory("crash")
        defer { folder.remove() }
        let spool = folder.path + "/spool"
        var generator = SplitMix64(seed: 0xC0FFEE)
        var acknowledged: [String: UInt64] = [:]  // per stream: a damaged checkpoint starts a new one
        var kills = 0
        var damaged = 0
        while kills < 100 {
            let child = try RunningChild(["crash-uploader", spool, nginx.baseURL])
            // Let it run a random while: appends, seals, uploads, checkpoints all happen.
            usleep(UInt32(20_000 + generator.next() % 180_000))
            child.send(SIGKILL)
            _ = child.waitForExit()
            kills += 1
            usleep(5000)  // the reader threads collect the last lines
            for line in child.output where line.hasPrefix("ACK ") {
                let parts = line.split(separator: " ")
                guard parts.count == 3, let sequence = UInt64(parts[2]) else { continue }
                acknowledged[String(parts[1]), default: 0] = max(acknowledged[String(parts[1]), default: 0], sequence)
            }
            // Every tenth kill, damage the checkpoint as a disk or an operator would.
            if kills % 10 == 5 {
                try damageCheckpoint(spool + "/checkpoint", kind: damaged % 3, &generator)
                damaged += 1
            }
        }
        // Uploads ran between the kills (not only in the final drain), so kills landed
        // during uploads and between a 2xx and its checkpoint as well as during appends.
        let storedBeforeDrain = nginx.storedFiles().count
        #expect(storedBeforeDrain > 20)
        let drain = try RunningChild(["crash-uploader", spool, nginx.baseURL, "drain"])
        #expect(drain.waitForExit(timeout: .seconds(60)) == 0)
        #expect(acknowledged.values.reduce(0, +) > 500)
        // What the collector holds, per stream: every stored segment, parsed.
        var owner: [String: [UInt64: String]] = [:]
        var duplicates = 0
        for file in nginx.storedFiles() {
            let parsed = SegmentFormat.parse(
                Array(try Data(contentsOf: URL(fileURLWithPath: nginx.dataPath + "/logs/" + file))))
            #expect(parsed.problem == nil, "\(file): \(parsed.problem ?? "")")
            let stream = try #require(parsed.streamID).description
            #expect(file.hasPrefix(stream + "/"), "stored under its own stream's name")
            for record in parsed.records {
                if owner[stream, default: [:]][record.sequence] != nil { duplicates += 1 }
                owner[stream, default: [:]][record.sequence] = file
            }
        }
        #expect(duplicates == 0, "no (stream, sequence) stored twice")
        #expect(owner.count == damaged + 1, "one new stream per damaged checkpoint, no more")
        var storedLines = 0
        for (stream, records) in owner {
            let stored = records.keys.sorted()
            storedLines += stored.count
            #expect(stored.first == 1, "stream \(stream) starts at 1")
            #expect(stored == Array(1...(stored.last ?? 0)), "no gaps in stream \(stream)")
            #expect((stored.last ?? 0) >= acknowledged[stream, default: 0], "every acknowledged line is on the server")
        }
        for stream in acknowledged.keys { #expect(owner[stream] != nil, "stream \(stream) reached the server") }
        print(
            "crash test: \(kills) kills, \(damaged) damaged checkpoints, \(acknowledged.values.reduce(0, +)) lines "
                + "acknowledged, \(storedLines) stored in \(nginx.storedFiles().count) segments "
                + "(\(storedBeforeDrain) before the final drain)")
    }

    /// Damages a checkpoint file: emptied, both slots' segment numbers flipped, or removed.
    private func damageCheckpoint(_ path: String, kind: Int, _ generator: inout SplitMix64) throws {
        let url = URL(fileURLWithPath: path)
        switch kind {
        case 0: try Data().write(to: url)
        case 1:
            var bytes = Array(try Data(contentsOf: url))
            let bit = UInt8(1 << (generator.next() % 8))
            bytes[32] ^= bit
            bytes[4096 + 32] ^= bit
            try Data(bytes).write(to: url)
        default: try FileManager.default.removeItem(at: url)
        }
    }
}
