/// Timers on the runtime's loop: closures due at a monotonic instant, kept in one heap
/// beside the grant deadlines, so the loop still arms a single timer (and a virtual
/// clock drives both).
///
/// Loop-thread only; no callbacks are called from here.
struct LoopTimers {
    private struct Entry {
        var at: MonotonicInstant
        var sequence: UInt64
        var timer: LoopTimer
    }

    private var heap: [Entry] = []
    private var nextSequence: UInt64 = 0

    /// The earliest instant at which a timer is due.
    var nextWakeup: MonotonicInstant? { heap.first?.at }

    var isEmpty: Bool { heap.isEmpty }

    /// Adds `timer`, due at `at`; timers due at the same instant run in the order added.
    mutating func add(_ timer: LoopTimer, at: MonotonicInstant) {
        nextSequence += 1
        heap.append(Entry(at: at, sequence: nextSequence, timer: timer))
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard precedes(heap[child], heap[parent]) else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the timers due at `now`, in due order.
    mutating func popDue(now: MonotonicInstant) -> [LoopTimer] {
        var due: [LoopTimer] = []
        while let top = heap.first, top.at <= now {
            due.append(top.timer)
            removeTop()
        }
        return due
    }

    /// Drops cancelled timers, so that they no longer decide the next wake-up.
    mutating func removeCancelled() {
        let kept = heap.filter { !$0.timer.isCancelled }
        guard kept.count != heap.count else { return }
        heap = []
        for entry in kept.sorted(by: precedes) { heap.append(entry) }  // a sorted array is a heap
    }

    /// Removes every timer and returns them.
    mutating func removeAll() -> [LoopTimer] {
        defer { heap = [] }
        return heap.sorted(by: precedes).map(\.timer)
    }

    private func precedes(_ a: Entry, _ b: Entry) -> Bool {
        a.at < b.at || (a.at == b.at && a.sequence < b.sequence)
    }

    private mutating func removeTop() {
        heap.swapAt(0, heap.count - 1)
        heap.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var first = parent
            if left < heap.count, precedes(heap[left], heap[first]) { first = left }
            if right < heap.count, precedes(heap[right], heap[first]) { first = right }
            if first == parent { return }
            heap.swapAt(parent, first)
            parent = first
        }
    }
}
