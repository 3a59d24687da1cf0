// The code of the "Background-task grants" article, run as a test.

import Overtime
import OvertimeTesting
import Testing

@Suite("The grants article's async grant")
struct GrantsArticleTests {
    /// Stands for the article's upload: returns how many segments it stored.
    @Sendable static func drain() async throws -> Int { 3 }

    @Test func anAsyncGrantReturnsWhatItsBodyReturns() async throws {
        var configuration = RuntimeConfiguration()
        configuration.signalHandling = nil
        let runtime = try Runtime(configuration: configuration, clock: ManualClock())
        runtime.start()
        let drain = Self.drain
        let uploaded = try await runtime.withBackgroundTask(name: "upload") { try await drain() }
        #expect(uploaded == 3)
        #expect(runtime.openBackgroundTasks.isEmpty, "ended when the body returned")
        runtime.requestTermination()
        await runtime.waitUntilTerminated()
    }
}
