// The code of the "Testing expiration paths with ManualClock" article, run as a test.

import Overtime
import OvertimeTesting
import Synchronization
import Testing

@Suite("The ManualClock article's test")
struct TestingExpirationArticleTests {
    /// What the grant's handlers saw, in order.
    enum Seen: Equatable, Sendable {
        case expired
        case ended(BackgroundTaskEndReason)
    }

    @Test func theExpirationHandlerRunsAtTheLeadTimeAndAnUnendedGrantIsTerminated() async throws {
        let clock = ManualClock()
        var configuration = RuntimeConfiguration()
        configuration.signalHandling = nil  // the test process keeps its signals
        configuration.backgroundBudget = .seconds(30)
        configuration.expirationLeadTime = .seconds(5)
        let runtime = try Runtime(configuration: configuration, clock: clock)
        runtime.start()

        let seen = Mutex<[Seen]>([])
        let id = runtime.beginBackgroundTask(name: "upload") {
            seen.withLock { $0.append(.expired) }
        } endHandler: { reason in
            seen.withLock { $0.append(.ended(reason)) }
        }
        #expect(!id.isInvalid)
        runtime.requestBackground()

        clock.advance(by: .seconds(24))
        #expect(seen.withLock { $0 }.isEmpty)
        clock.advance(by: .seconds(1))  // 25 s: the 30 s deadline minus the 5 s lead
        #expect(seen.withLock { $0 } == [.expired])
        clock.advance(by: .seconds(5))  // the deadline, never ended: terminated
        #expect(seen.withLock { $0 } == [.expired, .ended(.terminated)])

        runtime.requestTermination()
        await runtime.waitUntilTerminated()
    }
}
