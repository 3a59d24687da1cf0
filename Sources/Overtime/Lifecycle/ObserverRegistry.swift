import Synchronization

/// Keeps lifecycle observers alive and stops delivery when cancelled or released.
///
/// Returned by ``Runtime/observe(_:)``. Delivery stops as soon as ``cancel()`` returns
/// (an event already being delivered on the loop thread may finish).
public final class ObservationToken: Sendable, Hashable {
    private let flag: ObserverRegistry.Entry
    private let onCancel: @Sendable () -> Void

    init(flag: ObserverRegistry.Entry, onCancel: @escaping @Sendable () -> Void) {
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

/// The observers of one runtime. Loop-thread only.
struct ObserverRegistry {
    /// One observer, shared by its token (which sets the flag) and the registry.
    ///
    /// A class with the flag inside, not a struct holding a flag object: delivering an
    /// event to a thousand observers then costs one retain and one cache line per
    /// observer instead of one per field.
    final class Entry: Sendable {
        let id: UInt64
        let handler: @Sendable (LifecycleEvent) -> Void
        /// Called once when the runtime terminates (streams finish there).
        let onFinish: (@Sendable () -> Void)?
        private let cancelled = Atomic<Bool>(false)

        init(
            id: UInt64, handler: @escaping @Sendable (LifecycleEvent) -> Void, onFinish: (@Sendable () -> Void)?
        ) {
            self.id = id
            self.handler = handler
            self.onFinish = onFinish
        }

        /// Sets the flag; returns `true` for the call that set it.
        func set() -> Bool { !cancelled.exchange(true, ordering: .acquiringAndReleasing) }

        /// Whether delivery to it has stopped.
        var isSet: Bool { cancelled.load(ordering: .acquiring) }
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
