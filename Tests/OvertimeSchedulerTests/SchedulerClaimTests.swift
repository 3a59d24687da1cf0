import Overtime
import OvertimeSchedulerTesting
import OvertimeSupport
import OvertimeTestSupport
import Testing

@_spi(ScheduleStore) @testable import OvertimeScheduler

/// A fleet's claims after the process was away: a run whose claim may have ended in the
/// pause stops before anything of the run acts again.
@Suite("Scheduler: claims after a pause", .serialized, .timeLimit(.minutes(2)))
struct SchedulerClaimTests {
    /// The process was away past its claim while a run's effect waited on a loop timer (a
    /// worker stopped with SIGSTOP). The first turn after the pause stops the run before
    /// the timer can act — also when the store's own thread noticed the lapse first and
    /// its message to the loop is still unread, which is how both threads resume.
    @Test(arguments: [false, true])
    func aRunWhoseClaimLapsedInAPauseStopsBeforeItsTimerActs(storeToldFirst: Bool) async throws {
        try await onOwnThread {
            let (h, instrumented) = try SchedulerHarness.instrumented(identifiers: [], stallThreshold: .seconds(1))
            defer { h.finish() }
            let runtime = h.env.runtime
            let outcomes = Recorder<String>()
            try h.current.register(prefix: "pause.") { task in
                outcomes.append("start")
                let effect = runtime.schedule(after: .seconds(4)) {
                    guard !task.isExpired else { return }
                    outcomes.append("effect held=\(task.isClaimHeld)")
                    task.setTaskCompleted(success: true)
                }
                task.expirationHandler = {
                    effect.cancel()
                    outcomes.append("expired")
                    task.setTaskCompleted(success: false)
                }
            }
            try h.current.start()
            try h.current.submit(ScheduledTaskRequest(identifier: "pause.job"))
            h.settle()
            h.env.waitForQueuedRequests()
            #expect(outcomes.all == ["start"])

            instrumented.unsafeClaims.withLock { $0 = ["pause.job"] }
            if storeToldFirst {
                // What the store's thread leaves when it tells first: the run marked as
                // told, its expiry a message the loop has not read yet.
                h.current.openRuns.withLock { $0["pause.job"]?.claimLapsing = true }
            }
            h.env.clock.advance(by: .seconds(5))
            h.settle()
            #expect(outcomes.all == ["start", "expired"], "stopped before its timer acted")
            // Claimed again (the retry): it acts then, and only as the holder.
            instrumented.unsafeClaims.withLock { $0 = [] }
            h.advance(by: .seconds(600))
            #expect(outcomes.all.filter { $0.hasPrefix("effect") } == ["effect held=true"], "\(outcomes.all)")
        }
    }

    /// A run whose claim cannot be renewed (its database unreachable) stays unsafe until its
    /// end is recorded, and the loop at rest meanwhile wakes after quiet spells longer than
    /// the stall threshold (five of 2 s here): the run is told to stop and said to stop once,
    /// not again after each quiet spell (a worker logged both every second of an outage).
    /// A handler that completes on its expiry ends the run, and the stall check has nothing
    /// more to say; one that goes on keeps its grant open until the runtime ends it, and each
    /// spell meanwhile expires the grant again (an expiry told from another thread may be
    /// unread yet), saying so in the check's line alone.
    @Test(arguments: [true, false])
    func aRunWhoseClaimStaysUnsafeIsSaidToStopOnceThroughQuietSpells(handlerCompletes: Bool) async throws {
        try await onOwnThread {
            let (h, instrumented) = try SchedulerHarness.instrumented(identifiers: [], stallThreshold: .seconds(1))
            defer { h.finish() }
            let expiries = Recorder<String>()
            try h.current.register(prefix: "held.") { task in
                task.expirationHandler = {
                    expiries.append("expired")
                    if handlerCompletes { task.setTaskCompleted(success: false) }
                }
            }
            try h.current.start()
            try h.current.submit(ScheduledTaskRequest(identifier: "held.job"))
            h.settle()
            h.env.waitForQueuedRequests()
            instrumented.unsafeClaims.withLock { $0 = ["held.job"] }
            for _ in 0..<5 {
                h.env.clock.advance(by: .seconds(2))
                h.settle()
            }
            let warnings = h.env.logs.messages(at: .warning).map(\.message)
            let checks = warnings.filter { $0.contains("whose claims may have ended") }.count
            #expect(handlerCompletes ? checks == 1 : checks >= 1, "\(warnings)")
            #expect(warnings.filter { $0.contains("its claim on the store could not be renewed") }.count == 1)
            #expect(expiries.all == ["expired"])
        }
    }
}
