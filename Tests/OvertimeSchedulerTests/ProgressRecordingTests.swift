import Overtime
import Testing

@testable import OvertimeScheduler

/// When a run's reported progress is written to the store, as a transcript of reports.
@Suite("Progress recording: at most one write a second per run")
struct ProgressRecordingTests {
    @Test func theFirstReportIsWrittenAtOnceAndLaterOnesASecondAfterTheLastWrite() {
        let start = MonotonicInstant(nanoseconds: 1_000_000_000)
        var lastWritten: MonotonicInstant?
        var transcript: [String] = []
        for (offset, label) in [(0, "first"), (300, "within the second"), (1_000, "a second on"), (2_500, "later")] {
            let now = start + .milliseconds(offset)
            let at = ProgressRecording.writeTime(lastWritten: lastWritten, now: now)
            transcript.append("\(label) at +\(offset) ms: written at +\(Int((at - start) / .milliseconds(1))) ms")
            if at == now { lastWritten = now }
        }
        #expect(
            transcript == [
                "first at +0 ms: written at +0 ms",
                "within the second at +300 ms: written at +1000 ms",
                "a second on at +1000 ms: written at +1000 ms",
                "later at +2500 ms: written at +2500 ms",
            ])
    }
}
