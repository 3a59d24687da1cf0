import Synchronization

/// Keeps lifecycle observers alive and stops delivery when cancelled or released.
///
/// Returned by ``Runtime/observe(_:)``. Delivery stops as soon as ``cancel()`` returns
/// (an event already being delivered on the loop thread may finish).
public final class ObservationToken: Sendable, Hashable {
    private let flag: CancellationFlag
    private let onCancel: @Sendable () -> Void

    init(flag: CancellationFlag, onCancel: @escaping @Sendable () -> Void) {
        self.flag = flag
        self.onCancel = onCancel
    }

    deinit {
        cancel()
    }

    /// Stops delivery to this observer. Calling it again does nothing.
    public func cancel() {
        if flag.set() {
            onCancel()
        }
    }

    /// Whether ``cancel()`` was called or the token was released.
    public var isCancelled: Bool { flag.isSet }

    /// Tokens are equal when they are the same object.
    public static func == (lhs: ObservationToken, rhs: ObservationToken) -> Bool { lhs === rhs }

    /// Hashes the token's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

/// A flag shared by a token and its registry entry, so delivery stops at once.
final class CancellationFlag: Sendable {
    private let value = Atomic<Bool>(false)

    /// Sets the flag; returns `true` for the call that set it.
    func set() -> Bool { !value.exchange(true, ordering: .acquiringAndReleasing) }

    var isSet: Bool { value.load(ordering: .acquiring) }
}

/// The observers of one runtime. Loop-thread only.
struct ObserverRegistry {
    struct Entry {
        let id: UInt64
        let cancellation: CancellationFlag
        let handler: @Sendable (LifecycleEvent) -> Void
        /// Called once when the runtime terminates (streams finish there).
        let onFinish: (@Sendable () -> Void)?
    }

    private var entries: [Entry] = []
    private var cancelledIDs: Set<UInt64> = []

    mutating func add(_ entry: Entry) {
        if cancelledIDs.remove(entry.id) == nil { entries.append(entry) }
    }

    mutating func remove(id: UInt64) {
        if let index = entries.firstIndex(where: { $0.id == id }) {
            entries.remove(at: index)
        } else {
            cancelledIDs.insert(id)  // cancelled before the registration reached the loop
        }
    }

    /// The entries to deliver the next event to, in registration order.
    var snapshot: [Entry] { entries }

    mutating func removeAll() -> [Entry] {
        defer { entries = [] }
        return entries
    }
}
