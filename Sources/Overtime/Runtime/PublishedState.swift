import Synchronization

/// The part of the runtime's state that any thread may read without a round trip.
///
/// Written only by the loop thread (except the two counters, which begin reserves from
/// any thread); read by the public API to answer `state`, `backgroundTimeRemaining`
/// and to refuse a grant at once, off the loop.
final class PublishedState: Sendable {
    private let stateValue = Atomic<UInt8>(LifecycleState.active.rawValue)
    /// Nanoseconds of the background deadline, 0 when none.
    private let deadlineValue = Atomic<UInt64>(0)
    /// Grants begun off the loop whose begin the loop has not applied yet.
    private let remoteReservations = Atomic<Int>(0)
    /// The grant table's open count, as the loop last stored it (a plain store per
    /// begin and end: the loop's own begins need no read-modify-write).
    private let openOnLoop = Atomic<Int>(0)
    /// The counter behind IDs handed out off the loop.
    let lastRemoteNumber = Atomic<UInt64>(0)

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

    func setDeadline(_ deadline: MonotonicInstant?) {
        deadlineValue.store(deadline.map { max($0.nanoseconds, 1) } ?? 0, ordering: .releasing)
    }

    /// Off the loop: takes one place under `limit` for a grant not yet applied; `false`
    /// when the cap is reached.
    func reserveRemoteGrant(limit: Int) -> Bool {
        let remote = remoteReservations.wrappingAdd(1, ordering: .relaxed).newValue
        if remote + openOnLoop.load(ordering: .relaxed) <= limit { return true }
        remoteReservations.wrappingSubtract(1, ordering: .relaxed)
        return false
    }

    /// A reserved remote grant was applied (it is in the table now) or refused.
    func releaseRemoteGrant() {
        remoteReservations.wrappingSubtract(1, ordering: .relaxed)
    }

    /// On the loop: whether one more grant fits beside `open` grants in the table and
    /// the remote ones reserved.
    func hasRoom(open: Int, limit: Int) -> Bool {
        open + remoteReservations.load(ordering: .relaxed) < limit
    }

    /// On the loop: publishes the table's open count.
    func setOpenOnLoop(_ open: Int) {
        openOnLoop.store(open, ordering: .relaxed)
    }
}
