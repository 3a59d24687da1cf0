import Foundation
import Overtime
import OvertimeTestSupport
import OvertimeTesting
import Testing

@testable import OvertimeLogUploader

// Six minutes: a test here usually takes 5–40 s, but under the parallel suite one start of
// SeaweedFS may take three tries of up to a minute each (see `SeaweedFSServer`), and a
// large segment's stores as long again; three minutes were passed once in several runs.
@Suite(
    "S3Sink against a real SeaweedFS that checks signatures, read back with boto3",
    .timeLimit(.minutes(6)))
struct S3SinkTests {
    private func spoolWithSegments(_ folder: TemporaryDirectory, lines: Int = 300) throws -> Spool {
        try spoolWithSealedSegments(folder, lines: lines, label: "s3")
    }

    private func runtime(clock: any RuntimeClock = SystemClock()) throws -> Runtime {
        try startedSinkRuntime(clock: clock)
    }

    private func configuration(
        _ store: SeaweedFSServer, prefix: String = "fleet/device-7", secret: String? = nil
    ) -> S3SinkConfiguration {
        var configuration = S3SinkConfiguration(
            bucket: store.bucket, prefix: prefix,
            credentials: S3Credentials(accessKeyID: store.accessKey, secretAccessKey: secret ?? store.secretKey))
        configuration.endpoint = store.endpoint
        return configuration
    }

    /// Stores `segment` as the uploader would: an answer the sink calls retryable is tried
    /// again, backing off from 250 ms to 8 s, for up to 90 s (the uploader itself never gives
    /// up on a retryable answer). Under ThreadSanitizer's load in CI, SeaweedFS answered PUTs
    /// `500 InternalError` for over a second, and twice for longer than the whole budget
    /// (weed's own parts no longer reaching each other): after 30 s of it the store is
    /// restarted on its data, as an operator would, once. Any other error fails the test,
    /// with what weed logged.
    private func storeRetrying(_ sink: S3Sink, _ segment: SealedSegment, on store: SeaweedFSServer) async throws {
        var delay = Duration.milliseconds(250)
        let started = ContinuousClock.now
        let deadline = started + .seconds(90)
        var restarted = false
        while true {
            let failure: SinkError
            do {
                try await sink.store(segment)
                return
            } catch {
                failure = error
            }
            guard failure.code == .retryable, ContinuousClock.now + delay < deadline else {
                Issue.record("SeaweedFS's warnings and errors:\n\(store.logTail())")
                throw failure
            }
            if !restarted, ContinuousClock.now - started > .seconds(30) {
                restarted = true
                FileHandle.standardError.write(
                    Data("SeaweedFS answered \(failure) for 30 s; restarting it:\n\(store.logTail())\n".utf8))
                try await onOwnThread { try store.restart() }
                continue
            }
            try await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(8))
        }
    }

    private func stop(_ runtime: Runtime) async {
        runtime.requestTermination()
        await runtime.waitUntilTerminated()
        #expect(runtime.loopClosedCleanly == true)
    }

    @Test(.startsProcesses, arguments: [SegmentEncoding.identity, .zstd, .gzip])
    func eachSegmentIsOneObjectUnderItsNameAndARepeatIsIdempotent(_ encoding: SegmentEncoding) async throws {
        let store = try await onOwnThread { try SeaweedFSServer() }
        let folder = TemporaryDirectory("s3")
        defer { folder.remove() }
        let spool = try spoolWithSegments(folder)
        let runtime = try runtime()
        var options = configuration(store)
        options.encoding = encoding
        let sink = try S3Sink(configuration: options, runtime: runtime)
        for segment in spool.sealedSegments {
            try await storeRetrying(sink, segment, on: store)
            // Again, as after a crash before the checkpoint: 412, ours.
            try await storeRetrying(sink, segment, on: store)
        }
        let objects = try await onOwnThread { try store.objects() }
        let expected = spool.sealedSegments.map { "fleet/device-7/\($0.name).log".dropLast(4) + encoding.fileExtension }
        #expect(objects.map(\.key).sorted() == expected.map(String.init).sorted(), "one version of each, no more")
        for segment in spool.sealedSegments {
            let object = try #require(objects.first { $0.key == sink.objectKey(for: segment) })
            #expect(object.content == Array(try Data(contentsOf: URL(fileURLWithPath: segment.path))))
            #expect(object.contentEncoding == encoding.contentEncoding)
            if encoding != .identity { #expect(object.size < segment.bytes / 2, "stored compressed") }
        }
        await stop(runtime)
    }

    @Test(.startsProcesses) func aNameTakenByOtherBytesIsRefusedForGoodAndNeverOverwritten() async throws {
        let store = try await onOwnThread { try SeaweedFSServer() }
        let folder = TemporaryDirectory("s3")
        defer { folder.remove() }
        let spool = try spoolWithSegments(folder)
        let segments = spool.sealedSegments
        let runtime = try runtime()
        let sink = try S3Sink(configuration: configuration(store), runtime: runtime)
        // Another writer holds the first name; our own bytes are already under the second.
        try await onOwnThread { try store.put(sink.objectKey(for: segments[0]), Array("another writer's object".utf8)) }
        try await onOwnThread { try store.put(sink.objectKey(for: segments[1]), try segments[1].readBytes()) }
        do {
            try await sink.store(segments[0])
            Issue.record("a different object was overwritten")
        } catch {
            #expect(error.code == .permanent, "\(error)")
            #expect(error.reason.contains("not overwritten"), "\(error)")
        }
        try await storeRetrying(sink, segments[1], on: store)  // the same content: counts as stored
        let objects = try await onOwnThread { try store.objects() }
        #expect(objects.count == 2, "no second version of either")
        #expect(
            objects.first { $0.key == sink.objectKey(for: segments[0]) }?.content
                == Array("another writer's object".utf8))
        await stop(runtime)
    }

    @Test(.startsProcesses) func aWrongSecretOrKeyIsRefusedForGoodNamingTheStoresCodeAndNeverTheSecret() async throws {
        let store = try await onOwnThread { try SeaweedFSServer() }
        let folder = TemporaryDirectory("s3")
        defer { folder.remove() }
        let spool = try spoolWithSegments(folder, lines: 10)
        let segment = try #require(spool.sealedSegments.first)
        let runtime = try runtime()
        let wrongSecret = try S3Sink(configuration: configuration(store, secret: "not-the-secret-42"), runtime: runtime)
        var unknownKey = configuration(store)
        unknownKey.credentials.accessKeyID = "AKIDNOSUCHKEY"
        for (sink, code) in [
            (wrongSecret, "SignatureDoesNotMatch"),
            (try S3Sink(configuration: unknownKey, runtime: runtime), "InvalidAccessKeyId"),
        ] {
            do {
                try await sink.store(segment)
                Issue.record("stored with bad credentials")
            } catch {
                #expect(error.code == .permanent, "\(error)")
                #expect(error.reason.contains("403 \(code)"), "\(error)")
                #expect(!"\(error)".contains("not-the-secret-42") && !"\(error)".contains(store.secretKey))
            }
            #expect(!"\(sink)".contains("not-the-secret-42") && !"\(sink)".contains(store.secretKey))
        }
        #expect(try await onOwnThread { try store.objects() }.isEmpty)
        await stop(runtime)
    }

    @Test(.startsProcesses) func aClockAnHourOffIsReportedAsSuchAndRetriedNotRefused() async throws {
        let store = try await onOwnThread { try SeaweedFSServer() }
        let folder = TemporaryDirectory("s3")
        defer { folder.remove() }
        let spool = try spoolWithSegments(folder, lines: 10)
        let segment = try #require(spool.sealedSegments.first)
        let skewed = try runtime(clock: SkewedClock(offset: .seconds(-3600)))
        let sink = try S3Sink(configuration: configuration(store), runtime: skewed)
        do {
            try await sink.store(segment)
            Issue.record("stored with a clock an hour off")
        } catch {
            #expect(error.code == .retryable, "the clock will be set; the segment waits")
            #expect(error.reason.contains("RequestTimeTooSkewed") && error.reason.contains("clock"), "\(error)")
        }
        await stop(skewed)
        // Once the clock is right, the same segment goes (tried again on a retryable answer,
        // as the uploader does: a loaded SeaweedFS has answered a PUT "500 InternalError").
        let runtime = try runtime()
        try await storeRetrying(S3Sink(configuration: configuration(store), runtime: runtime), segment, on: store)
        #expect(try await onOwnThread { try store.objects() }.count == 1)
        await stop(runtime)
    }

    /// A spool whose one sealed segment holds about `bytes` of lines that do not compress.
    private func spoolWithOneLargeSegment(_ folder: TemporaryDirectory, bytes: Int) throws -> Spool {
        var options = SpoolConfiguration()
        options.segmentBytes = 2 * bytes
        options.quotaBytes = 4 * options.segmentBytes
        options.durability = .operatingSystemBuffer
        options.segmentAge = .seconds(3600)  // sealed by the test alone, however slow the machine
        let spool = try Spool(directory: folder.path, configuration: options, clock: SystemClock())
        var state = UInt64.random(in: 1...UInt64.max)
        let digits = Array("0123456789abcdef".utf8)
        // One batch of 1,000 random lines, appended as often as it takes: cheap to make even
        // under ThreadSanitizer, and still incompressible as the test needs.
        let batch = (0..<1_000).map { _ in
            (0..<10).flatMap { _ in
                // xorshift64: cheap bytes that do not compress
                state ^= state << 13
                state ^= state >> 7
                state ^= state << 17
                return (0..<16).map { digits[Int(state >> ($0 * 4) & 15)] }
            }
        }
        var written = 0
        while written < bytes {
            try spool.append(batch)
            written += 160_000
        }
        try spool.sealActiveSegment()
        return spool
    }

    @Test(.startsProcesses) func aLargeSegmentGoesInPartsExactlyOnceAndIsNeverOverwritten() async throws {
        let store = try await onOwnThread { try SeaweedFSServer() }
        let folder = TemporaryDirectory("s3")
        defer { folder.remove() }
        let spool = try spoolWithOneLargeSegment(folder, bytes: 11 << 20)
        let segment = try #require(spool.sealedSegments.first)
        try #require(spool.sealedSegments.count == 1 && segment.bytes > 10 << 20)
        let runtime = try runtime()
        var options = configuration(store)
        options.multipartThresholdBytes = 5 << 20
        options.partBytes = 5 << 20
        let sink = try S3Sink(configuration: options, runtime: runtime)
        try await storeRetrying(sink, segment, on: store)
        // Again from a new sink, as after a crash before the checkpoint: the completion
        // answers 412, the object is ours, the new upload is aborted.
        try await storeRetrying(S3Sink(configuration: options, runtime: runtime), segment, on: store)
        var objects = try await onOwnThread { try store.objects() }
        #expect(objects.count == 1, "one version")
        #expect(objects.first?.etag.hasSuffix("-3\"") == true, "stored in 3 parts: \(objects.first?.etag ?? "")")
        #expect(objects.first?.content == (try segment.readBytes()))
        #expect(try await onOwnThread { try store.unfinishedUploads() }.isEmpty, "the repeat's upload was aborted")

        // Another writer's object under the name: refused for good, kept, nothing left over.
        options.prefix = "elsewhere"
        let other = try S3Sink(configuration: options, runtime: runtime)
        try await onOwnThread { try store.put(other.objectKey(for: segment), Array("another writer".utf8)) }
        do {
            try await other.store(segment)
            Issue.record("a different object was overwritten")
        } catch {
            #expect(error.code == .permanent && error.reason.contains("not overwritten"), "\(error)")
        }
        objects = try await onOwnThread { try store.objects() }
        #expect(objects.count == 2 && objects.contains { $0.content == Array("another writer".utf8) })
        #expect(try await onOwnThread { try store.unfinishedUploads() }.isEmpty)
        await stop(runtime)
    }

    @Test(.startsProcesses) func unfinishedUploadsACrashLeftUnderTheStreamAreAbortedBeforeItsFirstSegmentAndNoOneElses()
        async throws
    {
        let store = try await onOwnThread { try SeaweedFSServer() }
        let folder = TemporaryDirectory("s3")
        defer { folder.remove() }
        let spool = try spoolWithSegments(folder, lines: 100)
        let segments = spool.sealedSegments
        let stream = segments[0].name.prefix { $0 != "/" }
        let leftovers = ["fleet/device-7/\(stream)/00000000000000000900.log", "fleet/device-7/\(stream)/x.log.zst"]
        let others = [
            "fleet/device-7/0123456789abcdef0123456789abcdef/00000000000000000001.log",
            "fleet/device-7/\(stream)0/00000000000000000001.log", "fleet/device-8/\(stream)/00000000000000000001.log",
            "\(stream)/00000000000000000001.log",
        ]
        for key in leftovers + others { try await onOwnThread { try store.startUpload(key) } }
        let runtime = try runtime()
        let capture = LogCapture()
        let sink = try S3Sink(configuration: configuration(store), runtime: runtime, logger: capture.logger)
        try await storeRetrying(sink, segments[0], on: store)
        #expect(try await onOwnThread { try store.unfinishedUploads() }.map(\.key).sorted() == others.sorted())
        #expect(
            capture.messages(at: .notice).contains { $0.message.contains("aborted 2 unfinished multipart upload(s)") })
        // Once per stream: an upload started since is the sink's business, not a leftover.
        try await onOwnThread { try store.startUpload(leftovers[0]) }
        try await storeRetrying(sink, segments[1], on: store)
        #expect(try await onOwnThread { try store.unfinishedUploads() }.count == others.count + 1)
        await stop(runtime)
    }

    @Test(.startsProcesses) func storesMadeAtOnceShareTheStreamsOneSweepAndAbortNoneOfEachOther() async throws {
        let store = try await onOwnThread { try SeaweedFSServer() }
        let folder = TemporaryDirectory("s3")
        defer { folder.remove() }
        let spool = try spoolWithSegments(folder, lines: 300)
        let segments = Array(spool.sealedSegments.prefix(4))
        #expect(segments.count == 4)
        let stream = segments[0].name.prefix { $0 != "/" }
        let leftovers = ["fleet/device-7/\(stream)/00000000000000000900.log", "fleet/device-7/\(stream)/x.log"]
        for key in leftovers { try await onOwnThread { try store.startUpload(key) } }
        let runtime = try runtime()
        let capture = LogCapture()
        let sink = try S3Sink(configuration: configuration(store), runtime: runtime, logger: capture.logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for segment in segments { group.addTask { try await self.storeRetrying(sink, segment, on: store) } }
            try await group.waitForAll()
        }
        let sweeps = capture.messages(at: .notice).filter { $0.message.contains("unfinished multipart upload(s)") }
        #expect(
            sweeps.map(\.message) == [
                "aborted 2 unfinished multipart upload(s) a previous run left under fleet/device-7/\(stream)/"
            ])
        #expect(try await onOwnThread { try store.unfinishedUploads() }.isEmpty)
        let stored = try await onOwnThread { try store.objects() }
        for segment in segments {
            let object = stored.first { $0.key == sink.objectKey(for: segment) }
            #expect(object?.content == (try segment.readBytes()))
        }
        await stop(runtime)
    }

    @Test(.startsProcesses) func theUploaderRidesOutAStoreKilledMidUploadAndLosesNothing() async throws {
        let store = try await onOwnThread { try SeaweedFSServer() }
        let folder = TemporaryDirectory("s3")
        defer { folder.remove() }
        let spool = try spoolWithSegments(folder, lines: 3000)
        let count = spool.sealedSegments.count
        let runtime = try runtime()
        var retries = UploaderConfiguration()
        retries.initialRetryDelay = .milliseconds(20)
        retries.maximumRetryDelay = .milliseconds(100)
        let uploader = LogUploader(
            runtime: runtime, spool: spool, sink: try S3Sink(configuration: configuration(store), runtime: runtime),
            configuration: retries)
        uploader.start()
        let drained = Task { await uploader.drain() }
        while spool.sealedSegments.count > count * 3 / 4 { try await Task.sleep(for: .milliseconds(2)) }
        let waitingBefore = spool.sealedSegments.map(\.number).sorted()
        try await onOwnThread { store.kill() }  // mid-upload: requests in flight fail, the uploader retries
        try await Task.sleep(for: .milliseconds(300))
        // The uploads the kill may have cut off: the window's size (and the oldest, which
        // always goes) in spool order, from a segment between the oldest waiting before the
        // kill and the oldest waiting after it.
        let waitingAfter = spool.sealedSegments.map(\.number).sorted()
        let window = retries.maximumUploadsInFlight
        let cutOff = waitingBefore.filter { $0 <= (waitingAfter.dropFirst(window).first ?? .max) }
        try await onOwnThread { try store.restart() }
        var left = await drained.value
        while left > 0 { left = await uploader.drain() }
        let objects = try await onOwnThread { try store.objects() }
        // SeaweedFS has kept a second copy of a segment whose PUT the kill cut off, though its
        // retry came with If-None-Match: * (once, both cores busy): what a store keeps of a
        // write it never answered is the store's. A second copy of any other segment, or
        // other bytes under a name taken, would be the uploader's doing.
        let versions = Dictionary(grouping: objects, by: \.key)
        for (key, copies) in versions where copies.count > 1 {
            let number = UInt64(key.split(separator: "/").last?.split(separator: ".").first ?? "")
            #expect(
                number.map(cutOff.contains) == true && Set(copies.map(\.content)).count == 1,
                "no object overwritten: \(key) stored \(copies.count) times (cut off by the kill: \(cutOff))")
        }
        let oneOfEach = versions.values.map { $0[0] }
        let lines = oneOfEach.flatMap { SegmentFormat.parse($0.content).records.map(\.sequence) }.sorted()
        // On failure: which objects hold which lines (the whole list of lines says little).
        let held = oneOfEach.map { object -> String in
            let sequences = SegmentFormat.parse(object.content).records.map(\.sequence)
            return "\(object.key): \(sequences.first.map(String.init) ?? "-")…\(sequences.last.map(String.init) ?? "-")"
        }
        let everyLineOnce = lines == Array(1...3000)
        #expect(everyLineOnce, "\(lines.count) lines; objects: \(held.sorted())")
        await stop(runtime)
    }
}

/// The system's clocks with the wall clock moved by `offset`: a machine whose clock is off.
struct SkewedClock: RuntimeClock {
    let offset: Duration
    var now: MonotonicInstant { SystemClock().now }
    var wallClockNow: WallClockInstant { SystemClock().wallClockNow + offset }
}
