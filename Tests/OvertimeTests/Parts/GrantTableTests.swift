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
