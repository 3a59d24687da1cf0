import OvertimeTestSupport
import Testing

@testable import Overtime

@Suite("GrantTable: slab storage and IDs")
struct GrantTableTests {
    private func insert(_ table: GrantTable, _ name: String, queued: BackgroundTaskID = .invalid) -> Int32 {
        table.insert(
            name: name, callSite: CallSite(fileID: #fileID, line: #line), begunAt: .zero, queuedID: queued,
            expirationHandler: nil, extended: nil)
    }

    @Test func idsFindTheirSlotUntilRemovedAndNeverAfter() {
        let table = GrantTable()
        let slot = insert(table, "a")
        let id = table.id(ofSlot: slot)
        #expect(table.slot(for: id) == slot)
        _ = table.remove(slot: slot)
        #expect(table.slot(for: id) == nil)
        // The slot is reused with a new generation: the old ID stays stale.
        let reused = insert(table, "b")
        #expect(reused == slot)
        #expect(table.slot(for: id) == nil)
        #expect(table.slot(for: table.id(ofSlot: reused)) == reused)
        #expect(table.slot(for: .invalid) == nil)
        #expect(table.slot(for: BackgroundTaskID(rawValue: 0x7FFF_FFFF_0000_0999)) == nil)
    }

    @Test func beginOrderSurvivesRemovalsInTheMiddle() {
        let table = GrantTable()
        let slots = (0..<5).map { insert(table, "g\($0)") }
        _ = table.remove(slot: slots[1])
        _ = table.remove(slot: slots[3])
        let later = insert(table, "g5")
        #expect(table.openSlotsInBeginOrder().map(\.slot) == [slots[0], slots[2], slots[4], later])
        #expect(table.openSlotsInBeginOrder().map { table[$0.slot].name } == ["g0", "g2", "g4", "g5"])
        #expect(table.openCount == 4)
    }

    @Test func queuedIDsMapThroughTheDictionary() {
        let table = GrantTable()
        let queued = BackgroundTaskID.queued(7)
        let slot = insert(table, "r", queued: queued)
        #expect(table.id(ofSlot: slot) == queued)
        #expect(table.slot(for: queued) == slot)
        // The local encoding of a queued grant's slot is not a valid handle for it.
        #expect(table.slot(for: .local(slot: slot, generation: table[slot].generation)) == nil)
        _ = table.remove(slot: slot)
        #expect(table.slot(for: queued) == nil)
    }

    @Test func localAndQueuedIDsNeverCollideAndPrintReadably() {
        let local = BackgroundTaskID.local(slot: 12, generation: 3)
        #expect(!local.isQueued && local.localSlot == 12 && local.localGeneration == 3)
        #expect(local.description == "#12.3")
        #expect(BackgroundTaskID.queued(12).description == "#r12")
        #expect(BackgroundTaskID.invalid.isInvalid)
    }

    @Test func printedIDsParseBack() {
        for id in [BackgroundTaskID.local(slot: 12, generation: 3), .queued(7), .queued(123_456)] {
            #expect(BackgroundTaskID(parsing: id.description) == id)
            #expect(BackgroundTaskID(parsing: "\(id.rawValue)") == id)
        }
        for bad in ["", "#", "#r", "#rx", "#1", "#1.", "#.1", "r1", "#-1.2", "#1.4294967295"] {
            #expect(BackgroundTaskID(parsing: bad) == nil, "\(bad)")
        }
    }
}

@Suite("DeadlineSchedule: one budget window and a lazy heap")
struct DeadlineScheduleTests {
    @Test func budgetWakesAtExpirationPointThenDeadline() {
        var schedule = DeadlineSchedule(leadTime: .seconds(5))
        #expect(schedule.nextWakeup == nil)
        schedule.startBudget(now: MonotonicInstant(nanoseconds: 0), length: .seconds(30))
        #expect(schedule.nextWakeup == .zero + .seconds(25))
        schedule.markBudgetExpirationDone()
        #expect(schedule.nextWakeup == .zero + .seconds(30))
        schedule.clearBudget()
        #expect(schedule.nextWakeup == nil)
    }

    @Test func heapPopsInDeadlineOrderAndCompetesWithTheBudget() {
        var schedule = DeadlineSchedule(leadTime: .seconds(1))
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
        var schedule = DeadlineSchedule(leadTime: .seconds(1))
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
