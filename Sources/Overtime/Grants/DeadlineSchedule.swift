/// When grants must expire and be terminated: one background budget shared by every
/// grant, plus a heap for the few grants with their own deadline.
///
/// The budget window is a single pair of instants however many grants are open, so
/// begin and end never touch a timer. The runtime arms one timer for ``nextWakeup``.
/// Heap entries are never removed when a grant ends; a stale entry is skipped when it
/// surfaces, and the heap is compacted once stale entries are half of it (the core
/// counts them; so compaction is amortized O(1) per grant, and never a scan per wake-up).
///
/// Loop-thread only; no callbacks are called from here.
final class DeadlineSchedule {
    /// The background budget of the current background period.
    struct Budget: Equatable {
        var deadline: MonotonicInstant
        var expirationPoint: MonotonicInstant
        var expirationDone = false
    }

    struct Entry {
        var at: MonotonicInstant
        var slot: Int32
        var generation: UInt32
    }

    let leadTime: Duration
    @exclusivity(unchecked) private(set) var budget: Budget?
    @exclusivity(unchecked) private var heap: [Entry] = []
    /// Entries in the heap whose grant ended since the last compaction.
    @exclusivity(unchecked) private var endedSinceCompaction = 0

    init(leadTime: Duration) {
        self.leadTime = leadTime
    }

    func startBudget(now: MonotonicInstant, length: Duration) {
        let deadline = now + length
        budget = Budget(deadline: deadline, expirationPoint: deadline - leadTime)
    }

    func clearBudget() {
        budget = nil
    }

    /// Ends the running budget by `deadline` at the latest; `false` when no budget runs or
    /// it ends earlier anyway.
    ///
    /// The expiration point moves with it, a lead time before — capped at half of what is
    /// left from `now`. A budget cut short (a sleep's few seconds against a lead time of
    /// as many) would otherwise be due for expiration at once, and no work would be done in
    /// it: cut to 4.5 s with a lead time of 5 s, the work has 2.25 s and the expiration
    /// handlers 2.25 s.
    @discardableResult
    func capBudget(deadline: MonotonicInstant, now: MonotonicInstant) -> Bool {
        guard var capped = budget, deadline < capped.deadline else { return false }
        let lead = min(leadTime, max(deadline - now, .zero) / 2)
        capped.deadline = deadline
        capped.expirationPoint = min(capped.expirationPoint, deadline - lead)
        budget = capped
        return true
    }

    func markBudgetExpirationDone() {
        budget?.expirationDone = true
    }

    /// Adds a wake-up for the grant in `slot` at `at`.
    func schedule(at: MonotonicInstant, slot: Int32, generation: UInt32) {
        heap.append(Entry(at: at, slot: slot, generation: generation))
        siftUp(heap.count - 1)
    }

    /// The earliest instant at which something may be due.
    var nextWakeup: MonotonicInstant? {
        var next: MonotonicInstant?
        if let budget {
            next = budget.expirationDone ? budget.deadline : budget.expirationPoint
        }
        if let top = heap.first, next.map({ top.at < $0 }) ?? true {
            next = top.at
        }
        return next
    }

    /// Removes and returns the earliest heap entry due at `now`, if any.
    ///
    /// One at a time, with no array of what is due: the loop takes them as they come. An
    /// array that grows past a kilobyte when many are due at once is a large allocation,
    /// and glibc answers the first one after many small frees (each ended grant's record)
    /// by consolidating all of them at once: one 10 ms stall in 100,000 expirations.
    func popNextDue(now: MonotonicInstant) -> Entry? {
        guard let top = heap.first, top.at <= now else { return nil }
        removeTop()
        return top
    }

    /// A grant with `count` entries still in the heap ended: they are stale now.
    func noteEntriesStale(_ count: Int) {
        endedSinceCompaction += count
    }

    /// Drops entries for grants that are gone, once they may outnumber the live ones.
    func compact(isLive: (Entry) -> Bool) {
        guard heap.count > 1024, endedSinceCompaction * 2 > heap.count else { return }
        endedSinceCompaction = 0
        heap = heap.filter(isLive)
        for index in stride(from: heap.count / 2 - 1, through: 0, by: -1) { siftDown(index) }
    }

    private func removeTop() {
        let last = heap.removeLast()
        if !heap.isEmpty {
            heap[0] = last
            siftDown(0)
        }
    }

    private func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].at < heap[parent].at else { return }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            guard left < heap.count else { return }
            var smallest = left
            if left + 1 < heap.count, heap[left + 1].at < heap[left].at { smallest = left + 1 }
            guard heap[smallest].at < heap[parent].at else { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
