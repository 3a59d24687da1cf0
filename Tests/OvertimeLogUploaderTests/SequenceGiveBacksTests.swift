import Testing

@testable import OvertimeLogUploader

/// Transcripts of appenders and batches: how far each appender's sequence numbers moved
/// when a batch before its own failed and gave its numbers back.
@Suite("SequenceGiveBacks: the numbers a failed batch gives back, per appender")
struct SequenceGiveBacksTests {
    /// One step of a transcript.
    enum Step: Sendable, CustomTestStringConvertible {
        /// An appender named so appends to the batch of `ticket`.
        case append(String, ticket: UInt64)
        case giveBack(UInt64)
        case issue(UInt64)
        case release(UInt64)

        var testDescription: String {
            switch self {
            case .append(let name, let ticket): "\(name) appends to \(ticket)"
            case .giveBack(let count): "give back \(count)"
            case .issue(let ticket): "issue \(ticket)"
            case .release(let ticket): "release \(ticket)"
            }
        }
    }

    /// Each transcript with the shift each appender reads at its end.
    static let transcripts: [([Step], [String: UInt64])] = [
        // Batch 1 (101...105) fails while batch 2 waits: X appended before the failure (its
        // 106...108 became 101...103), Y after it (it drew 104...105 and kept them). A shift
        // counted per batch moved Y down by five as well, to 99...100: an earlier batch's
        // lines (on a loaded machine with a full disk, acknowledged ranges named other lines).
        ([.append("x", ticket: 2), .giveBack(5), .append("y", ticket: 2), .issue(2)], ["x": 5, "y": 0]),
        // A give-back after a batch went to the writer (it failed itself) moves nothing of it.
        ([.append("x", ticket: 1), .issue(1), .giveBack(3), .append("y", ticket: 2), .issue(2)], ["x": 0, "y": 0]),
        // Two failures while a batch waits: who waited through both moves by both.
        (
            [.append("early", ticket: 3), .giveBack(4), .append("between", ticket: 3), .giveBack(2), .issue(3)],
            ["early": 6, "between": 2]
        ),
        // A released ticket keeps nothing: read again, it is as if issued at the read.
        ([.issue(1), .giveBack(2), .release(1), .append("late", ticket: 1)], ["late": 0]),
    ]

    @Test(arguments: transcripts)
    func eachAppenderMovesByWhatWasGivenBackWhileItsBatchWaited(steps: [Step], shifts: [String: UInt64]) {
        var giveBacks = SequenceGiveBacks()
        var appenders: [String: (ticket: UInt64, mark: UInt64)] = [:]
        for step in steps {
            switch step {
            case .append(let name, let ticket): appenders[name] = (ticket, giveBacks.mark)
            case .giveBack(let count): giveBacks.giveBack(count)
            case .issue(let ticket): giveBacks.issue(ticket)
            case .release(let ticket): giveBacks.release(ticket)
            }
        }
        let read = appenders.mapValues { giveBacks.shift(ticket: $0.ticket, since: $0.mark) }
        #expect(read == shifts)
    }
}
