// Who did what from the dashboard: every action, done or refused, with the user's name —
// appended to a file (one JSON object per line, synced) and kept for the actions page.

import Foundation
import NIOConcurrencyHelpers

/// One action taken from the dashboard.
struct ActionRecord: Sendable {
    let at: Date
    let user: String
    let action: String
    let identifier: String
    let succeeded: Bool
    let answer: String
}

/// The actions taken, newest first: the latest ``kept`` in memory, every one in the file.
final class ActionLog: Sendable {
    static let kept = 200
    private let path: String?
    private let records = NIOLockedValueBox([ActionRecord]())

    /// Appends to `path` (made owner-only when missing), or keeps them in memory only.
    init(path: String?) throws(ScheduleActionError) {
        self.path = path
        if let path {
            let descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
            guard descriptor >= 0 else {
                throw ScheduleActionError("cannot open the action log \(path): \(String(cString: strerror(errno)))")
            }
            close(descriptor)
        }
    }

    var newestFirst: [ActionRecord] { records.withLockedValue { Array($0.reversed()) } }

    /// Records `record`: in the file first (a record that cannot be written is said in the
    /// answer), then in memory.
    func record(_ record: ActionRecord) -> String? {
        var failure: String?
        if let path {
            let object: [String: Any] = [
                "at": ISO8601DateFormatter().string(from: record.at), "user": record.user, "action": record.action,
                "identifier": record.identifier, "succeeded": record.succeeded, "answer": record.answer,
            ]
            if var line = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) {
                line.append(UInt8(ascii: "\n"))
                let descriptor = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW)
                if descriptor >= 0 {
                    let written = line.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
                    if written != line.count || fsync(descriptor) != 0 {
                        failure = "the action log \(path) could not be written: \(String(cString: strerror(errno)))"
                    }
                    close(descriptor)
                } else {
                    failure = "the action log \(path) could not be opened: \(String(cString: strerror(errno)))"
                }
            }
        }
        records.withLockedValue {
            $0.append(record)
            if $0.count > Self.kept { $0.removeFirst($0.count - Self.kept) }
        }
        return failure
    }
}
