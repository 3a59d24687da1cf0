import CoreMetrics
import Logging
import Overtime

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The quota: room for an append, made by dropping the oldest segments when the policy says so.
extension Spool {
    func makeRoom(_ state: inout State, needed: Int) throws(SpoolError) {
        let quota = configuration.quotaBytes
        // A blocking policy waited for room in `append` before calling.
        if configuration.quotaPolicy == .dropOldest {
            while state.storedBytes + needed > quota, let oldest = state.resend.first ?? state.sealed.first {
                files.unlink(oldest.path)
                if state.resend.isEmpty { state.sealed.removeFirst() } else { state.resend.removeFirst() }
                state.storedBytes -= oldest.bytes
                state.droppedLines += oldest.records
                counters.droppedLines.increment(by: Int64(oldest.records))
                logger.error(
                    "spool quota full: dropped the oldest segment",
                    metadata: [
                        "segment": "\(oldest.name)", "lines": "\(oldest.records)",
                        "sequences": "\(oldest.firstSequence)...\(oldest.lastSequence)",
                    ])
            }
        }
        if state.storedBytes + needed > quota {
            counters.quotaRejections.increment()
            throw .quotaExceeded(quotaBytes: quota, neededBytes: needed)
        }
    }
}
