import Overtime
import OvertimeLogUploader

#if canImport(Glibc)
    import Glibc
#endif

/// The progress line on stderr. Every loss is on it, never only in a log:
///
/// `spooled=` lines made durable by this run · `uploaded=` lines acknowledged by the
/// collector (and the checkpoint) in this run, from this run's spool or an earlier one's
/// · `pending=` lines in the spool not yet uploaded · `rejected=` lines the spool refused
/// (full disk, quota) · `dropped=` lines the quota deleted · `truncated=` lines cut to the
/// line limit · `dead-lettered=` segments a collector refused for good, waiting in the
/// dead-letter folder for `redrive` · `state=` · `time-left=` in the grant.
final class Progress: Sendable {
    let runtime: Runtime
    let spool: Spool
    let uploader: LogUploader
    let input: LineInput

    init(runtime: Runtime, spool: Spool, uploader: LogUploader, input: LineInput) {
        self.runtime = runtime
        self.spool = spool
        self.uploader = uploader
        self.input = input
    }

    /// Prints every `seconds`, from a timer on the runtime's loop (no thread of its own),
    /// at planned times that do not drift with the printing.
    func every(seconds: Double) {
        let interval = Duration.nanoseconds(Int64(seconds * 1e9))
        printRepeatedly(at: runtime.clock.now + interval, every: interval)
    }

    private func printRepeatedly(at instant: MonotonicInstant, every interval: Duration) {
        runtime.schedule(at: instant) { [self] in
            print()
            printRepeatedly(at: instant + interval, every: interval)
        }
    }

    func print() {
        let left = runtime.backgroundTimeRemaining
        let grant =
            left == Runtime.unlimitedTime
            ? "unlimited"
            : "\(Double(Int(left.components.seconds * 10) + Int(left.components.attoseconds / 100_000_000_000_000_000)) / 10)s"
        let statistics = uploader.statistics
        let line =
            "spooled=\(spool.appendedLines) uploaded=\(statistics.uploadedLines) pending=\(spool.pendingLines)"
            + " rejected=\(input.rejected) dropped=\(spool.droppedLines) truncated=\(input.truncated)"
            + " dead-lettered=\(spool.deadLetterCount) state=\(runtime.state) time-left=\(grant)\n"
        _ = line.withCString { write(STDERR_FILENO, $0, strlen($0)) }
    }
}
