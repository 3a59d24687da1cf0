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

/// What one action's page says: its record, and why the log could not keep it, if it could not.
struct ActionOutcome: Sendable {
    let record: ActionRecord
    let logFailure: String?
}

/// The actions taken, newest first: the latest ``kept`` in memory, every one in the file.
final class ActionLog: Sendable {
    static let kept = 200
    private let path: String?
    private let records = NIOLockedValueBox([ActionRecord]())

    /// Appends to `path` (made owner-only when missing), or keeps them in memory only. The
    /// file's latest ``kept`` records are read back, so that a restarted dashboard still shows
    /// who did what; a line that is not a record (a damaged or foreign line) is passed over,
    /// and the file is never rewritten.
    init(path: String?) throws(ScheduleActionError) {
        self.path = path
        if let path {
            let descriptor = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
            guard descriptor >= 0 else {
                throw ScheduleActionError("cannot open the action log \(path): \(String(cString: strerror(errno)))")
            }
            let earlier = Self.tail(of: descriptor)
            close(descriptor)
            records.withLockedValue { $0 = Array(earlier.suffix(Self.kept)) }
        }
    }

    /// The records in the last megabyte of the file open at `descriptor`, oldest first.
    private static func tail(of descriptor: Int32) -> [ActionRecord] {
        let size = lseek(descriptor, 0, SEEK_END)
        let start = max(0, size - 1 << 20)
        guard size > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: Int(size - start))
        let count = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, start) }
        guard count > 0 else { return [] }
        var lines = bytes[..<count].split(separator: UInt8(ascii: "\n"))
        if start > 0, !lines.isEmpty { lines.removeFirst() }  // cut by the megabyte's start
        let dates = ISO8601DateFormatter()
        return lines.compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any],
                let at = (object["at"] as? String).flatMap(dates.date(from:)), let user = object["user"] as? String,
                let action = object["action"] as? String, let identifier = object["identifier"] as? String,
                let succeeded = object["succeeded"] as? Bool, let answer = object["answer"] as? String
            else { return nil }
            return ActionRecord(
                at: at, user: user, action: action, identifier: identifier, succeeded: succeeded, answer: answer)
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
