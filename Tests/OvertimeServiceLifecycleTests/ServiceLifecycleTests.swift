import Dispatch
import Logging
import Overtime
import OvertimeServiceLifecycle
import OvertimeSupport
import OvertimeTestSupport
import ServiceLifecycle
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

@Suite("swift-service-lifecycle bridge", .timeLimit(.minutes(3)))
struct ServiceLifecycleTests {
    @Test func gracefulShutdownOfTheGroupTerminatesTheRuntimeAndGrantsGetTheirTime() async throws {
        var configuration = RuntimeConfiguration()
        configuration.logger = LogCapture().logger
        let service = try OvertimeService(configuration: configuration)
        let runtime = service.runtime
        #expect(runtime.configuration.signalHandling == nil)
        let events = Recorder<LifecycleEvent>()
        let flushed = Recorder<Bool>()
        let token = runtime.observe { event in
            events.append(event)
            guard event == .willTerminate else { return }
            let id = runtime.beginBackgroundTask(name: "final-flush")
            spawnThread(name: "final-flush") {
                usleep(200_000)
                flushed.append(true)
                runtime.endBackgroundTask(id)
            }
        }
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: service)], logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        #expect(events.all == [.willResignActive, .didEnterBackground, .willTerminate])
        #expect(flushed.all == [true])
        #expect(runtime.state == .terminated)
        #expect(runtime.loopClosedCleanly == true)
        withExtendedLifetime(token) {}
    }

    @Test func waitUntilTerminatedReturnsAtOnceAfterTermination() async throws {
        var configuration = RuntimeConfiguration()
        configuration.signalHandling = nil
        configuration.logger = LogCapture().logger
        let runtime = try Runtime(configuration: configuration)
        runtime.start()
        runtime.requestTermination()
        await runtime.waitUntilTerminated()
        await runtime.waitUntilTerminated()
        #expect(runtime.state == .terminated)
    }
}
