import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The part of the runtime's state that any thread may read without a round trip.
///
/// Written only by the loop thread (except the reservation counter, which begins off the
/// loop take from any thread); read by the public API to answer `state`,
/// `backgroundTimeRemaining` and to refuse a grant at once, off the loop.
///
/// **Admission off the loop.** A begin off the loop returns its ID before the loop has
/// applied it, so the loop must never suspend (or finish terminating) under a reserved
/// ID: that ID would be refused after it was returned. The two sides meet on two
/// sequentially consistent atomics, as in Dekker's algorithm: a begin increments
/// ``queuedReservations`` and then reads ``admission``; the loop, about to suspend, stores
/// `closing` and then reads the reservations. One of them sees the other: either the
/// loop sees the reservation (admission reopens and the program stays in the background
/// until that grant ends) or the begin sees the gate closing (it waits the few
/// instructions until the loop has decided, then is refused up front).
///
/// **The cap counts what owners hold**, on any thread: the table's count
/// (``openOnLoop``) plus ``heldOffLoop`` — begins admitted off the loop and not yet
/// applied, less ends asked for off the loop and not yet applied. Threads change
/// ``heldOffLoop`` with one read-modify-write each, so one thread's end and then begin
/// are seen in that order by every other thread. The loop moves a grant between the two
/// counters (applying a queued begin or end) inside a sequence lock (``transfers``, odd
/// while a move is half done), and a begin reads both under it, so a moving grant is
/// counted once: no begin is refused while the owners hold fewer than the cap.
final class PublishedState: Sendable {
    private let stateValue = Atomic<UInt8>(LifecycleState.active.rawValue)
    /// Nanoseconds of the background deadline, 0 when none.
    private let deadlineValue = Atomic<UInt64>(0)
    /// Nanoseconds of the background budget's expiration point, 0 when none.
    private let expirationPointValue = Atomic<UInt64>(0)
    /// Grants begun off the loop whose begin the loop has not applied yet.
    private let queuedReservations = Atomic<Int>(0)
    /// The grant table's open count, as the loop last stored it (a plain store per
    /// begin and end — a releasing store is a plain one on x86 — so the loop's own begins
    /// need no read-modify-write).
    private let openOnLoop = Atomic<Int>(0)
    /// Begins admitted off the loop not yet applied, less ends asked off the loop not yet
    /// applied (see the type's documentation).
    private let heldOffLoop = Atomic<Int>(0)
    /// The loop's moves between ``heldOffLoop`` and ``openOnLoop``: odd while one is half done.
    private let transfers = Atomic<UInt64>(0)
    /// The counter behind IDs handed out off the loop.
    let lastQueuedNumber = Atomic<UInt64>(0)
    /// Whether begins off the loop are admitted (see the type's documentation).
    private let admission = Atomic<UInt8>(Admission.open.rawValue)

    private enum Admission: UInt8 {
        case open
        /// The loop is deciding whether to suspend; lasts a few instructions.
        case closing
        case closedSuspended
        case closedTerminated
    }

    var state: LifecycleState {
        LifecycleState(rawValue: stateValue.load(ordering: .acquiring)) ?? .terminated
    }

    func setState(_ state: LifecycleState) {
        stateValue.store(state.rawValue, ordering: .releasing)
    }

    var deadline: MonotonicInstant? {
        let raw = deadlineValue.load(ordering: .acquiring)
        return raw == 0 ? nil : MonotonicInstant(nanoseconds: raw)
    }

    /// The budget's expiration point (read apart from the deadline: a reader between the
    /// two stores sees the point of one budget with the deadline of another, both real).
    var expirationPoint: MonotonicInstant? {
        let raw = expirationPointValue.load(ordering: .acquiring)
        return raw == 0 ? nil : MonotonicInstant(nanoseconds: raw)
    }

    func setBudget(_ budget: DeadlineSchedule.Budget?) {
        expirationPointValue.store(budget.map { max($0.expirationPoint.nanoseconds, 1) } ?? 0, ordering: .releasing)
        deadlineValue.store(budget.map { max($0.deadline.nanoseconds, 1) } ?? 0, ordering: .releasing)
    }

    /// Off the loop: takes one place under `limit` for a grant not yet applied, unless the
    /// program has terminated, or suspended and the grant does not `resume` it (a
    /// background launch: the loop resumes the program when it applies the grant). `nil`
    /// when reserved; the refusal otherwise.
    ///
    /// After a ``BackgroundTaskRefusal/tooManyOpenTasks(limit:)`` the loop may have put off
    /// suspending because of this reservation: the caller asks it to settle again.
    func reserveQueuedGrant(limit: Int, resuming: Bool = false) -> BackgroundTaskRefusal? {
        queuedReservations.wrappingAdd(1, ordering: .sequentiallyConsistent)
        var gate = admission.load(ordering: .sequentiallyConsistent)
        var spins = 0
        while gate == Admission.closing.rawValue {
            spins += 1
            if spins > 64 { sched_yield() }  // the loop thread may be descheduled mid-decision
            gate = admission.load(ordering: .sequentiallyConsistent)
        }
        if gate != Admission.open.rawValue, !(resuming && gate == Admission.closedSuspended.rawValue) {
            queuedReservations.wrappingSubtract(1, ordering: .sequentiallyConsistent)
            return gate == Admission.closedTerminated.rawValue ? .terminated : .suspended
        }
        heldOffLoop.wrappingAdd(1, ordering: .sequentiallyConsistent)
        if heldCount() > limit {
            releaseQueuedGrant()
            return .tooManyOpenTasks(limit: limit)
        }
        return nil
    }

    /// On the loop, with no grant open, about to suspend (or finish terminating): closes
    /// admission off the loop, unless a begin holds a reservation (then `false`, and
    /// admission stays open: that grant is about to be applied).
    func closeAdmission(terminating: Bool) -> Bool {
        admission.store(Admission.closing.rawValue, ordering: .sequentiallyConsistent)
        if queuedReservations.load(ordering: .sequentiallyConsistent) > 0 {
            admission.store(Admission.open.rawValue, ordering: .sequentiallyConsistent)
            return false
        }
        let closed: Admission = terminating ? .closedTerminated : .closedSuspended
        admission.store(closed.rawValue, ordering: .sequentiallyConsistent)
        return true
    }

    /// On the loop: the program left suspension; begins off the loop are admitted again.
    func openAdmission() {
        admission.store(Admission.open.rawValue, ordering: .sequentiallyConsistent)
    }

    /// A reserved queued grant was refused, or dropped at termination: it holds nothing.
    func releaseQueuedGrant() {
        heldOffLoop.wrappingSubtract(1, ordering: .sequentiallyConsistent)
        queuedReservations.wrappingSubtract(1, ordering: .sequentiallyConsistent)
    }

    /// On the loop: a reserved queued grant is being applied; its reservation no longer
    /// keeps the program from suspending (its place moves with ``transferIn(open:)``).
    func releaseReservation() {
        queuedReservations.wrappingSubtract(1, ordering: .sequentiallyConsistent)
    }

    /// On the loop: a queued begin is in the table now, whose open count is `open`.
    func transferIn(open: Int) {
        transfer(heldChange: -1, open: open)
    }

    /// On the loop: a queued end took its grant out of the table, whose open count is `open`.
    func transferOut(open: Int) {
        transfer(heldChange: 1, open: open)
    }

    /// Off the loop: an end is queued for the loop; its grant stops counting against the
    /// cap now.
    func noteQueuedEnd() {
        heldOffLoop.wrappingSubtract(1, ordering: .sequentiallyConsistent)
    }

    /// A queued end that ended nothing (an unknown ID) or was dropped: it frees no place.
    func restoreQueuedEnd() {
        heldOffLoop.wrappingAdd(1, ordering: .sequentiallyConsistent)
    }

    private func transfer(heldChange: Int, open: Int) {
        transfers.wrappingAdd(1, ordering: .sequentiallyConsistent)
        heldOffLoop.wrappingAdd(heldChange, ordering: .sequentiallyConsistent)
        openOnLoop.store(open, ordering: .sequentiallyConsistent)
        transfers.wrappingAdd(1, ordering: .sequentiallyConsistent)
    }

    /// Off the loop: the grants their owners hold, this thread's reservation included,
    /// read under the loop's sequence lock (see the type's documentation).
    private func heldCount() -> Int {
        var spins = 0
        while true {
            let before = transfers.load(ordering: .sequentiallyConsistent)
            if before & 1 == 0 {
                let held = heldOffLoop.load(ordering: .sequentiallyConsistent)
                let open = openOnLoop.load(ordering: .sequentiallyConsistent)
                if transfers.load(ordering: .sequentiallyConsistent) == before { return held + open }
            }
            spins += 1
            if spins > 64 { sched_yield() }  // the loop thread may be descheduled mid-move
        }
    }

    /// On the loop: whether one more grant fits beside `open` grants in the table and
    /// what is held off the loop.
    func hasRoom(open: Int, limit: Int) -> Bool {
        open + heldOffLoop.load(ordering: .relaxed) < limit
    }

    /// On the loop: publishes the table's open count.
    func setOpenOnLoop(_ open: Int) {
        openOnLoop.store(open, ordering: .releasing)
    }
}
