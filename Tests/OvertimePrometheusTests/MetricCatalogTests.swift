import Foundation
import OvertimeTestSupport
import Testing

@testable import OvertimePrometheus

/// The repository's root, from this file's place in it.
private let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().path

private func text(_ path: String) throws -> String {
    try String(contentsOfFile: root + "/" + path, encoding: .utf8)
}

/// Every `"overtime_…"` string literal in the Swift files under `folder`.
private func literals(under folder: String) -> Set<String> {
    let files = FileManager.default.enumerator(atPath: root + "/" + folder)?.compactMap { $0 as? String } ?? []
    var names: Set<String> = []
    for file in files where file.hasSuffix(".swift") && !file.hasSuffix("MetricCatalog.swift") {
        guard let source = try? text(folder + "/" + file) else { continue }
        for match in source.matches(of: /"(overtime_[a-z_]+)"/) { names.insert(String(match.output.1)) }
    }
    return names
}

/// The metric names in a PromQL expression, without a histogram's series suffixes.
private func metricNames(in expression: String) -> Set<String> {
    Set(
        expression.matches(of: /\b((?:overtime|process)_[a-z_]+)/).map { match in
            var name = String(match.output.1)
            for suffix in ["_bucket", "_count", "_sum"] where name.hasSuffix(suffix) { name.removeLast(suffix.count) }
            return name
        })
}

@Suite("Every metric has help, a place in the alerting table, and rules Prometheus accepts", .onOwnThread)
struct MetricCatalogTests {
    @Test func theCatalogNamesExactlyTheMetricsTheModulesRecord() {
        // The PostgreSQL store's notification channel is the one such string that is no metric.
        let recorded = literals(under: "Sources").union(literals(under: "Packages/OvertimePostgres/Sources"))
            .subtracting(["overtime_schedule"])
        let catalogued = Set(MetricCatalog.help.keys)
        #expect(recorded.subtracting(catalogued).isEmpty, "recorded without help: \(recorded.subtracting(catalogued))")
        #expect(
            catalogued.subtracting(recorded).isEmpty,
            "catalogued but never recorded: \(catalogued.subtracting(recorded))")
        for name in MetricCatalog.durationBuckets.keys { #expect(catalogued.contains(name), "\(name)") }
    }

    @Test func theAlertingTableCoversTheCatalogAndEveryRule() throws {
        let table = try text("Sources/OvertimePrometheus/OvertimePrometheus.docc/Alerting.md")
        for name in MetricCatalog.help.keys {
            #expect(table.contains("`\(name)`"), "\(name) is not in the alerting article")
        }
        let rules = try text("Examples/observability/alerts.yml")
        let expressions = rules.split(separator: "\n").compactMap { line -> String? in
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            return trimmed.hasPrefix("expr: ") ? String(trimmed.dropFirst(6)) : nil
        }
        #expect(expressions.count >= 15)
        for expression in expressions {
            #expect(
                table.contains(expression.replacingOccurrences(of: "|", with: "\\|")),
                "the article does not show: \(expression)")
            for name in metricNames(in: expression) {
                #expect(
                    MetricCatalog.help[name] != nil || name.hasPrefix("process_"),
                    "\(expression) names no metric: \(name)")
            }
        }
    }

    @Test(.startsProcesses) func promtoolAcceptsTheConfigurationAndTheRulesAndTheRulesPassTheirTests() throws {
        let folder = root + "/Examples/observability"
        for arguments in [
            ["check", "config", "prometheus.yml"], ["check", "rules", "alerts.yml"],
            ["test", "rules", "alerts-test.yml"],
        ] {
            let result = try SpawnedProcess.run(
                "/bin/sh", ["-c", "cd \(folder) && promtool \(arguments.joined(separator: " "))"])
            #expect(result.status == 0, "promtool \(arguments): \(result.output) \(result.errors)")
        }
    }
}
