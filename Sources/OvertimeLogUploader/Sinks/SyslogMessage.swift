// RFC 5424 messages for the syslog-based sinks (plain TCP and RELP).

import Overtime

#if canImport(Glibc)
    import Glibc
#endif

/// One spooled record as an RFC 5424 message, with the stream ID, sequence and segment in
/// structured data so a collector can spot gaps and drop duplicates.
package enum SyslogMessage {
    /// `<14>1 2026-11-21T14:02:21.123456Z host app pid - [overtime@32473 …] line`.
    package static func format(
        _ record: SpoolRecord, stream: StreamID, segment: UInt64, hostname: String, appName: String
    ) -> String {
        let facilityUser = 1
        let informational = 6
        let line = String(decoding: record.line, as: UTF8.self)
        return "<\(facilityUser * 8 + informational)>1 \(timestamp(record.time)) \(hostname) \(appName) "
            + "\(getpid()) - [overtime@32473 stream=\"\(stream)\" seq=\"\(record.sequence)\" segment=\"\(segment)\"] "
            + line
    }

    /// Every record of `segment` as a message, in order.
    package static func messages(
        of segment: SealedSegment, hostname: String, appName: String
    ) throws(SinkError) -> [String] {
        let records: [SpoolRecord]
        do {
            records = try segment.readRecords()
        } catch {
            throw .retryable("cannot read \(segment.path): \(error)", retryAfter: nil)
        }
        return records.map {
            format($0, stream: segment.stream, segment: segment.number, hostname: hostname, appName: appName)
        }
    }

    /// This machine's host name, for the HOSTNAME field.
    package static var hostname: String {
        var name = [CChar](repeating: 0, count: 256)
        gethostname(&name, name.count)
        return String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// RFC 3339 UTC with microseconds.
    static func timestamp(_ nanoseconds: UInt64) -> String {
        WallClockInstant(nanosecondsSinceEpoch: Int64(clamping: nanoseconds)).description
    }
}
