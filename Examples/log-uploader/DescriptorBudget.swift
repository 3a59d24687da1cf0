// The file-descriptor limit, raised as far as allowed and checked against what the daemon needs.

import Overtime
import OvertimeLogUploader
import OvertimePrometheus
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A daemon that runs out of descriptors rejects every line it is sent; so the limit is
/// raised at start (the soft limit to the hard one, as systemd recommends for programs that
/// do not use `select`) and checked once everything is open, before the daemon says it is
/// ready: what is open then, plus room for its connections, must fit.
enum DescriptorBudget {
    /// Raises `RLIMIT_NOFILE`'s soft limit to its hard limit; returns both as they are now.
    @discardableResult
    static func raiseSoftLimit() -> (soft: Int, hard: Int) {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return (0, 0) }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return (Int(clamping: limit.rlim_cur), Int(clamping: limit.rlim_max))
    }

    /// Descriptors open now.
    static func openNow() -> Int {
        (try? listDirectory("/proc/self/fd").get().count) ?? 0
    }

    /// What the daemon needs beyond what is open at rest: its ingestion, control and
    /// metrics connections at their caps, the uploads in flight (a socket each, and a segment file),
    /// a few for rotating segments, the checkpoint and the schedule's journal, and with
    /// system events, the system bus, logind's lock, inotify and the pressure trigger (opened
    /// on the loop once it runs).
    static func room(ingest: Bool, control: Bool, metrics: Bool, uploads: Int, systemEvents: Bool) -> Int {
        (ingest ? IngestProtocol.maximumConnections : 0) + (control ? connectionLimit(preferred: 64) : 0)
            + (metrics ? PrometheusExporter.maximumConnections + 1 : 0) + 2 * uploads + 8 + (systemEvents ? 4 : 0)
    }

    /// Whether the limit holds what is open now and `room` more; else the message.
    static func check(room: Int) -> String? {
        let (soft, hard) = raiseSoftLimit()
        let open = openNow()
        guard soft > 0, open + room > soft else { return nil }
        return "needs \(open + room) file descriptors (\(open) open at rest, \(room) for connections and uploads),"
            + " the limit is \(soft) (RLIMIT_NOFILE soft \(soft), hard \(hard)): raise it (LimitNOFILE=, ulimit -n)"
    }
}
