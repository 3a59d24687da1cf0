// The changes of one request's work info, as a sequence that lets go of its place when
// the loop over it ends.

/// The work info of one request as it changes (``Scheduler/workInfoUpdates(_:)``). The
/// scheduler stops watching the request once the sequence and its iterator are gone — a
/// loop that breaks out is enough — or the task iterating it is cancelled.
public struct WorkInfoUpdates: AsyncSequence, Sendable {
    /// The work info of the request.
    public typealias Element = WorkInfo

    let stream: AsyncStream<WorkInfo>
    let registration: Registration

    /// The scheduler's record of this consumer: let go when the last copy of the sequence
    /// or its iterator is.
    final class Registration: Sendable {
        private let release: @Sendable () -> Void

        init(_ release: @escaping @Sendable () -> Void) {
            self.release = release
        }

        deinit { release() }
    }

    /// An iterator over the changes.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<WorkInfo>.AsyncIterator
        let registration: Registration

        /// The next work info, `nil` once the sequence ended.
        public mutating func next() async -> WorkInfo? { await base.next() }
    }

    /// An iterator over the changes.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: stream.makeAsyncIterator(), registration: registration)
    }
}
