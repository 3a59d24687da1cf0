import Foundation
import OvertimeScheduler
import Testing

/// The dashboard in a real browser — headless Chromium driven by Selenium
/// (`Tests/Browser/dashboard_browser.py`) — against a real daemon: every page shows the
/// state the daemon made, an identifier with markup stays text and runs nothing, a run
/// started in the browser runs (checked here through the inspector), a forged post and one
/// without credentials are refused, a change appears on the open page without a reload, the
/// page fits a phone. It saves a PNG of each page in `.build/screenshots` (or
/// `$DASHBOARD_SCREENSHOTS`), and the gallery the docs show — every page, desktop and phone,
/// light and dark, each checked to fit its window and run no script — which
/// `scripts/update-dashboard-screenshots` puts into the docs.
@Suite("Dashboard in a browser", .serialized, .timeLimit(.minutes(5)))
struct DashboardBrowserTests {
    static let package = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static let screenshots =
        ProcessInfo.processInfo.environment["DASHBOARD_SCREENSHOTS"]
        ?? package.appendingPathComponent(".build/screenshots").path

    /// Runs the browser script against `dashboard` (`fleet`: its fleet part); what it printed.
    static func browse(_ dashboard: DashboardUnderTest, fleet: Bool) throws -> String {
        try FileManager.default.createDirectory(atPath: screenshots, withIntermediateDirectories: true)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", Self.package.appendingPathComponent("Tests/Browser/dashboard_browser.py").path]
        var environment = ProcessInfo.processInfo.environment
        environment["DASHBOARD_URL"] = dashboard.url
        environment["DASHBOARD_TOKEN"] = dashboard.token
        environment["DAEMON_SOCKET"] = dashboard.socket
        environment["DASHBOARD_SCREENSHOTS"] = screenshots
        environment["DASHBOARD_FLEET"] = fleet ? "1" : "0"
        environment["SE_OFFLINE"] = "true"  // Selenium uses the chromedriver given, never downloads one
        process.environment = environment
        let output = dashboard.folder + "/browser.out"
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        process.waitUntilExit()
        let printed = DashboardUnderTest.read(output)
        #expect(process.terminationStatus == 0, "\(printed)")
        #expect(printed.contains("0 failed"), "\(printed)")
        return printed
    }

    /// The gallery's pictures of `pages` (`gallery-NAME-SIZE-SCHEME`): what the docs show.
    static func gallery(_ pages: [String]) -> [String] {
        pages.flatMap { page in
            ["desktop", "phone"].flatMap { size in ["light", "dark"].map { "gallery-\(page)-\(size)-\($0)" } }
        }
    }

    static func removeScreenshots(_ pages: [String]) {
        for page in pages { try? FileManager.default.removeItem(atPath: screenshots + "/" + page + ".png") }
    }

    static func expectScreenshots(_ pages: [String]) {
        let pictures = (try? FileManager.default.contentsOfDirectory(atPath: screenshots)) ?? []
        for page in pages {
            #expect(pictures.contains(page + ".png"), "no screenshot of \(page)")
            let data = (try? Data(contentsOf: URL(fileURLWithPath: screenshots + "/" + page + ".png"))) ?? Data()
            #expect(data.starts(with: [0x89, 0x50, 0x4E, 0x47]) && data.count > 5000, "\(page).png is not a picture")
        }
    }

    @Test func everyPageAnActionAndALiveChangeInChromium() async throws {
        let dashboard = try DashboardUnderTest()
        defer { dashboard.stop() }
        let pages =
            [
                "login", "overview", "overview-dark", "overview-phone", "requests", "running", "history", "failed",
                "failed-dark", "instances", "story", "confirm", "requests-phone",
            ]
            + Self.gallery([
                "overview", "requests", "running", "history", "failed", "instances", "story", "confirm", "actions",
                "bulk-confirm", "sign-in", "outcome",
            ])
        Self.removeScreenshots(pages)
        let printed = try Self.browse(dashboard, fleet: false)
        if let latency = printed.split(separator: "\n").first(where: { $0.hasPrefix("live-update-seconds") }) {
            print("dashboard browser test: \(latency); screenshots in \(Self.screenshots)")
        }

        // What the browser did, as the schedule's own store tells it.
        #expect(
            try await dashboard.history("ok.background").contains { $0.result == .succeeded }, "run from the browser")
        #expect(try await dashboard.inspected("ok.queued")?.state == .blocked, "not cancelled by the forged post")
        #expect(try await dashboard.inspected("ok.fresh")?.state == .enqueued)
        Self.expectScreenshots(pages)
    }

    /// A fleet of two instances on a real PostgreSQL: `alpha` (the fixture, its control
    /// socket given to the dashboard) and `beta`, killed with its own request left behind.
    /// The pages show the fleet's schedule with the holder of the running work; the
    /// instances page lists both, and `beta` is retired from the browser (checked in the
    /// database); a submit to `alpha` appears on the open page (its notification).
    @Test func aFleetsPagesRetiringAnInstanceAndALiveChangeInChromium() async throws {
        let dashboard = try DashboardUnderTest(fleet: true)
        defer { dashboard.stop() }
        try await dashboard.killMember()
        #expect(try await dashboard.instances().first { $0.name == "beta" }?.requests == 1)
        let pages =
            [
                "fleet-overview", "fleet-requests", "fleet-running", "fleet-instances", "fleet-retire", "fleet-retired",
            ] + Self.gallery(["fleet-overview", "fleet-instances", "fleet-running", "fleet-retire"])
        Self.removeScreenshots(pages)
        let printed = try Self.browse(dashboard, fleet: true)
        if let latency = printed.split(separator: "\n").first(where: { $0.hasPrefix("live-update-seconds") }) {
            print("dashboard browser test, fleet: \(latency)")
        }
        // What the browser did, as the fleet's database tells it.
        let instances = try await dashboard.instances()
        #expect(!instances.contains { $0.name == "beta" }, "beta retired: \(instances)")
        #expect(instances.first { $0.name == "alpha" }.map { $0.connections > 0 && $0.requests == 1 } == true)
        #expect(
            try dashboard.fleet?.psql("SELECT count(*) FROM overtime.requests WHERE owner = 'beta'") == "0",
            "beta's own request removed")
        #expect(try await dashboard.inspected("ok.fleet-fresh")?.state == .enqueued)
        #expect(DashboardUnderTest.read(dashboard.actionLog).contains("\"retire\""), "the retirement is logged")
        Self.expectScreenshots(pages)
    }
}
