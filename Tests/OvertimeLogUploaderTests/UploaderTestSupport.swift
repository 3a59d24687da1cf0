import Foundation
import Overtime
import OvertimeSupport
import OvertimeTestSupport
import OvertimeTesting
import Testing

@testable import OvertimeLogUploader

/// A sink whose answers the test scripts: fail, succeed, or hang until cancelled.
final class ScriptedSink: LogSink, @unchecked Sendable {
    enum Answer: Sendable { case store, fail(SinkError), hangUntilCancelled }
    private let answers: Locked<[Answer]>
    private let fallback: Answer
    let stored = Recorder<String>()
    let attempts = Recorder<String>()
    /// When each attempt began, on the clock given to ``timeAttempts(on:)``.
    let attemptTimes = Recorder<MonotonicInstant>()
    private let clock = Locked<(any RuntimeClock)?>(nil)

    init(_ answers: [Answer], then fallback: Answer = .store) {
        self.answers = Locked(answers)
        self.fallback = fallback
    }

    /// Records each attempt's time on `clock` from now on.
    func timeAttempts(on clock: any RuntimeClock) {
        self.clock.withLock { $0 = clock }
    }

    var description: String { "scripted" }

    func store(_ segment: SealedSegment) async throws(SinkError) {
        attempts.append(segment.name)
        if let clock = clock.withLock({ $0 }) { attemptTimes.append(clock.now) }
        let answer = answers.withLock { $0.isEmpty ? fallback : $0.removeFirst() }
        switch answer {
        case .store: stored.append(segment.name)
        case .fail(let error): throw error
        case .hangUntilCancelled:
            let gate = Locked<CheckedContinuation<Void, Never>?>(nil)
            let open: @Sendable () -> Void = {
                gate.withLock { gate in
                    gate?.resume()
                    gate = nil
                }
            }
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    gate.withLock { $0 = continuation }
                    if Task.isCancelled { open() }
                }
            } onCancel: {
                open()
            }
            throw .cancelled
        }
    }
}

/// A spool in `folder` (or, given a volume, in memory) with 4 KiB segments holding `lines`
/// lines `"<label> line N sss…"`, all sealed: what a sink's test stores.
func spoolWithSealedSegments(
    _ folder: TemporaryDirectory, lines: Int, label: String, inMemory volume: InMemorySpoolVolume? = nil
) throws -> Spool {
    var options = SpoolConfiguration()
    options.segmentBytes = 4096
    let spool = try Spool(
        directory: folder.path, configuration: options, clock: SystemClock(),
        storage: volume.map { .memory($0) } ?? .disk)
    for index in 0..<lines { try spool.append("\(label) line \(index) " + String(repeating: "x", count: 45)) }
    try spool.sealActiveSegment()
    return spool
}

/// A started runtime on `clock` that handles no signals and logs into a capture.
func startedSinkRuntime(clock: any RuntimeClock = SystemClock()) throws -> Runtime {
    var configuration = RuntimeConfiguration()
    configuration.signalHandling = nil
    configuration.logger = LogCapture().logger
    let runtime = try Runtime(configuration: configuration, clock: clock)
    runtime.start()
    return runtime
}

extension Array where Element: Hashable {
    func uniqued() -> [Element] {
        var seen = Set<Element>()
        return filter { seen.insert($0).inserted }
    }
}

extension LogUploader {
    /// Runs until `done()` holds: whenever the uploader waits out a backoff, virtual time
    /// moves to the backoff's end — exactly there: until its timer has fired and the
    /// uploader resumed, it still reads as backing off, and moving on to whatever timer is
    /// next (the grant's expiration) would cut the drain short. Otherwise real work (a
    /// sink's I/O) is given a moment. No step of the uploader's own logic waits for real time.
    func drive(_ clock: ManualClock, until done: () -> Bool) async {
        for _ in 0..<20_000 {
            if done() { return }
            if backoffEnds != nil {
                // What the runtime was asked first (a stop wakes the backoff early).
                clock.waitForQueuedRequests()
                if let end = backoffEnds, clock.now < end {
                    clock.advance(to: end)
                    continue
                }
            }
            try? await Task.sleep(for: .milliseconds(1))
        }
        Issue.record("the uploader did not get there")
    }
}
