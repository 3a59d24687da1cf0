import Overtime
import Testing

@_spi(ScheduleStore) @testable import OvertimeScheduler

@Suite("SchedulePlanner: planned times as transcripts")
struct SchedulePlannerTests {
    private let start = WallClockInstant(secondsSinceEpoch: 1_800_000_000)

    private func at(_ seconds: Int) -> WallClockInstant { start + .seconds(seconds) }

    private func hourly(flex: Int = 0, catchUp: CatchUpPolicy = .once) -> ScheduledTaskRequest {
        var request = ScheduledTaskRequest(identifier: "hourly")
        request.repetition = Repetition(every: .seconds(3600), flex: .seconds(flex))
        request.catchUp = catchUp
        return request
    }

    @Test func aOneShotRunsAtItsEarliestBeginNeverBeforeAndIsDoneAfterSuccess() {
        var request = ScheduledTaskRequest(identifier: "once")
        request.earliestBegin = at(100)
        var plan = SchedulePlanner.initial(request, now: at(0), randomDelay: .zero)
        #expect(SchedulePlanner.next(plan, request, now: at(100) - .nanoseconds(1)) == .waitUntil(at(100)))
        #expect(SchedulePlanner.next(plan, request, now: at(100)) == .run(attempt: 1))
        plan = SchedulePlanner.started(plan, request, now: at(100))
        plan = SchedulePlanner.ended(plan, request, outcome: .succeeded, now: at(101))
        #expect(SchedulePlanner.next(plan, request, now: at(200)) == .finished)
    }

    @Test func plannedTimesStayOnTheGridWhateverTheRunsTake() {
        let request = hourly(flex: 600)
        var plan = SchedulePlanner.initial(request, now: at(0), randomDelay: .zero)
        var transcript: [PlanAction] = []
        // Runs take 40 minutes: the next window still opens at 50 min past each hour.
        for hour in 0..<3 {
            let begin = max(at(hour * 3600 - 600), at(0))
            transcript.append(SchedulePlanner.next(plan, request, now: begin))
            plan = SchedulePlanner.started(plan, request, now: begin)
            plan = SchedulePlanner.ended(plan, request, outcome: .succeeded, now: begin + .seconds(2400))
            transcript.append(SchedulePlanner.next(plan, request, now: begin + .seconds(2400)))
        }
        #expect(
            transcript == [
                .run(attempt: 1), .waitUntil(at(3600 - 600)),
                .run(attempt: 1), .waitUntil(at(7200 - 600)),
                .run(attempt: 1), .waitUntil(at(10800 - 600)),
            ])
    }

    @Test func failuresRetryWithBackoffThenGiveUpTheRunButKeepTheGrid() {
        var request = hourly()
        request.retry.initialDelay = .seconds(30)
        request.retry.maximumAttempts = 3
        var plan = SchedulePlanner.initial(request, now: at(0), randomDelay: .zero)
        plan = SchedulePlanner.started(plan, request, now: at(0))
        plan = SchedulePlanner.ended(plan, request, outcome: .failed, now: at(1))
        #expect(SchedulePlanner.next(plan, request, now: at(1)) == .waitUntil(at(31)))
        plan = SchedulePlanner.started(plan, request, now: at(31))
        plan = SchedulePlanner.ended(plan, request, outcome: .failed, now: at(32))
        #expect(SchedulePlanner.next(plan, request, now: at(32)) == .waitUntil(at(92)))  // 60 s: exponential
        plan = SchedulePlanner.started(plan, request, now: at(92))
        plan = SchedulePlanner.ended(plan, request, outcome: .failed, now: at(93))
        // Third failure: this run is given up; the grid goes on at the next hour.
        #expect(SchedulePlanner.next(plan, request, now: at(93)) == .waitUntil(at(3600)))
        #expect(plan.failedAttempts == 0 && !plan.isFinished)
    }

    @Test func aOneShotFailedForGoodIsFinishedAndKept() {
        var request = ScheduledTaskRequest(identifier: "once")
        request.retry.maximumAttempts = 1
        var plan = SchedulePlanner.initial(request, now: at(0), randomDelay: .zero)
        plan = SchedulePlanner.started(plan, request, now: at(0))
        plan = SchedulePlanner.ended(plan, request, outcome: .failed, now: at(5))
        #expect(plan.isFinished)
        #expect(SchedulePlanner.next(plan, request, now: at(100)) == .finished)
    }

    @Test(arguments: [(CatchUpPolicy.once, 1), (.every(maximum: 4), 4), (.every(maximum: 20), 10), (.none, 0)])
    func tenHoursOfDowntimeCatchUpPerThePolicy(policy: CatchUpPolicy, owed: Int) {
        let request = hourly(catchUp: policy)
        var plan = SchedulePlanner.initial(request, now: at(0), randomDelay: .zero)
        plan = SchedulePlanner.started(plan, request, now: at(0))
        plan = SchedulePlanner.ended(plan, request, outcome: .succeeded, now: at(10))
        // Down from 0:00:10 to 10:00:05: the planned times 1:00 … 10:00 were missed (10).
        let resumed = at(10 * 3600 + 5)
        plan = SchedulePlanner.catchUp(plan, request, now: resumed)
        #expect(plan.owed == owed)
        #expect(plan.anchor == at(11 * 3600), "back on the grid")
        var runs = 0
        while case .run = SchedulePlanner.next(plan, request, now: resumed), runs < 50 {
            plan = SchedulePlanner.started(plan, request, now: resumed)
            plan = SchedulePlanner.ended(plan, request, outcome: .succeeded, now: resumed)
            runs += 1
        }
        #expect(runs == owed)
        #expect(SchedulePlanner.next(plan, request, now: resumed) == .waitUntil(at(11 * 3600)))
    }

    @Test func aWallClockSteppedBackPullsTheAnchorWithinOneInterval() {
        let request = hourly()
        var plan = SchedulePlanner.initial(request, now: at(0), randomDelay: .zero)
        plan = SchedulePlanner.started(plan, request, now: at(0))  // next planned: 1:00
        // The clock is set back 5 hours: 1:00 would be 6 hours away; pulled to within an hour.
        let stepped = at(-5 * 3600 + 10)
        plan = SchedulePlanner.catchUp(plan, request, now: stepped)
        #expect(plan.anchor - stepped <= .seconds(3600))
        #expect(plan.anchor > stepped)
        #expect((plan.anchor - at(3600)).components.seconds % 3600 == 0, "still on the grid")
    }

    @Test func backoffDelaysFollowThePolicyWithinItsBounds() {
        var retry = RetryPolicy()
        #expect(retry.delay(afterFailedAttempts: 1) == .seconds(30))
        #expect(retry.delay(afterFailedAttempts: 3) == .seconds(120))
        #expect(retry.delay(afterFailedAttempts: 30) == .seconds(5 * 3600))
        retry.backoff = .linear
        retry.initialDelay = .seconds(1)  // below the minimum: 10 s
        #expect(retry.delay(afterFailedAttempts: 3) == .seconds(30))
    }

    @Test func eachRunStandsForOnePlannedTimeCatchUpsForTheTimesTheyReplace() {
        let request = hourly(catchUp: .every(maximum: 3))
        var plan = SchedulePlanner.initial(request, now: at(0), randomDelay: .zero)
        var transcript: [WallClockInstant] = []
        // On time, then the program is down from 1:30 to 4:30: three missed hours are owed.
        for now in [at(0), at(3600)] {
            plan = SchedulePlanner.catchUp(plan, request, now: now)
            transcript.append(SchedulePlanner.plannedTime(plan, request))
            plan = SchedulePlanner.started(plan, request, now: now)
            plan = SchedulePlanner.ended(plan, request, outcome: .succeeded, now: now + .seconds(60))
        }
        plan = SchedulePlanner.catchUp(plan, request, now: at(4 * 3600 + 1800))
        while case .run = SchedulePlanner.next(plan, request, now: at(4 * 3600 + 1800)) {
            transcript.append(SchedulePlanner.plannedTime(plan, request))
            plan = SchedulePlanner.started(plan, request, now: at(4 * 3600 + 1800))
            plan = SchedulePlanner.ended(plan, request, outcome: .succeeded, now: at(4 * 3600 + 1860))
        }
        #expect(transcript == [at(0), at(3600), at(2 * 3600), at(3 * 3600), at(4 * 3600)])
        #expect(SchedulePlanner.next(plan, request, now: at(4 * 3600 + 1860)) == .waitUntil(at(5 * 3600)))
    }

    /// A step of the wall clock moves the waits that stand for a length of time with it,
    /// and none lies further ahead than its length; times of day stay.
    @Test func aClockStepMovesLengthsOfTimeAndKeepsTimesOfDay() {
        var retrying = ScheduledTaskRequest(identifier: "retrying")
        retrying.retry.initialDelay = .seconds(30)
        var plan = SchedulePlanner.initial(retrying, now: at(0), randomDelay: .zero)
        plan = SchedulePlanner.ended(plan, retrying, outcome: .failed, now: at(10))
        #expect(plan.retryAt == at(40))
        // Back three hours at 20 s: the reading is now at(20 - 10800); 20 s are left.
        let back = SchedulePlanner.clockStepped(plan, retrying, by: .seconds(-10800), now: at(20 - 10800))
        #expect(back.retryAt == at(40 - 10800))
        // Unknown step (a start): at most the backoff's length ahead.
        let unknown = SchedulePlanner.clockStepped(plan, retrying, by: .zero, now: at(20 - 10800))
        #expect(unknown.retryAt == at(20 - 10800 + 30))
        // Forward three hours: still 20 s left, not due at once.
        let forward = SchedulePlanner.clockStepped(plan, retrying, by: .seconds(10800), now: at(20 + 10800))
        #expect(forward.retryAt == at(40 + 10800))

        var spread = ScheduledTaskRequest(identifier: "spread")
        spread.randomizedDelay = .seconds(60)
        let due = SchedulePlanner.initial(spread, now: at(0), randomDelay: .seconds(45))
        #expect(SchedulePlanner.clockStepped(due, spread, by: .zero, now: at(-10800)).anchor == at(-10800 + 60))
        #expect(
            SchedulePlanner.clockStepped(due, spread, by: .seconds(-10800), now: at(-10800)).anchor == at(45 - 10800))

        var atNoon = ScheduledTaskRequest(identifier: "noon")
        atNoon.earliestBegin = at(7200)
        let noon = SchedulePlanner.initial(atNoon, now: at(0), randomDelay: .zero)
        #expect(SchedulePlanner.clockStepped(noon, atNoon, by: .seconds(-10800), now: at(-10800)) == noon)
        #expect(SchedulePlanner.clockStepped(noon, hourly(), by: .seconds(-10800), now: at(-10800)) == noon)
    }
}
