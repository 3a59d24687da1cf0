import Overtime
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Stores segments as files under a folder: `<root>/<stream-id>/<number>.log`. The
/// embedded default: no server needed.
///
/// Each store writes a temporary file of a name no one else uses, fsyncs it, links it into
/// place only if the name is free (`link` fails rather than replace), and fsyncs the
/// folder: a stored segment is complete or absent, and **never overwritten**. When the
/// name is taken, the stored file is compared: the same bytes count as stored (a retry
/// after a crash), different bytes are refused for good (``SinkError/permanent(_:)``).
/// File I/O runs on a queue of its own, never on the loop thread.
public struct DirectorySink: LogSink, NonBlockingLogSink {
    /// The folder segments are stored under.
    public let root: String
    private let queue = SerialWorkQueue(name: "overtime-dir")

    /// Stores under `root` (created if missing).
    public init(root: String) {
        self.root = root
    }

    /// `directory:<root>`.
    public var description: String { "directory:\(root)" }

    /// Copies the segment into place; checks for cancellation before the rename.
    public func store(_ segment: SealedSegment) async throws(SinkError) {
        let root = self.root
        try await runBlockingSinkWork(on: queue) { isCancelled in Self.copy(segment, into: root, isCancelled) }
    }

    private static func copy(
        _ segment: SealedSegment, into root: String, _ isCancelled: () -> Bool
    ) -> Result<Void, SinkError> {
        let folder = root + "/" + segment.stream.description
        for path in [root, folder] where mkdir(path, 0o755) != 0 && errno != EEXIST {
            return .failure(.retryable("mkdir \(path): \(errnoDescription())", retryAfter: nil))
        }
        let target = root + "/" + segment.name
        var random = SystemRandomNumberGenerator()
        let temporary = target + ".partial-\(getpid())-\(String(random.next() as UInt64, radix: 16))"
        let content: [UInt8]
        do throws(SinkError) {
            content = try segment.readBytes()
        } catch {
            return .failure(error)
        }
        // O_EXCL: the temporary name is ours alone, never a file someone else made.
        let destination = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard destination >= 0 else {
            return .failure(.retryable("cannot create \(temporary): \(errnoDescription())", retryAfter: nil))
        }
        defer { unlink(temporary) }  // after the link the stored name stays; before it nothing should
        var failure: String?
        let written = writeAll(destination, content, to: .file)
        if written != 0 { failure = "write \(temporary): \(errnoDescription(written))" }
        if failure == nil, fsync(destination) != 0 { failure = "fsync \(temporary): \(errnoDescription())" }
        close(destination)
        if let failure { return .failure(.retryable(failure, retryAfter: nil)) }
        if isCancelled() { return .failure(.cancelled) }
        guard link(temporary, target) == 0 else {
            guard errno == EEXIST else {
                return .failure(.retryable("link to \(target): \(errnoDescription())", retryAfter: nil))
            }
            return compare(segment, storedAt: target)
        }
        let directory = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directory >= 0 {
            fsync(directory)
            close(directory)
        }
        return .success(())
    }

    /// The name is taken: stored if it holds the same bytes, refused for good if not.
    private static func compare(_ segment: SealedSegment, storedAt target: String) -> Result<Void, SinkError> {
        do {
            let stored = try SpoolFiles.disk.readAll(target)
            let local = try segment.readBytes()
            if stored == local { return .success(()) }
            return .failure(
                .permanent("a different file (\(stored.count) bytes) is already stored as \(target); not overwritten"))
        } catch {
            return .failure(.retryable("cannot compare with \(target): \(error)", retryAfter: nil))
        }
    }
}
