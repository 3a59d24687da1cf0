import Foundation
import OvertimeTestSupport
import Testing

@Suite("The documentation: its code compiles, and the getting-started daemon works", .onOwnThread)
struct DocumentationTests {
    /// The package's root, from this file's place in it.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Every `.md` file of every DocC catalog: this package's and those of the packages of
    /// their own under `Packages/`.
    static func articles() throws -> [URL] {
        ["Sources", "Packages"].flatMap { folder -> [URL] in
            // Hidden folders skipped: a package's .build holds its dependencies' catalogs.
            guard
                let walker = FileManager.default.enumerator(
                    at: root.appendingPathComponent(folder), includingPropertiesForKeys: nil,
                    options: [.skipsHiddenFiles])
            else { return [] }
            return walker.compactMap { $0 as? URL }.filter { $0.pathExtension == "md" && $0.path.contains(".docc/") }
        }
    }

    /// The ```swift blocks of `text`, each as its lines.
    static func swiftBlocks(_ text: String) -> [[String]] {
        var blocks: [[String]] = []
        var current: [String]?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if current == nil, trimmed == "```swift" {
                current = []
            } else if current != nil, trimmed == "```" {
                blocks.append(current!)
                current = nil
            } else {
                current?.append(String(line))
            }
        }
        return blocks
    }

    /// `lines` without indentation, trailing spaces and blank lines: what must match.
    static func normalized(_ lines: [String]) -> [String] {
        lines.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// The lines of every Swift file that the packages compile for the documentation: the
    /// examples, this target, the fleet's test worker and the dashboard's tests.
    static func compiledLines() throws -> [(path: String, lines: [String])] {
        var files: [(String, [String])] = []
        for folder in [
            "Examples", "Tests/OvertimeDocsTests", "Packages/OvertimePostgres/Tests/FleetWorker",
            "Packages/OvertimeDashboard/Tests/OvertimeDashboardTests",
        ] {
            let url = root.appendingPathComponent(folder)
            // Hidden folders skipped: an example package's .build holds its dependencies.
            guard
                let walker = FileManager.default.enumerator(
                    at: url, includingPropertiesForKeys: nil, options: [.skipsHiddenFiles])
            else { continue }
            for case let file as URL in walker where file.pathExtension == "swift" {
                let text = try String(contentsOf: file, encoding: .utf8)
                files.append((file.path, normalized(text.components(separatedBy: "\n"))))
            }
        }
        return files
    }

    @Test func theCatalogsHaveArticles() throws {
        let names = Set(try Self.articles().map(\.lastPathComponent))
        for article in [
            "GettingStarted.md", "Lifecycle.md", "BackgroundTaskGrants.md", "RunningUnderSystemd.md",
            "TestingExpiration.md", "EmbeddingInAServer.md", "LogUploaderGuarantees.md", "Design.md",
            "RunningAFleet.md",
        ] {
            #expect(names.contains(article), "\(article) is missing")
        }
    }

    @Test func everySwiftBlockInTheArticlesIsCodeTheBuildCompiles() throws {
        let compiled = try Self.compiledLines()
        var checked = 0
        for article in try Self.articles() {
            let text = try String(contentsOf: article, encoding: .utf8)
            for block in Self.swiftBlocks(text) {
                let wanted = Self.normalized(block)
                guard !wanted.isEmpty else { continue }
                let found = compiled.contains { file in
                    file.lines.count >= wanted.count
                        && (0...(file.lines.count - wanted.count)).contains { start in
                            Array(file.lines[start..<start + wanted.count]) == wanted
                        }
                }
                #expect(
                    found,
                    "a swift block in \(article.lastPathComponent) is in no compiled file:\n\(block.joined(separator: "\n"))"
                )
                checked += 1
            }
        }
        #expect(checked >= 5, "the articles show code")
    }

    @Test(.startsProcesses) func theGettingStartedDaemonWritesItsSamplesOnSIGTERMAndExitsCleanly() throws {
        let folder = TemporaryDirectory("getting-started")
        defer { folder.remove() }
        let daemon = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("getting-started")
        let samples = folder.path + "/samples.txt"
        // Real time: samples each second, then SIGTERM after 2.5 s.
        let run = try SpawnedProcess.run(daemon.path, [samples], timeout: .milliseconds(2500))
        #expect(run.status == 0, "\(run.errors)")
        let written = try String(contentsOfFile: samples, encoding: .utf8).split(separator: "\n")
        #expect(written.count >= 1 && written.allSatisfy { $0.contains(" load ") }, "\(written)")
        #expect(run.output.contains("wrote \(written.count) samples to \(samples)"), "\(run.output)")
    }
}
