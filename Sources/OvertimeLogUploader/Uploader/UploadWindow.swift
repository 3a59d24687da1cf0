// Which segments a drain uploads at once, and which outcome it decides on next: the
// bookkeeping of the uploads in flight, without I/O, so that its rules are tested as
// transcripts.

/// How one upload ended: stored (and how long it took), or the sink's error.
enum UploadOutcome: Sendable, Equatable {
    case stored(took: Duration)
    case failed(SinkError)
}

/// The uploads of one drain that are not decided on yet.
///
/// The checkpoint is a high-water mark, so segments are decided on in spool order: only
/// the oldest waiting segment's outcome is acted on. A younger segment that was stored
/// keeps its outcome until its turn; one that failed is sent again only in its turn, so
/// that the oldest's backoff paces every retry. The window counts every undecided upload,
/// in flight or not, so that no more than its size are sent again after a crash; the
/// oldest always goes, as it is the one decided on.
struct UploadWindow {
    /// What an ended upload means for the drain.
    enum Ended: Equatable {
        /// The oldest's outcome: decide on it now.
        case decide(UploadOutcome)
        /// A younger one stored: kept until its turn.
        case kept
        /// A younger one that failed (the error, unless cancelled): sent again in its turn.
        case later(SinkError?)
    }

    /// Most uploads undecided at once (at least 1).
    let size: Int
    private(set) var inFlight: Set<String> = []
    private var stored: [String: Duration] = [:]
    private var failed: Set<String> = []

    init(size: Int) {
        self.size = max(1, size)
    }

    /// Forgets segments no longer waiting (the quota dropped them) and makes `oldest` due
    /// whatever its earlier failures: it is the one decided on next.
    mutating func align(waitingPaths: Set<String>, oldest: String) {
        stored = stored.filter { waitingPaths.contains($0.key) }
        failed.formIntersection(waitingPaths)
        failed.remove(oldest)
    }

    /// What may start now of `waiting` (oldest first, `path` naming each), in that order:
    /// the oldest unless it is started, then younger ones not started nor failed while
    /// the window has room.
    func toStart<Segment>(_ waiting: [Segment], path: (Segment) -> String) -> [Segment] {
        var room = size - inFlight.count - stored.count - failed.count
        var result: [Segment] = []
        for (position, segment) in waiting.enumerated() {
            let name = path(segment)
            guard !inFlight.contains(name), stored[name] == nil, !failed.contains(name) else { continue }
            guard position == 0 || room > 0 else { break }
            room -= 1  // the oldest takes a place too, though it goes without one
            result.append(segment)
        }
        return result
    }

    /// `path`'s upload has started.
    mutating func started(_ path: String) {
        inFlight.insert(path)
    }

    /// The stored outcome of `oldest`, taken, if its upload already ended that way.
    mutating func takeStored(_ oldest: String) -> UploadOutcome? {
        stored.removeValue(forKey: oldest).map { .stored(took: $0) }
    }

    /// `path`'s upload ended with `outcome`, while `oldest` is the one decided on next.
    mutating func ended(_ path: String, _ outcome: UploadOutcome, oldest: String) -> Ended {
        inFlight.remove(path)
        if path == oldest { return .decide(outcome) }
        switch outcome {
        case .stored(let took):
            stored[path] = took
            return .kept
        case .failed(let error):
            failed.insert(path)
            return .later(error.code == .cancelled ? nil : error)
        }
    }
}
