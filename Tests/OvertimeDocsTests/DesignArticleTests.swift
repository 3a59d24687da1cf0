import Foundation
import Testing

/// Design.md against the code it describes: its tables name every module and package and
/// every thread the code starts, its count of the core's values is the core's, and its list
/// of the driver seam names every member of `DriverContext`. A change to any of them fails
/// here until the article says it.
@Suite("Design.md describes the code as it is")
struct DesignArticleTests {
    static let root = DocumentationTests.root

    static func read(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    static func design() throws -> String { try read("Sources/Overtime/Overtime.docc/Design.md") }

    /// The text between the heading `## title` and the next `## ` heading.
    static func section(_ title: String, of text: String) -> String {
        guard let start = text.range(of: "\n## \(title)\n") else { return "" }
        let rest = text[start.upperBound...]
        return String(rest[..<(rest.range(of: "\n## ")?.lowerBound ?? rest.endIndex)])
    }

    /// The names in the first column of the article's tables.
    static func tableNames(_ text: String) -> Set<String> {
        var names = Set<String>()
        for line in text.split(separator: "\n") where line.hasPrefix("| `") {
            let cell = line.dropFirst(3)
            if let end = cell.firstIndex(of: "`") { names.insert(String(cell[..<end])) }
        }
        return names
    }

    @Test func everyModuleAndPackageHasItsRow() throws {
        let manifest = try Self.read("Package.swift")
        let modules = manifest.split(separator: "\n").compactMap { line -> String? in
            guard let range = line.range(of: ".library(name: \"") else { return nil }
            return String(line[range.upperBound...].prefix { $0 != "\"" })
        }
        let packages = try FileManager.default.contentsOfDirectory(
            atPath: Self.root.appendingPathComponent("Packages").path
        ).filter { !$0.hasPrefix(".") }
        #expect(modules.count >= 10 && packages.count >= 2, "read \(modules) and \(packages)")
        let rows = Self.tableNames(Self.section("Modules", of: try Self.design()))
        let internalModules = ["OvertimeSupport", "OvertimeControlProtocol"]
        for name in modules + packages + internalModules {
            #expect(rows.contains(name), "Design.md's module tables have no row for \(name)")
        }
    }

    @Test func theCoresValuesAreCountedAsTheCoreHoldsThem() throws {
        let source = try Self.read("Sources/Overtime/Runtime/RuntimeCore.swift")
        // Stored properties of the class: `let`/`var` at its top level with no body.
        var stored: [String] = []
        for line in source.split(separator: "\n") {
            var text = Substring(line)
            guard text.hasPrefix("    "), !text.hasPrefix("     ") else { continue }
            text = text.dropFirst(4)
            for attribute in ["@exclusivity(unchecked) ", "private ", "package "] where text.hasPrefix(attribute) {
                text = text.dropFirst(attribute.count)
            }
            guard text.hasPrefix("let ") || text.hasPrefix("var "), !text.contains("{") else { continue }
            stored.append(String(text.dropFirst(4).prefix { $0 != ":" && $0 != " " }))
        }
        let words = [
            "eight", "nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
        ]
        let design = try Self.design()
        let said = words.firstIndex { design.contains("It holds \($0) values") }.map { $0 + 8 }
        #expect(said == stored.count, "Design.md counts \(String(describing: said)); RuntimeCore holds \(stored)")
    }

    @Test func theDriverSeamNamesEveryMemberOfTheContext() throws {
        let source = try Self.read("Sources/Overtime/Runtime/DriverContext.swift")
        // The class's own members, up to the end of its declaration.
        guard let start = source.range(of: "package final class DriverContext") else {
            Issue.record("no DriverContext in DriverContext.swift")
            return
        }
        let body = source[start.upperBound...]
        var members: [String] = []
        for line in body.split(separator: "\n") {
            if line.hasPrefix("}") { break }
            for prefix in [
                "    package func ", "    package var ", "    package static var ", "    package static func ",
            ]
            where line.hasPrefix(prefix) {
                members.append(String(line.dropFirst(prefix.count).prefix { $0.isLetter || $0.isNumber }))
            }
        }
        #expect(members.count >= 20, "read \(members)")
        let seam = Self.section("The driver seam", of: try Self.design())
        for member in members {
            #expect(seam.contains("`\(member)"), "Design.md's driver seam does not name DriverContext.\(member)")
        }
    }

    /// The names the project's code gives the threads it starts (`spawnThread(name:)`, and
    /// `SerialWorkQueue(name:)`, which starts one), in its sources, examples and packages.
    static func threadNamesInTheCode() throws -> Set<String> {
        var names = Set<String>()
        let folders =
            ["Sources", "Examples"]
            + (try FileManager.default.contentsOfDirectory(
                atPath: root.appendingPathComponent("Packages").path
            ).filter { !$0.hasPrefix(".") }.flatMap { ["Packages/\($0)/Sources", "Packages/\($0)/Examples"] })
        for folder in folders {
            let url = root.appendingPathComponent(folder)
            guard let files = FileManager.default.enumerator(atPath: url.path) else { continue }
            for case let file as String in files where file.hasSuffix(".swift") {
                let text = try String(contentsOf: url.appendingPathComponent(file), encoding: .utf8)
                for marker in ["spawnThread(name: \"", "SerialWorkQueue(name: \""] {
                    var rest = Substring(text)
                    while let found = rest.range(of: marker) {
                        let name = rest[found.upperBound...].prefix { $0 != "\"" }
                        if !name.contains("\\(") { names.insert(String(name)) }
                        rest = rest[found.upperBound...]
                    }
                }
            }
        }
        return names
    }

    @Test func everyThreadTheCodeStartsHasItsRowAndEveryRowAThread() throws {
        let inCode = try Self.threadNamesInTheCode()
        #expect(inCode.count >= 15, "read \(inCode.sorted())")
        let rows = Self.tableNames(Self.section("Threads each program makes", of: try Self.design()))
        for name in inCode.subtracting(rows).sorted() {
            Issue.record("Design.md's thread table has no row for '\(name)', which the code starts")
        }
        for name in inCode where name.utf8.count > 15 {
            Issue.record("'\(name)' is longer than the 15 bytes of a thread's name that the kernel keeps")
        }
        for name in rows.subtracting(inCode).sorted() where !name.hasPrefix("NIO-") {
            Issue.record("Design.md's thread table has a row for '\(name)', which no code starts")
        }
    }
}
