// The snippets of OvertimeSystem's article "The lifecycle on Linux, beside iOS's",
// compiled and run.

import Foundation
import Overtime
import OvertimeScheduler
import OvertimeSystem
import OvertimeTestSupport
import Testing

@Suite("The lifecycle on Linux article", .onOwnThread)
struct LifecycleOnLinuxArticleTests {
    @Test func aKioskFollowsItsSessionWhenItHasOne() throws {
        let env = try VirtualRuntime()
        defer { env.shutDown() }
        let runtime = env.runtime
        var kiosk = LogindMonitor.Configuration()
        kiosk.session = ProcessInfo.processInfo.environment["XDG_SESSION_ID"]
        let logind = LogindMonitor(runtime: runtime, configuration: kiosk)
        try logind.start()
        #expect(logind.configuration.session == ProcessInfo.processInfo.environment["XDG_SESSION_ID"])
        logind.stop()
    }

    @Test func aRequestNeedsAnUnmeteredNetworkAndAnIdleDevice() {
        var request = ScheduledTaskRequest(identifier: "upload-photos")
        request.requirements = [.unmeteredNetwork, .deviceIdle]
        let metered = SystemConditions(networkMetered: true)
        #expect(request.requirements.contains { !$0.isMet(by: metered, state: .active) })
        #expect(request.requirements.allSatisfy { $0.isMet(by: SystemConditions(), state: .active) })
    }
}
