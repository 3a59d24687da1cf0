// The acknowledged ingestion protocol: a producer learns which lines are durable.
//
// Over a Unix stream socket, in both directions UTF-8 lines ending in "\n":
//
//   producer:  line 1 \n line 2 \n … line n \n \n      (an empty line ends a batch)
//   spool:     ok <first> <last> \n                     the batch is durable, sequences first…last
//              ok - \n                                  the batch held no line
//              error <reason> \n                        nothing of the batch was stored
//
// Batches are answered in order. A producer may discard a batch once its "ok" arrived;
// a batch without an answer (the connection broke) may or may not be stored: send it
// again, and the collector sees the duplicate by content (the sequence numbers differ).
// Lines longer than the spool's limit make the whole batch an error; so does a batch of
// more than `IngestProtocol.maximumBatchLines` lines.

import Overtime
import OvertimeSupport

/// Constants and reply parsing of the acknowledged ingestion protocol (see the file).
package enum IngestProtocol {
    /// The most lines in one batch.
    package static let maximumBatchLines = 65_536
    /// The most connections a server serves at once; more are answered with an error.
    /// 64, or an eighth of the process's descriptor limit when that is lower.
    package static let maximumConnections = connectionLimit(preferred: 64)

    /// A reply, parsed.
    enum Reply: Equatable {
        case stored(ClosedRange<UInt64>?)
        case refused(String)
    }

    static func encode(_ reply: Reply) -> [UInt8] {
        switch reply {
        case .stored(let range?): Array("ok \(range.lowerBound) \(range.upperBound)\n".utf8)
        case .stored(nil): Array("ok -\n".utf8)
        case .refused(let reason): Array("error \(reason.replacing("\n", with: " "))\n".utf8)
        }
    }

    static func decode(_ line: String) -> Reply? {
        if line == "ok -" { return .stored(nil) }
        if line.hasPrefix("error ") { return .refused(String(line.dropFirst(6))) }
        let parts = line.split(separator: " ")
        guard parts.count == 3, parts[0] == "ok", let first = UInt64(parts[1]), let last = UInt64(parts[2]),
            first <= last
        else { return nil }
        return .stored(first...last)
    }
}
