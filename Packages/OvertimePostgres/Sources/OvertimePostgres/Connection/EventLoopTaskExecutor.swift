// The store's event loop as the executor of its operations' tasks.

import NIOCore

/// Runs the jobs of a task that prefers it on `loop`: a store operation's code runs on the
/// thread that does its I/O (no hop between its statements), and the process never starts
/// Swift's global executor for it (on Linux, a Dispatch pool that wakes once a second).
final class EventLoopTaskExecutor: TaskExecutor {
    let loop: any EventLoop

    init(_ loop: any EventLoop) { self.loop = loop }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
