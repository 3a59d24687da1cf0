import Dispatch
import Overtime

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Stores segments as files under a folder: `<root>/<stream-id>/<number>.log`. The
/// embedded default: no server needed.
///
/// Each store writes a temporary file, fsyncs it, renames it into place and fsyncs the
/// folder, so a stored segment is complete or absent, and storing it again replaces it
/// with the same bytes. File I/O runs on a queue of its own, never on the loop thread.
public struct DirectorySink: LogSink {
    /// The folder segments are stored under.
    public let root: String
    private let queue = DispatchQueue(label: "overtime.directory-sink")

    /// Stores under `root` (created if missing).
    public init(root: String) {
        self.root = root
    }

    /// `directory:<root>`.
    public var description: String { "directory:\(root)" }

    /// Copies the segment into place; checks for cancellation before the rename.
    public func store(_ segment: SealedSegment) async throws(SinkError) {
        let root = self.root
        let cancelled = Locked(false)
        let outcome: Result<Void, SinkError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                queue.async {
                    let isCancelled = { cancelled.withLock { $0 } }
                    continuation.resume(
                        returning: isCancelled() ? .failure(.cancelled) : Self.copy(segment, into: root, isCancelled))
                }
            }
        } onCancel: {
            cancelled.withLock { $0 = true }
        }
        try outcome.get()
    }

    private static func copy(
        _ segment: SealedSegment, into root: String, _ isCancelled: () -> Bool
    ) -> Result<Void, SinkError> {
        let folder = root + "/" + segment.stream.description
        for path in [root, folder] where mkdir(path, 0o755) != 0 && errno != EEXIST {
            return .failure(.retryable("mkdir \(path): \(errnoDescription())", retryAfter: nil))
        }
        let target = root + "/" + segment.name
        let temporary = target + ".partial"
        let source = open(segment.path, O_RDONLY | O_CLOEXEC)
        guard source >= 0 else {
            return .failure(.permanent("cannot read \(segment.path): \(errnoDescription())"))
        }
        defer { close(source) }
        let destination = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard destination >= 0 else {
            return .failure(.retryable("cannot create \(temporary): \(errnoDescription())", retryAfter: nil))
        }
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var failure: String?
        while failure == nil {
            let count = read(source, &buffer, buffer.count)
            if count == 0 { break }
            if count < 0 {
                failure = "read \(segment.path): \(errnoDescription())"
                break
            }
            var offset = 0
            while offset < count {
                let written = buffer.withUnsafeBytes { write(destination, $0.baseAddress! + offset, count - offset) }
                if written < 0 {
                    failure = "write \(temporary): \(errnoDescription())"
                    break
                }
                offset += written
            }
        }
        if failure == nil, fsync(destination) != 0 { failure = "fsync \(temporary): \(errnoDescription())" }
        close(destination)
        if let failure {
            unlink(temporary)
            return .failure(.retryable(failure, retryAfter: nil))
        }
        if isCancelled() {
            unlink(temporary)
            return .failure(.cancelled)
        }
        guard rename(temporary, target) == 0 else {
            unlink(temporary)
            return .failure(.retryable("rename to \(target): \(errnoDescription())", retryAfter: nil))
        }
        let directory = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directory >= 0 {
            fsync(directory)
            close(directory)
        }
        return .success(())
    }
}
