/// The open grants of one runtime, stored for O(1) begin and end.
///
/// A slab of records with a free list: a grant begun on the loop thread gets an ID
/// that encodes its slot and the slot's generation, so ending it needs no hash lookup,
/// and a stale or forged ID is detected by the generation. Open records are also
/// linked in begin order, which is the order expiration handlers run in.
///
/// Loop-thread only; no callbacks are called from here.
struct GrantTable {
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
        var remoteID: BackgroundTaskID
        var expirationHandler: (@Sendable () -> Void)?
        /// Only for grants that need more than the common fields.
        var extras: GrantExtras?
        var previous: Int32
        var next: Int32
        var generation: UInt32
        var phase: Phase
    }

    private(set) var records: [Record] = []
    private var freeHead: Int32 = -1
    private var head: Int32 = -1
    private var tail: Int32 = -1
    private(set) var openCount = 0
    private var remoteSlots: [UInt64: Int32] = [:]

    /// Stores a new open grant at the end of the begin order; returns its slot.
    mutating func insert(
        name: String, callSite: CallSite, begunAt: MonotonicInstant, remoteID: BackgroundTaskID,
        expirationHandler: (@Sendable () -> Void)?, extras: GrantExtras?
    ) -> Int32 {
        let slot: Int32
        if freeHead >= 0 {
            slot = freeHead
            freeHead = records[Int(slot)].next
            records.withUnsafeMutableBufferPointer { buffer in
                let index = Int(slot)
                buffer[index].name = name
                buffer[index].callSite = callSite
                buffer[index].begunAt = begunAt
                buffer[index].remoteID = remoteID
                buffer[index].expirationHandler = expirationHandler
                buffer[index].extras = extras
                buffer[index].phase = .open
            }
        } else {
            slot = Int32(records.count)
            records.append(
                Record(
                    name: name, callSite: callSite, begunAt: begunAt, remoteID: remoteID,
                    expirationHandler: expirationHandler, extras: extras,
                    previous: -1, next: -1, generation: 1, phase: .open))
        }
        link(slot)
        if !remoteID.isInvalid { remoteSlots[remoteID.rawValue] = slot }
        openCount += 1
        return slot
    }

    /// The slot of an open grant, or `nil` for an unknown, ended or invalid ID.
    func slot(for id: BackgroundTaskID) -> Int32? {
        if id.isInvalid { return nil }
        if id.isRemote { return remoteSlots[id.rawValue] }
        let slot = id.localSlot
        let index = Int(slot)
        guard slot >= 0, index < records.count else { return nil }
        // Field reads, not a copy of the record: a copy would retain its name and closures.
        guard records[index].generation == id.localGeneration, records[index].phase != .free,
            records[index].remoteID.isInvalid
        else { return nil }
        return slot
    }

    /// The public ID of the grant in `slot`.
    func id(ofSlot slot: Int32) -> BackgroundTaskID {
        let remote = records[Int(slot)].remoteID
        return remote.isInvalid ? .local(slot: slot, generation: records[Int(slot)].generation) : remote
    }

    /// Whether `slot` still holds the grant of `generation`.
    func isOpen(slot: Int32, generation: UInt32) -> Bool {
        guard slot >= 0, Int(slot) < records.count else { return false }
        return records[Int(slot)].phase != .free && records[Int(slot)].generation == generation
    }

    subscript(slot: Int32) -> Record {
        get { records[Int(slot)] }
        _modify { yield &records[Int(slot)] }
    }

    /// Removes the grant in `slot` and returns its record. The slot's next generation
    /// makes every copy of the old ID stale.
    mutating func remove(slot: Int32) -> Record {
        unlink(slot)
        let index = Int(slot)
        let freeHead = self.freeHead
        // Moved out, not copied: a copy would retain the name, the handler and the extras
        // only to release them again a moment later.
        let removed = records.withUnsafeMutableBufferPointer { buffer in
            let element = buffer.baseAddress! + index
            let removed = element.move()
            // Generations stay below 2^31 so a local ID never sets the remote bit.
            let generation = removed.generation &+ 1
            element.initialize(
                to: Record(
                    name: "", callSite: removed.callSite, begunAt: .zero, remoteID: .invalid,
                    expirationHandler: nil, extras: nil, previous: -1, next: freeHead,
                    generation: generation >= 1 << 31 ? 1 : generation, phase: .free))
            return removed
        }
        if !removed.remoteID.isInvalid { remoteSlots.removeValue(forKey: removed.remoteID.rawValue) }
        self.freeHead = slot
        openCount -= 1
        return removed
    }

    /// The open slots in begin order, copied, so callbacks may end grants meanwhile.
    func openSlotsInBeginOrder() -> [(slot: Int32, generation: UInt32)] {
        var result: [(slot: Int32, generation: UInt32)] = []
        result.reserveCapacity(openCount)
        var cursor = head
        while cursor >= 0 {
            let record = records[Int(cursor)]
            result.append((cursor, record.generation))
            cursor = record.next
        }
        return result
    }

    private mutating func link(_ slot: Int32) {
        let previousTail = tail
        records.withUnsafeMutableBufferPointer { buffer in
            buffer[Int(slot)].previous = previousTail
            buffer[Int(slot)].next = -1
            if previousTail >= 0 { buffer[Int(previousTail)].next = slot }
        }
        if head < 0 { head = slot }
        tail = slot
    }

    private mutating func unlink(_ slot: Int32) {
        let (previous, next) = (records[Int(slot)].previous, records[Int(slot)].next)
        records.withUnsafeMutableBufferPointer { buffer in
            if previous >= 0 { buffer[Int(previous)].next = next }
            if next >= 0 { buffer[Int(next)].previous = previous }
        }
        if head == slot { head = next }
        if tail == slot { tail = previous }
    }
}

/// What only some grants carry: kept out of ``GrantTable/Record`` so that the common
/// record (a name, a call site, a time and a handler) stays small.
final class GrantExtras {
    var endHandler: GrantEndHandler?
    /// The grant's own deadline: begin + maximum duration, or sooner if forced to expire.
    var ownDeadline: MonotonicInstant?
    var expirationStartedAt: MonotonicInstant?
    var expirationDuration: Duration = .zero

    init(endHandler: GrantEndHandler?, ownDeadline: MonotonicInstant?) {
        self.endHandler = endHandler
        self.ownDeadline = ownDeadline
    }
}
