/// The open grants of one runtime, stored for O(1) begin and end.
///
/// A slab of records with a free list: a grant begun on the loop thread gets an ID
/// that encodes its slot and the slot's generation, so ending it needs no hash lookup,
/// and a stale or forged ID is detected by the generation. Open records are also
/// linked in begin order, which is the order expiration handlers run in.
///
/// A class over storage it manages itself, not a struct over an `Array`: every begin and
/// end reads and writes records in place, and a struct held by the runtime's core was
/// copied (retaining the array and the queued-ID dictionary) for each non-mutating call.
///
/// Loop-thread only (hence the unchecked exclusivity); no callbacks are called from here.
final class GrantTable {
    enum Phase: UInt8 {
        case free
        /// Open; its expiration handler has not been asked to run.
        case open
        /// Its expiration handler is running now.
        case expiring
        /// Its expiration handler ran (or had nothing to run).
        case expired
    }

    struct Record {
        var name: String
        var callSite: CallSite
        var begunAt: MonotonicInstant
        /// The ID handed out off the loop, or `.invalid` for a grant begun on the loop.
        var queuedID: BackgroundTaskID
        var expirationHandler: (@Sendable () -> Void)?
        /// Only for grants that need more than the common fields.
        var extended: GrantExtendedRecord?
        var previous: Int32
        var next: Int32
        var generation: UInt32
        var phase: Phase
    }

    /// Slots `0..<slotCount` are initialized (open or free); capacity is `capacity`.
    @exclusivity(unchecked) private var storage: UnsafeMutablePointer<Record>
    @exclusivity(unchecked) private var capacity = 0
    @exclusivity(unchecked) private var slotCount = 0
    @exclusivity(unchecked) private var freeHead: Int32 = -1
    @exclusivity(unchecked) private var head: Int32 = -1
    @exclusivity(unchecked) private var tail: Int32 = -1
    @exclusivity(unchecked) private(set) var openCount = 0
    @exclusivity(unchecked) private var queuedSlots: [UInt64: Int32] = [:]
    /// Queued IDs ended on the loop before their begin was applied: the end waits for its
    /// begin until the turn ends (see `RuntimeCore.end`).
    @exclusivity(unchecked) var endsBeforeBegin: [UInt64: (callSite: CallSite, queued: Bool)] = [:]

    init() {
        storage = .allocate(capacity: 0)
    }

    deinit {
        storage.deinitialize(count: slotCount)
        storage.deallocate()
    }

    /// Stores a new open grant at the end of the begin order; returns its slot.
    @inline(__always)
    func insert(
        name: String, callSite: CallSite, begunAt: MonotonicInstant, queuedID: BackgroundTaskID,
        expirationHandler: (@Sendable () -> Void)?, extended: GrantExtendedRecord?
    ) -> Int32 {
        let slot: Int32
        if freeHead >= 0 {
            slot = freeHead
            let record = storage + Int(slot)
            freeHead = record.pointee.next
            record.pointee.name = name
            record.pointee.callSite = callSite
            record.pointee.begunAt = begunAt
            record.pointee.queuedID = queuedID
            record.pointee.expirationHandler = expirationHandler
            record.pointee.extended = extended
            record.pointee.phase = .open
        } else {
            if slotCount == capacity { grow() }
            slot = Int32(slotCount)
            (storage + slotCount).initialize(
                to: Record(
                    name: name, callSite: callSite, begunAt: begunAt, queuedID: queuedID,
                    expirationHandler: expirationHandler, extended: extended,
                    previous: -1, next: -1, generation: 1, phase: .open))
            slotCount += 1
        }
        link(slot)
        if !queuedID.isInvalid { queuedSlots[queuedID.rawValue] = slot }
        openCount += 1
        return slot
    }

    private func grow() {
        let newCapacity = max(64, capacity * 2)
        let newStorage = UnsafeMutablePointer<Record>.allocate(capacity: newCapacity)
        newStorage.moveInitialize(from: storage, count: slotCount)
        storage.deallocate()
        storage = newStorage
        capacity = newCapacity
    }

    /// The slot of an open grant, or `nil` for an unknown, ended or invalid ID.
    @inline(__always)
    func slot(for id: BackgroundTaskID) -> Int32? {
        if id.isInvalid { return nil }
        if id.isQueued { return queuedSlots[id.rawValue] }
        let slot = id.localSlot
        guard slot >= 0, Int(slot) < slotCount else { return nil }
        let record = storage + Int(slot)
        guard record.pointee.generation == id.localGeneration, record.pointee.phase != .free,
            record.pointee.queuedID.isInvalid
        else { return nil }
        return slot
    }

    /// The public ID of the grant in `slot`.
    @inline(__always)
    func id(ofSlot slot: Int32) -> BackgroundTaskID {
        let record = storage + Int(slot)
        let queued = record.pointee.queuedID
        return queued.isInvalid ? .local(slot: slot, generation: record.pointee.generation) : queued
    }

    /// The generation of the grant in `slot`.
    func generation(ofSlot slot: Int32) -> UInt32 {
        storage[Int(slot)].generation
    }

    /// Whether `slot` still holds the grant of `generation`.
    func isOpen(slot: Int32, generation: UInt32) -> Bool {
        guard slot >= 0, Int(slot) < slotCount else { return false }
        return storage[Int(slot)].phase != .free && storage[Int(slot)].generation == generation
    }

    subscript(slot: Int32) -> Record {
        get { storage[Int(slot)] }
        _modify { yield &storage[Int(slot)] }
    }

    /// Removes the grant in `slot` and returns its record. The slot's next generation
    /// makes every copy of the old ID stale.
    @inline(__always)
    func remove(slot: Int32) -> Record {
        unlink(slot)
        let record = storage + Int(slot)
        // Moved out, not copied: a copy would retain the name, the handler and the extended
        // only to release them again a moment later.
        let removed = record.move()
        // Generations stay below 2^31 so a local ID never sets the queued bit.
        let generation = removed.generation &+ 1
        record.initialize(
            to: Record(
                name: "", callSite: removed.callSite, begunAt: .zero, queuedID: .invalid,
                expirationHandler: nil, extended: nil, previous: -1, next: freeHead,
                generation: generation >= 1 << 31 ? 1 : generation, phase: .free))
        if !removed.queuedID.isInvalid { queuedSlots.removeValue(forKey: removed.queuedID.rawValue) }
        freeHead = slot
        openCount -= 1
        return removed
    }

    /// The open slots in begin order, copied, so callbacks may end grants meanwhile.
    func openSlotsInBeginOrder() -> [(slot: Int32, generation: UInt32)] {
        var result: [(slot: Int32, generation: UInt32)] = []
        result.reserveCapacity(openCount)
        var cursor = head
        while cursor >= 0 {
            result.append((cursor, storage[Int(cursor)].generation))
            cursor = storage[Int(cursor)].next
        }
        return result
    }

    @inline(__always)
    private func link(_ slot: Int32) {
        storage[Int(slot)].previous = tail
        storage[Int(slot)].next = -1
        if tail >= 0 { storage[Int(tail)].next = slot }
        if head < 0 { head = slot }
        tail = slot
    }

    @inline(__always)
    private func unlink(_ slot: Int32) {
        let (previous, next) = (storage[Int(slot)].previous, storage[Int(slot)].next)
        if previous >= 0 { storage[Int(previous)].next = next }
        if next >= 0 { storage[Int(next)].previous = previous }
        if head == slot { head = next }
        if tail == slot { tail = previous }
    }
}

/// What only some grants carry: kept out of ``GrantTable/Record`` so that the common
/// record (a name, a call site, a time and a handler) stays small.
final class GrantExtendedRecord {
    var endHandler: GrantEndHandler?
    /// The grant's own deadline: begin + maximum duration, or sooner if forced to expire.
    var ownDeadline: MonotonicInstant?
    var expirationStartedAt: MonotonicInstant?
    var expirationDuration: Duration = .zero
    /// Its entries in the ``DeadlineSchedule`` heap not yet popped: stale once it ends.
    var heapEntries = 0

    init(endHandler: GrantEndHandler?, ownDeadline: MonotonicInstant?) {
        self.endHandler = endHandler
        self.ownDeadline = ownDeadline
    }
}
