import Foundation
import Testing

@testable import OvertimeLogUploader

@Suite("Crash safety: kill -9 while spooling and uploading to a real nginx", .timeLimit(.minutes(5)))
struct CrashTests {
    @Test func everyAcknowledgedLineIsOnTheServerExactlyOnceAfter100Kills() throws {
        let nginx = try NginxServer()
        let folder = TemporaryDirectory("crash")
        defer { folder.remove() }
        let spool = folder.path + "/spool"
        var generator = SplitMix64(seed: 0xC0FFEE)
        var acknowledged: UInt64 = 0
        var kills = 0
        while kills < 100 {
            let child = try RunningChild(["crash-uploader", spool, nginx.baseURL])
            // Let it run a random while: appends, seals, uploads, checkpoints all happen.
            usleep(UInt32(20_000 + generator.next() % 180_000))
            child.send(SIGKILL)
            _ = child.waitForExit()
            kills += 1
            usleep(5000)  // the reader threads collect the last lines
            if let last = child.output.last(where: { $0.hasPrefix("ACK ") }).flatMap({ UInt64($0.dropFirst(4)) }) {
                #expect(last >= acknowledged, "acknowledged sequences never go back")
                acknowledged = max(acknowledged, last)
            }
        }
        // Uploads ran between the kills (not only in the final drain), so kills landed
        // during uploads and between a 2xx and its checkpoint as well as during appends.
        let storedBeforeDrain = nginx.storedFiles().count
        #expect(storedBeforeDrain > 20)
        let drain = try RunningChild(["crash-uploader", spool, nginx.baseURL, "drain"])
        #expect(drain.waitForExit(timeout: .seconds(60)) == 0)
        #expect(acknowledged > 500)
        // What the collector holds: every stored segment, parsed.
        var owner: [UInt64: String] = [:]
        var duplicates = 0
        var streams = Set<StreamID>()
        for file in nginx.storedFiles() {
            let parsed = SegmentFormat.parse(
                Array(try Data(contentsOf: URL(fileURLWithPath: nginx.dataPath + "/logs/" + file))))
            #expect(parsed.problem == nil, "\(file): \(parsed.problem ?? "")")
            if let stream = parsed.streamID { streams.insert(stream) }
            for record in parsed.records {
                if owner[record.sequence] != nil { duplicates += 1 }
                owner[record.sequence] = file
            }
        }
        #expect(streams.count == 1)
        #expect(duplicates == 0, "no sequence stored in two segments")
        let stored = owner.keys.sorted()
        #expect(stored.first == 1)
        #expect(stored == Array(1...(stored.last ?? 0)), "no gaps")
        #expect((stored.last ?? 0) >= acknowledged, "every acknowledged line is on the server")
        print(
            "crash test: \(kills) kills, \(acknowledged) lines acknowledged, \(stored.count) stored in "
                + "\(nginx.storedFiles().count) segments (\(storedBeforeDrain) before the final drain)")
    }
}
