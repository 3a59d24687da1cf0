import BenchmarkScenarios
import Foundation

/// The results of one run, and the two files written from them.
struct Report {
    let mode: BenchmarkMode
    private(set) var values: [String: [(String, Double)]] = [:]
    var notes: [String] = []

    init(mode: BenchmarkMode) {
        self.mode = mode
    }

    mutating func record(_ metric: String, _ implementation: String, _ value: Double) {
        values[metric, default: []].append((implementation, value))
    }

    mutating func note(_ text: String) {
        notes.append(text)
    }

    static func format(_ value: Double) -> String {
        if value >= 1_000 {
            let rounded = Int(value.rounded())
            let formatter = NumberFormatter()
            formatter.numberStyle = .decimal
            formatter.groupingSeparator = ","
            formatter.usesGroupingSeparator = true
            return formatter.string(from: NSNumber(value: rounded)) ?? "\(rounded)"
        }
        return String(format: value >= 100 ? "%.0f" : "%.1f", value)
    }

    /// `{ metric: { implementation: number } }`, metrics and implementations in report order.
    func json() -> String {
        var lines: [String] = ["{"]
        let metrics = MetricSpec.all.filter { values[$0.name] != nil }
        for (metricIndex, spec) in metrics.enumerated() {
            lines.append("  \"\(spec.name)\": {")
            let rows = values[spec.name]!
            for (index, (implementation, value)) in rows.enumerated() {
                let number = value >= 1_000 ? "\(Int(value.rounded()))" : String(format: "%.2f", value)
                lines.append("    \"\(implementation)\": \(number)" + (index < rows.count - 1 ? "," : ""))
            }
            lines.append("  }" + (metricIndex < metrics.count - 1 ? "," : ""))
        }
        lines.append("}")
        return lines.joined(separator: "\n") + "\n"
    }

    func markdown() -> String {
        var text = """
            # Overtime benchmarks

            \(Self.machine()), mode `\(mode.rawValue)`, \(Self.timestamp()).
            Written by `Benchmarks/run`; every row below comes from that one run.

            | metric | what | results | target | met |
            |---|---|---|---|---|

            """
        for spec in MetricSpec.all {
            guard let rows = values[spec.name] else { continue }
            let results = rows.map { "`\($0.0)` \(Self.format($0.1))" }.joined(separator: "<br>")
            let met = spec.meetsTarget(Dictionary(rows, uniquingKeysWith: { $1 })).map { $0 ? "yes" : "**no**" } ?? "—"
            text += "| `\(spec.name)` (\(spec.unit)) | \(spec.what) | \(results) | \(spec.target) | \(met) |\n"
        }
        text += footprintTable()
        if !notes.isEmpty {
            text += "\nNotes:\n\n" + notes.map { "- \($0)\n" }.joined()
        }
        return text
    }

    /// The shipped programs side by side, from the footprint rows of this run.
    private func footprintTable() -> String {
        let columns: [(title: String, metric: String, suffix: String)] = [
            ("RSS at rest", "footprint_rss_mb", " MB"), ("threads", "footprint_threads", "#"),
            ("wake-ups/s at rest", "idle_wakeups_per_sec", ""), ("libraries", "footprint_shared_libraries", "#"),
            ("start → READY=1", "start_to_ready_ms", " ms"), ("SIGTERM → exit", "sigterm_to_exit_ms", " ms"),
            ("stripped, static", "binary_size_mb", " MB"),
        ]
        let programs = [
            "log_uploader", "log_uploader_metrics", "tiny_daemon", "tiny_daemon_metrics", "service_lifecycle_peer",
            "swift_floor",
        ]
        func value(_ metric: String, _ program: String) -> Double? {
            values[metric]?.first { $0.0 == program }?.1
        }
        guard programs.contains(where: { program in columns.contains { value($0.metric, program) != nil } }) else {
            return ""
        }
        var table = "\n### Footprint\n\n| program | " + columns.map(\.title).joined(separator: " | ") + " |\n"
        table += "|---|" + columns.map { _ in "---|" }.joined() + "\n"
        for program in programs {
            let cells = columns.map { column -> String in
                guard let value = value(column.metric, program) else { return "—" }
                // "#": a count, shown whole.
                return column.suffix == "#" ? "\(Int(value))" : Self.format(value) + column.suffix
            }
            table += "| `\(program)` | " + cells.joined(separator: " | ") + " |\n"
        }
        return table
    }

    func write(to folder: String) throws {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try json().write(toFile: folder + "/latest.json", atomically: true, encoding: .utf8)
        try markdown().write(toFile: folder + "/latest.md", atomically: true, encoding: .utf8)
        try Distributions.json().write(to: URL(fileURLWithPath: folder + "/distributions.json"))
    }

    /// "CPU model, N cores" from /proc/cpuinfo and the scheduler.
    static func machine() -> String {
        let info = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model =
            info.split(separator: "\n").first { $0.hasPrefix("model name") }
            .map { $0.split(separator: ":", maxSplits: 1).last!.trimmingCharacters(in: .whitespaces) } ?? "unknown CPU"
        return "\(model), \(ProcessInfo.processInfo.activeProcessorCount) cores"
    }

    static func timestamp() -> String {
        ISO8601DateFormatter().string(from: Date())
    }
}
