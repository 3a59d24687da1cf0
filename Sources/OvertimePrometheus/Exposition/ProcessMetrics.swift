// The process's own figures, named as Prometheus' client libraries name them, read from
// /proc at each scrape.

import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// `process_cpu_seconds_total`, `process_resident_memory_bytes`,
/// `process_virtual_memory_bytes`, `process_open_fds`, `process_max_fds` and
/// `process_start_time_seconds`, as the Go and Python clients export them (so dashboards
/// and alerts written for those work unchanged). Read from `/proc/self` at each scrape:
/// memory-backed files, a few microseconds.
struct ProcessMetrics: Sendable {
    /// Seconds since the epoch at which the process started (it does not change).
    let startTime: Double?
    private let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))
    private let pageSize = Double(sysconf(Int32(_SC_PAGESIZE)))

    init() {
        let bootTime = Self.bootTime()
        let started = Self.statFields().flatMap { $0.count > 19 ? Self.number($0[19]) : nil }
        startTime = bootTime.flatMap { boot in started.map { boot + $0 / Double(sysconf(Int32(_SC_CLK_TCK))) } }
    }

    /// The text of these metrics, with their help and type lines.
    func exposition() -> [UInt8] {
        var text = ""
        func add(_ name: String, _ type: String, _ help: String, _ value: Double?) {
            guard let value else { return }
            text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(name) \(Self.format(value))\n"
        }
        let stat = Self.statFields()
        // Fields after the command's closing parenthesis: utime is the 14th field of the
        // line, the 12th here; stime, vsize and rss follow (proc(5)).
        let field = { (index: Int) -> Double? in stat.flatMap { $0.count > index ? Self.number($0[index]) : nil } }
        let cpu = field(11).flatMap { user in field(12).map { (user + $0) / ticksPerSecond } }
        add("process_cpu_seconds_total", "counter", "User and system CPU time the process spent, in seconds.", cpu)
        add(
            "process_resident_memory_bytes", "gauge", "Resident memory of the process, in bytes.",
            field(21).map { $0 * pageSize })
        add("process_virtual_memory_bytes", "gauge", "Virtual memory of the process, in bytes.", field(20))
        if case .success(let names) = listDirectory("/proc/self/fd") {
            // One of them is the listing's own descriptor.
            add("process_open_fds", "gauge", "Open file descriptors of the process.", Double(max(names.count - 1, 0)))
        }
        var limit = rlimit()
        if getrlimit(RLIMIT_NOFILE_VALUE, &limit) == 0 {
            add("process_max_fds", "gauge", "The most file descriptors the process may open.", Double(limit.rlim_cur))
        }
        add("process_start_time_seconds", "gauge", "When the process started, in seconds since the epoch.", startTime)
        return Array(text.utf8)
    }

    // The files are read as bytes, not split as Strings: a String's split compares
    // Characters, and the exporter is made at every start; log-uploader's making of these
    // figures took 0.91 million instructions so, 0.21 as bytes (callgrind).

    /// The fields of `/proc/self/stat` after the command name (which may hold spaces).
    private static func statFields() -> [ArraySlice<UInt8>]? {
        guard case .success(let bytes) = readWholeFile("/proc/self/stat"),
            let close = bytes.lastIndex(of: UInt8(ascii: ")"))
        else { return nil }
        return bytes[(close + 1)...].split(whereSeparator: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\n") })
    }

    /// A field's number, if it is one.
    private static func number(_ field: ArraySlice<UInt8>) -> Double? {
        Double(String(decoding: field, as: UTF8.self))
    }

    /// The system's boot time, in seconds since the epoch (`btime` of `/proc/stat`).
    private static func bootTime() -> Double? {
        guard case .success(let bytes) = readWholeFile("/proc/stat") else { return nil }
        for line in bytes.split(separator: UInt8(ascii: "\n")) where line.starts(with: "btime ".utf8) {
            return number(line.dropFirst(6).drop { $0 == UInt8(ascii: " ") })
        }
        return nil
    }

    /// A number as the text format writes it: integers without a fraction.
    static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : "\(value)"
    }
}

#if canImport(Glibc)
    private let RLIMIT_NOFILE_VALUE = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
#else
    private let RLIMIT_NOFILE_VALUE = RLIMIT_NOFILE
#endif
