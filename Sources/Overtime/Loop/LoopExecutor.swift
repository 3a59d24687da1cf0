import Logging

/// The loop thread as a Swift executor: actors and tasks can be isolated to it.
///
/// ```swift
/// actor Uploader {
///     let runtime: Runtime
///     nonisolated var unownedExecutor: UnownedSerialExecutor {
///         runtime.executor.asUnownedSerialExecutor()
///     }
/// }
/// ```
/// Jobs run on the loop thread in the order they were enqueued, interleaved with the
/// runtime's own work. After the runtime terminates the loop no longer runs jobs; an
/// enqueued job is then reported in the log and dropped.
public final class LoopExecutor: SerialExecutor, TaskExecutor, Sendable {
    private let loop: EventLoop
    private let queue: InboundQueue
    private let logger: Logger

    init(loop: EventLoop, queue: InboundQueue, logger: Logger) {
        self.loop = loop
        self.queue = queue
        self.logger = logger
    }

    /// Enqueues a job to run on the loop thread.
    public func enqueue(_ job: consuming ExecutorJob) {
        if !queue.enqueue(.job(UnownedJob(job))) {
            logger.error("a job was enqueued on the loop executor after termination; it is dropped")
        }
    }

    /// This executor as an unowned serial executor.
    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// Whether the current thread is the loop thread.
    public func isIsolatingCurrentContext() -> Bool? {
        loop.isCurrentThread
    }

    /// Traps when called off the loop thread; the Swift runtime calls it to check
    /// `assumeIsolated` and must not continue on the wrong thread.
    public func checkIsolated() {
        if !loop.isCurrentThread {
            fatalError("Overtime: expected to run on the runtime's loop thread")
        }
    }

    func run(_ job: UnownedJob) {
        job.runSynchronously(
            isolatedTo: asUnownedSerialExecutor(),
            taskExecutor: asUnownedTaskExecutor())
    }
}
