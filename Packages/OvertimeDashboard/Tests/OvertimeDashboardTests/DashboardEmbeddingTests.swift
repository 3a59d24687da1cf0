import Foundation
import Hummingbird
import OvertimeDashboard
import OvertimeScheduler
import ServiceLifecycle
import Synchronization
import Testing

/// The dashboard mounted in an application's own Hummingbird router, beside its routes:
/// the code the DocC article shows, run against a real daemon's schedule.
@Suite("Dashboard in an application", .serialized, .timeLimit(.minutes(2)))
struct DashboardEmbeddingTests {
    @Test func mountedUnderAGroupBesideTheApplicationsRoutes() async throws {
        let daemon = try await onOwnThread { try DashboardUnderTest(dashboardArguments: ["--read-only"]) }
        defer { daemon.stop() }
        let (store, socket, credentials) = (daemon.store, daemon.socket, daemon.credentials)

        let inspector = try await ScheduleDatabase.sqlite(path: store).inspector()
        var configuration = DashboardConfiguration(credentials: try DashboardCredentials(contentsOf: credentials))
        configuration.actions = ControlSocketActions(controlSocket: socket)
        configuration.mountPath = "/dashboard"
        let dashboard = try Dashboard(inspector: inspector, configuration: configuration)
        let router = Router()
        router.get("health") { _, _ in "ok" }
        dashboard.addRoutes(to: router.group("dashboard"))

        let port = PortBox()
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in port.set(channel.localAddress?.port ?? 0) })
        let group = ServiceGroup(services: [app], logger: .init(label: "embedding-test"))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            let listening = try await port.wait()
            let base = "http://127.0.0.1:\(listening)"
            try await onOwnThread {
                #expect(try Curl.request(base + "/health").body == "ok")
                let page = try Curl.request(base + "/dashboard/requests?state=all", bearer: daemon.token)
                #expect(page.status == 200 && page.body.contains("ok.done"))
                #expect(page.body.contains("href=\"/dashboard/request?id=ok.done\""))
                let signIn = try Curl.request(base + "/dashboard/requests")
                #expect(signIn.status == 303 && signIn.headers["location"] == "/dashboard/login")
                // Its actions go to the daemon: a run started through the mounted dashboard runs.
                let jar = try Curl.signIn(base + "/dashboard", token: daemon.token, folder: daemon.folder)
                let run = try Curl.confirm(base + "/dashboard/request/run?id=ok.queued", jar: jar)
                #expect(run.post.headers["location"]?.hasPrefix("/dashboard/action?ticket=") == true)
                #expect(
                    run.outcome?.status == 200 && run.outcome?.body.contains("Done: started run") == true,
                    "\(run.post.body)")
            }
            #expect(try await waitFor { try await daemon.history("ok.queued").contains { $0.result == .succeeded } })
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        inspector.close()
    }
}

/// The port the application listens on, told once it does.
final class PortBox: Sendable {
    private let port = Mutex<Int?>(nil)
    func set(_ value: Int) { port.withLock { $0 = value } }
    func wait() async throws -> Int {
        for _ in 0..<1000 {
            if let value = port.withLock({ $0 }) { return value }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw DashboardUnderTest.Failure("the application did not start listening")
    }
}
