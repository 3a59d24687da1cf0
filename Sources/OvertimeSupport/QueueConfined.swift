// A value that only one serial queue's thread touches, each access checked in debug builds.

/// A value owned by one ``SerialWorkQueue``: only work running on that queue reads or
/// changes it, and other threads reach it by queueing work (messages), never by locking.
/// The queue-confined twin of `Overtime`'s `LoopBound` (swift-nio's `NIOLoopBound`).
package final class QueueConfined<Value>: @unchecked Sendable {  // confined to `queue`, checked
    private let queue: SerialWorkQueue
    private var stored: Value

    /// Wraps `value` for `queue`; from any thread (only reading and changing it is the queue's).
    package init(_ value: Value, on queue: SerialWorkQueue) {
        self.stored = value
        self.queue = queue
    }

    /// The value, read and changed in place (no copy of what it holds). On the queue's thread only.
    package var value: Value {
        _read {
            assert(queue.isCurrent, "a queue-confined value read off its queue")
            yield stored
        }
        _modify {
            assert(queue.isCurrent, "a queue-confined value changed off its queue")
            yield &stored
        }
    }
}
