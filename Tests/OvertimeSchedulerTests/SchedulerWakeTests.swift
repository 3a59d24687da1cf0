import Foundation
import Overtime
import OvertimeSupport
import OvertimeTestSupport
import OvertimeTesting
import Testing

@_spi(ScheduleStore) @testable import OvertimeScheduler

/// Waking the system: the alarm follows the earliest next run of the requests that ask
/// for it; a real daemon arms a CLOCK_REALTIME_ALARM timer, and one without CAP_WAKE_ALARM
/// is refused with the reason.
@Suite("Scheduler wake alarms", .serialized, .timeLimit(.minutes(2)))
struct SchedulerWakeTests {
    /// The wake alarm the runtime holds now.
    private func alarm(_ h: SchedulerHarness) -> WallClockInstant?? {
        h.settle()
        let seen = Recorder<WallClockInstant?>()
        let context = h.env.runtime.driverContext
        h.env.runtime.execute { seen.append(context.wakeAlarmTime) }
        h.env.runtime.waitForQueuedRequests()
        return seen.all.first
    }

    @Test func theAlarmFollowsTheEarliestRunThatWakesTheSystem() async throws {
        try await onOwnThread {
            try #require(DriverContext.wakeAlarmUnavailableReason == nil, "the tests run with CAP_WAKE_ALARM (as root)")
            let h = try SchedulerHarness(identifiers: ["late", "early", "quiet", "tick"])
            defer { h.finish() }
            try h.current.start()
            let start = h.now
            func at(_ identifier: String, _ seconds: Int64, wakes: Bool) -> ScheduledTaskRequest {
                var request = ScheduledTaskRequest(identifier: identifier)
                request.earliestBegin = start + .seconds(seconds)
                request.wakesSystem = wakes
                return request
            }
            #expect(alarm(h) == .some(nil), "nothing asks: no alarm")
            try h.current.submit(at("late", 3600, wakes: true))
            #expect(alarm(h) == start + .seconds(3600))
            try h.current.submit(at("quiet", 600, wakes: false))
            #expect(alarm(h) == start + .seconds(3600), "a run that does not wake the system sets nothing")
            try h.current.submit(at("early", 1800, wakes: true))
            #expect(alarm(h) == start + .seconds(1800), "the earliest of those that wake it")
            h.advance(by: .seconds(1800))
            #expect(h.attempts.all.map(\.identifier) == ["quiet", "early"])
            #expect(alarm(h) == start + .seconds(3600), "on to the next once it ran")
            try h.current.cancel("late")
            #expect(alarm(h) == .some(nil), "cancelled: disarmed")

            var tick = ScheduledTaskRequest(identifier: "tick")
            tick.repetition = Repetition(every: .seconds(900))
            tick.wakesSystem = true
            try h.current.submit(tick)
            h.advance(by: .seconds(1))
            let first = try #require(h.current.workInfo("tick")?.nextRun)
            #expect(alarm(h) == first, "a repeating request: its next planned time")
            try h.open(identifiers: ["tick"])  // the next process arms it again from the store
            try h.current.start()
            #expect(try h.current.workInfo("tick")?.request.wakesSystem == true)
        }
    }

    @Test(.startsProcesses) func aRealDaemonArmsAnAlarmTimerAndOneWithoutTheCapabilityIsRefused() async throws {
        try await onOwnThread {
            let folder = TemporaryDirectory("scheduler-wake")
            defer { folder.remove() }
            let daemon = try RunningChild(["scheduler-wake", folder.path])
            #expect(daemon.waitForLine { $0 == "READY" } != nil)
            // The timer as the kernel holds it: a CLOCK_REALTIME_ALARM (clock 8) timerfd about
            // an hour from firing.
            var found: [String] = []
            for _ in 0..<100 {
                guard found.isEmpty else { break }
                let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(daemon.pid)/fdinfo")) ?? []
                for fd in fds {
                    let info = (try? String(contentsOfFile: "/proc/\(daemon.pid)/fdinfo/\(fd)", encoding: .utf8)) ?? ""
                    if info.contains("clockid: 8") { found.append(info) }
                }
                if found.isEmpty { usleep(50_000) }
            }
            let timer = try #require(found.first, "a CLOCK_REALTIME_ALARM timerfd is open")
            let value = timer.split(separator: "\n").first { $0.hasPrefix("it_value:") } ?? ""
            let seconds = Int(value.drop { !$0.isNumber }.prefix { $0.isNumber }) ?? -1
            #expect((3500...3600).contains(seconds), "armed about an hour ahead: \(value)")
            daemon.send(SIGTERM)
            #expect(daemon.waitForExit() == 0)

            let denied = TemporaryDirectory("scheduler-wake-denied")
            defer { denied.remove() }
            let refused = try RunningChild(
                ["scheduler-wake", denied.path],
                wrapper: ["/usr/bin/setpriv", "--bounding-set=-wake_alarm", "--inh-caps=-wake_alarm"])
            let line = try #require(refused.waitForLine { $0.hasPrefix("REFUSED") || $0 == "READY" })
            #expect(line.contains("wakeUnavailable") && line.contains("CAP_WAKE_ALARM"), "\(line)")
            #expect(refused.waitForExit() == 1)
            let rows = try sqliteShell(denied.path + "/schedule.db", "SELECT count(*) FROM requests")
            #expect(rows.first?.first == "0", "nothing was submitted")
        }
    }
}
