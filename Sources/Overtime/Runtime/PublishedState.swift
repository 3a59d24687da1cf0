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
    /// Open grants plus grants begun off the loop and not yet applied.
    let reservedGrants = Atomic<Int>(0)
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

    /// Takes one place under `limit`; `false` when the cap is reached.
    func reserveGrant(limit: Int) -> Bool {
        if reservedGrants.wrappingAdd(1, ordering: .relaxed).newValue <= limit { return true }
        reservedGrants.wrappingSubtract(1, ordering: .relaxed)
        return false
    }

    func releaseGrant() {
        reservedGrants.wrappingSubtract(1, ordering: .relaxed)
    }
}
