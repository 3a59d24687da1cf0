import Foundation
import Hummingbird
import Logging
import Overtime
import OvertimeScheduler
import ServiceLifecycle
import Synchronization
import Testing

@testable import OvertimeDashboard

/// The overview's counts pass over every request: they are counted once for every viewer
/// until the schedule changes (or the chart's hour moves on a minute), and are never stale.
@Suite("The overview counted once per change", .serialized, .timeLimit(.minutes(2)))
struct OverviewCountingTests {
    @Test func viewersShareOneCountUntilTheScheduleChangesOrTheMinuteTurns() async throws {
        let daemon = try await onOwnThread { try DashboardUnderTest() }
        defer { daemon.stop() }
        let inspector = try await daemon.database.inspector()
        defer { inspector.close() }
        // The dashboard's clock is the test's: the chart's hour moves when the test says.
        let start = SystemClock().wallClockNow
        let minute: Int64 = 60_000_000_000
        let clock = Mutex(WallClockInstant(nanosecondsSinceEpoch: start.nanosecondsSinceEpoch / minute * minute))
        let dashboard = try Dashboard(
            inspector: inspector,
            configuration: DashboardConfiguration(
                credentials: try DashboardCredentials(contentsOf: daemon.credentials)),
            logger: Logger(label: "overview-counting-test")
        ) { clock.withLock { $0 } }
        let port = PortBox()
        let app = dashboard.application(port: 0) { port.set($0) }
        let group = ServiceGroup(services: [app], logger: .init(label: "overview-counting-test"))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            let base = "http://127.0.0.1:\(try await port.wait())"
            let token = daemon.token
            func waitingShown() async throws -> Int {
                try await onOwnThread {
                    let page = try Curl.request(base + "/overview", bearer: token)
                    guard page.status == 200, let count = Self.tile("waiting", in: page.body) else {
                        throw DashboardUnderTest.Failure("no waiting tile: \(page.status) \(page.body.prefix(300))")
                    }
                    return count
                }
            }

            // Five viewers at once, while nothing changes, cost one count. The daemon may write
            // on its own (a run that was due): a load between two equal change marks is the
            // one that must not count again.
            var quiet = false
            for _ in 0..<20 {
                guard !quiet else { break }
                let before = dashboard.overview.timesCounted
                let mark = try await inspector.changeMark()
                try await withThrowingTaskGroup(of: Int.self) { loads in
                    for _ in 0..<5 { loads.addTask { try await waitingShown() } }
                    try await loads.waitForAll()
                }
                _ = try await waitingShown()
                guard try await inspector.changeMark() == mark else { continue }
                quiet = true
                #expect(dashboard.overview.timesCounted - before == 1, "six loads at one change mark")
            }
            #expect(quiet, "the schedule changed during each of 20 tries")

            // A change is counted at the next load: the page shows the request just submitted.
            let shown = try await waitingShown()
            let counted = dashboard.overview.timesCounted
            #expect(try daemon.control("submit", ["ok.counted-again"]).contains("submitted"))
            #expect(try await waitFor { try await waitingShown() == shown + 1 })
            #expect(dashboard.overview.timesCounted > counted)

            // The chart's hour moves with the minute: counted again, the schedule unchanged.
            for _ in 0..<20 {
                let mark = try await inspector.changeMark()
                let before = dashboard.overview.timesCounted
                clock.withLock { $0 = $0 + .seconds(60) }
                _ = try await waitingShown()
                guard try await inspector.changeMark() == mark else { continue }
                #expect(dashboard.overview.timesCounted - before == 1, "a new minute, no change")
                break
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
    }

    /// A tag's pending or running list longer than a page shows the overview's count of the
    /// tag's unfinished requests, which the inspector could tell only by reading each row;
    /// it follows a change. A list with another filter, or of another state, shows none. The
    /// Requests page's list of those that failed for good shows the overview's count too.
    @Test(arguments: [false, true])
    func aTagsListLongerThanAPageShowsTheOverviewsCountOfTheTag(fleet: Bool) async throws {
        let daemon = try await onOwnThread { try DashboardUnderTest(fleet: fleet) }
        defer { daemon.stop() }
        for number in 0..<55 {
            #expect(try daemon.control("submit", ["ok.batch-\(number)", "batch"]).contains("submitted"))
        }
        func page(_ path: String) throws -> String {
            let answer = try Curl.request(daemon.url + path, bearer: daemon.token)
            guard answer.status == 200 else { throw DashboardUnderTest.Failure("\(path): \(answer.status)") }
            return answer.body
        }
        let first = try page("/requests?tag=batch")
        #expect(Self.total(in: first) == "55 requests")
        #expect(first.contains("rel=\"next\""), "more than a page")
        #expect(Self.total(in: try page("/requests?state=running&tag=batch")) == "0 requests")
        #expect(Self.total(in: try page("/requests?tag=batch&prefix=ok.batch-")) == nil, "a prefix too: none")
        #expect(Self.total(in: try page("/requests?state=all&tag=batch")) == nil, "finished ones too: none")
        #expect(Self.total(in: try page("/requests?tag=nobody-has-it")) == "0 requests")
        // What failed for good: the overview's count on the Requests page as on the Failed page.
        let failed = try #require(Self.total(in: try page("/failed")))
        #expect(failed.hasSuffix(" failed for good"))
        #expect(Self.total(in: try page("/requests?state=failed")).map { $0 + " failed for good" } == failed)
        #expect(try daemon.control("submit", ["ok.batch-55", "batch"]).contains("submitted"))
        #expect(try waitFor { Self.total(in: try page("/requests?tag=batch")) == "56 requests" })
    }

    /// The total above a list, if the page shows one.
    static func total(in page: String) -> String? {
        guard let start = page.range(of: "data-total>"), let end = page[start.upperBound...].range(of: "</p>")
        else { return nil }
        return String(page[start.upperBound..<end.lowerBound])
    }

    /// The count of the tile labelled `label` on an overview page.
    static func tile(_ label: String, in page: String) -> Int? {
        guard let labelled = page.range(of: "</strong> <span>\(label)</span>") else { return nil }
        let before = page[..<labelled.lowerBound]
        guard let open = before.range(of: "<strong>", options: .backwards) else { return nil }
        return Int(before[open.upperBound...])
    }
}
