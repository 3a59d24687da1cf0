import Testing

@testable import Overtime

@Suite("DeadlineSchedule: one budget window and a lazy heap")
struct DeadlineScheduleTests {
    @Test func budgetWakesAtExpirationPointThenDeadline() {
        let schedule = DeadlineSchedule(leadTime: .seconds(5))
        #expect(schedule.nextWakeup == nil)
        schedule.startBudget(now: MonotonicInstant(nanoseconds: 0), length: .seconds(30))
        #expect(schedule.nextWakeup == .zero + .seconds(25))
        schedule.markBudgetExpirationDone()
        #expect(schedule.nextWakeup == .zero + .seconds(30))
        schedule.clearBudget()
        #expect(schedule.nextWakeup == nil)
    }

    /// A cap (the system about to sleep) only ever moves the budget earlier, the expiration
    /// point a lead time before it, and keeps an expiration already done.
    @Test func aCapMovesTheBudgetEarlierOnly() {
        let schedule = DeadlineSchedule(leadTime: .seconds(5))
        #expect(!schedule.capBudget(deadline: .zero + .seconds(3), now: .zero))  // no budget runs
        schedule.startBudget(now: .zero, length: .seconds(30))
        #expect(!schedule.capBudget(deadline: .zero + .seconds(40), now: .zero))
        #expect(schedule.capBudget(deadline: .zero + .seconds(12), now: .zero))
        #expect(
            schedule.budget
                == DeadlineSchedule.Budget(deadline: .zero + .seconds(12), expirationPoint: .zero + .seconds(7)))
        schedule.markBudgetExpirationDone()
        #expect(schedule.capBudget(deadline: .zero + .seconds(8), now: .zero))
        #expect(schedule.budget?.expirationDone == true)
        #expect(schedule.nextWakeup == .zero + .seconds(8))
    }

    /// A budget cut shorter than twice the lead time (a sleep's 4.5 s against a lead time
    /// of 5 s) keeps half of what is left for work: the lead is capped, never due at once.
    @Test func aCapShorterThanTheLeadTimeLeavesHalfForWork() {
        let schedule = DeadlineSchedule(leadTime: .seconds(5))
        schedule.startBudget(now: .zero, length: .seconds(30))
        #expect(schedule.capBudget(deadline: .zero + .seconds(14.5), now: .zero + .seconds(10)))
        #expect(schedule.budget?.expirationPoint == .zero + .seconds(12.25))
        #expect(schedule.nextWakeup == .zero + .seconds(12.25))
    }

    @Test func heapPopsInDeadlineOrderAndCompetesWithTheBudget() {
        let schedule = DeadlineSchedule(leadTime: .seconds(1))
        for (index, second) in [9, 3, 7, 1, 5].enumerated() {
            schedule.schedule(at: .zero + .seconds(second), slot: Int32(index), generation: 1)
        }
        schedule.startBudget(now: .zero, length: .seconds(5))  // expiration point at 4 s
        #expect(schedule.nextWakeup == .zero + .seconds(1))
        #expect(schedule.popDue(now: .zero + .seconds(6)).map(\.slot) == [3, 1, 4])
        #expect(schedule.nextWakeup == .zero + .seconds(4))
        #expect(schedule.popDue(now: .zero + .seconds(100)).map(\.slot) == [2, 0])
    }

    @Test func compactionDropsOnlyDeadEntries() {
        let schedule = DeadlineSchedule(leadTime: .seconds(1))
        for index in 0..<3000 { schedule.schedule(at: .zero + .seconds(index), slot: Int32(index), generation: 1) }
        // Until enough grants are known to have ended, compaction does not even scan.
        var scanned = 0
        schedule.compact { _ in
            scanned += 1
            return false
        }
        #expect(scanned == 0)
        schedule.noteEntriesStale(2700)
        schedule.compact { $0.slot % 10 == 0 }
        let remaining = schedule.popDue(now: .zero + .seconds(10_000))
        #expect(remaining.count == 300)
        #expect(remaining.map(\.slot) == remaining.map(\.slot).sorted())
    }
}

extension DeadlineSchedule {
    /// Every entry due at `now`, earliest first, as the loop takes them one by one.
    fileprivate func popDue(now: MonotonicInstant) -> [Entry] {
        var due: [Entry] = []
        while let entry = popNextDue(now: now) { due.append(entry) }
        return due
    }
}
