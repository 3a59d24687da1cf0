import OvertimeSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("SerialWorkQueue: work in order on a thread of its own")
struct SerialWorkQueueTests {
    @Test func workRunsInOrderOnOneThreadThatIsNotTheCallers() {
        let queue = SerialWorkQueue(name: "test-order")
        let seen = Locked<[Int]>([])
        let threads = Locked<Set<UInt>>([])
        for index in 0..<1_000 {
            queue.async {
                seen.withLock { $0.append(index) }
                threads.withLock { _ = $0.insert(UInt(pthread_self())) }
            }
        }
        queue.sync {}
        #expect(seen.withLock { $0 } == Array(0..<1_000))
        #expect(threads.withLock { $0.count } == 1)
        #expect(!threads.withLock { $0.contains(UInt(pthread_self())) })
    }

    @Test func syncReturnsAfterEverythingQueuedBeforeIt() {
        let queue = SerialWorkQueue(name: "test-sync")
        let counter = Locked(0)
        for _ in 0..<100 {
            queue.async {
                usleep(100)
                counter.withLock { $0 += 1 }
            }
        }
        let seen = queue.sync { counter.withLock { $0 } }
        #expect(seen == 100)
    }

    @Test func syncFromWorkOnTheQueueRunsAtOnceRatherThanWaitingForItself() {
        let queue = SerialWorkQueue(name: "test-nested")
        let inner = queue.sync { queue.sync { 42 } }
        #expect(inner == 42)
    }

    @Test func aTaskPreferringTheQueueRunsItsCodeOnTheQueuesThread() async {
        let queue = SerialWorkQueue(name: "test-tasks")
        let queueThread = queue.sync { UInt(pthread_self()) }
        let threads = await Task(executorPreference: queue) { () -> [UInt] in
            var threads = [UInt(pthread_self())]
            await Task.yield()
            threads.append(UInt(pthread_self()))
            return threads
        }.value
        #expect(threads == [queueThread, queueThread])
    }

    /// Asynchronous work holds the queue from its start to its end: work queued after it
    /// waits while it awaits, yet the thread is free meanwhile (another task that prefers
    /// the queue runs), and the work resumes there.
    @Test func asynchronousWorkHoldsTheQueueUntilItEndsWithoutHoldingItsThread() async {
        let queue = SerialWorkQueue(name: "test-held")
        let queueThread = queue.sync { UInt(pthread_self()) }
        let order = Locked<[String]>([])
        let (answer, answered) = AsyncStream.makeStream(of: Void.self)
        let (started, starting) = AsyncStream.makeStream(of: Void.self)
        let resumedOn = Locked<UInt?>(nil)
        queue.task {
            order.withLock { $0.append("first starts") }
            starting.yield()
            for await _ in answer { break }  // a database's answer, say
            resumedOn.withLock { $0 = UInt(pthread_self()) }
            order.withLock { $0.append("first ends") }
        }
        queue.async { order.withLock { $0.append("second") } }
        for await _ in started { break }
        // Runs on the queue's thread while the first work awaits.
        let other = await Task(executorPreference: queue) { UInt(pthread_self()) }.value
        #expect(other == queueThread)
        #expect(order.withLock { $0 } == ["first starts"])
        answered.yield()
        let result = await queue.performTask { order.withLock { $0 } }
        #expect(result == ["first starts", "first ends", "second"])
        #expect(resumedOn.withLock { $0 } == queueThread)
    }

    @Test func syncTaskWaitsForTheResultOfAsynchronousWork() {
        let queue = SerialWorkQueue(name: "test-synctask")
        let value = queue.syncTask { () async -> Int in
            await Task.yield()
            return 42
        }
        #expect(value == 42)
    }

    @Test func itsThreadEndsOnceTheQueueIsReleasedAndDrained() {
        let ran = Atomic<Int>(0)
        let finished = Locked(false)
        do {
            let queue = SerialWorkQueue(name: "test-release")
            for _ in 0..<10 {
                queue.async {
                    usleep(1_000)
                    ran.add(1, ordering: .relaxed)
                }
            }
            queue.async {
                finished.withLock { $0 = true }
                finished.broadcast()
            }
        }
        // Released with work still queued: all of it runs, then the thread ends.
        let done = finished.withLock(waitingUntil: { $0 }, timeout: 10) { _, ready in ready }
        #expect(done)
        #expect(ran.load(ordering: .relaxed) == 10)
        var threadGone = false
        for _ in 0..<1_000 {
            guard !threadGone else { break }
            threadGone = !Self.threadNames().contains("test-release")
            if !threadGone { usleep(1_000) }
        }
        #expect(threadGone)
    }

    /// The names of this process's threads.
    private static func threadNames() -> [String] {
        ((try? listDirectory("/proc/self/task").get()) ?? []).compactMap { task in
            guard case .success(let bytes) = readWholeFile("/proc/self/task/\(task)/comm") else { return nil }
            return String(decoding: bytes.filter { $0 != UInt8(ascii: "\n") }, as: UTF8.self)
        }
    }
}
