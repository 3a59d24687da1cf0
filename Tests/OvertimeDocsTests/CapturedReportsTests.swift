// What a termination report and a watchdog report print, captured from runs and compared
// with the text the articles show: a change to either report fails here, with the new text.

import Foundation
import Logging
import Overtime
import OvertimeTestSupport
import OvertimeTesting
import Synchronization
import Testing

@Suite("The reports the articles show are what a run prints")
struct CapturedReportsTests {
    /// The lines of the ```text block that follows `marker` in the article at `path`.
    static func shownText(in path: String, after marker: String) throws -> String {
        let text = try String(contentsOf: DocumentationTests.root.appendingPathComponent(path), encoding: .utf8)
        guard let start = text.range(of: marker),
            let open = text.range(of: "```text\n", range: start.upperBound..<text.endIndex),
            let close = text.range(of: "\n```", range: open.upperBound..<text.endIndex)
        else { return "" }
        return String(text[open.upperBound..<close.lowerBound])
    }

    @Test func theTerminationReportInTheGrantsArticleIsWhatAnUnendedGrantPrints() async throws {
        let clock = ManualClock()
        let logs = LogCapture()
        var configuration = RuntimeConfiguration()
        configuration.signalHandling = nil
        configuration.logger = logs.logger
        let runtime = try Runtime(configuration: configuration, clock: clock)
        runtime.start()
        let id = runtime.beginBackgroundTask(name: "upload") {}  // an expiration handler that does not end it
        #expect(!id.isInvalid)
        runtime.requestBackground()
        clock.advance(by: .seconds(30))
        let printed = logs.messages(at: .critical).map(\.message).joined(separator: "\n")
        let shown = try Self.shownText(
            in: "Sources/Overtime/Overtime.docc/BackgroundTaskGrants.md", after: "A termination report")
        #expect(printed == shown, "the article shows:\n\(shown)\na run prints:\n\(printed)")
        runtime.requestTermination()
        await runtime.waitUntilTerminated()
    }

    @Test func theWatchdogReportInTheSystemdArticleIsWhatABlockedLoopPrints() async throws {
        let logs = LogCapture()
        var configuration = RuntimeConfiguration()
        configuration.signalHandling = nil
        configuration.logger = logs.logger
        configuration.watchdogTimeout = .milliseconds(200)
        configuration.watchdogPolicy = .reportOnly
        let tripped = Mutex(false)
        configuration.onWatchdogTrip = { _ in tripped.withLock { $0 = true } }
        let runtime = try Runtime(configuration: configuration)
        runtime.start()
        // A timer callback that holds the loop (real time: the watchdog is a real thread)
        // until the watchdog has reported it, 3 s at most.
        _ = runtime.schedule(after: .milliseconds(1)) {
            for _ in 0..<300 {
                guard !tripped.withLock({ $0 }) else { break }
                usleep(10_000)
            }
        }
        for _ in 0..<200 {
            guard !tripped.withLock({ $0 }) else { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        let printed = logs.messages(at: .critical).map(\.message).joined(separator: "\n")
        let shown = try Self.shownText(
            in: "Sources/Overtime/Overtime.docc/RunningUnderSystemd.md", after: "A watchdog report")
        // How long it was blocked when the watchdog looked differs from run to run.
        func masked(_ text: String) -> String {
            text.replacing(/blocked for [0-9.]+ (seconds|ms|s)/, with: "blocked for …")
        }
        #expect(masked(printed) == masked(shown), "the article shows:\n\(shown)\na run prints:\n\(printed)")
        runtime.requestTermination()
        await runtime.waitUntilTerminated()
    }
}
