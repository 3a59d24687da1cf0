import Overtime

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// What went wrong in the spool. Nothing acknowledged before the error is lost.
public enum SpoolError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A configuration field is out of range.
    case invalidConfiguration(field: String, reason: String)
    /// A system call failed (`errno` 28 ENOSPC and 27 EFBIG mean the disk or file limit is full).
    case io(operation: String, path: String, errno: Int32)
    /// A line is longer than a segment holds (1 MiB).
    case lineTooLong(bytes: Int)
    /// The quota is full and the policy is to block, for longer than its timeout.
    case quotaExceeded(quotaBytes: Int, neededBytes: Int)
    /// A file in the spool is not what it should be.
    case corrupt(path: String, reason: String)
    /// Another process has the spool open (its PID, when it could be read).
    case locked(path: String, holder: Int32?)
    /// A socket cannot be used: its path is another file or a socket another process
    /// answers on, or no suitable socket was passed under its name (`fd://NAME`).
    case socketUnavailable(path: String, reason: String)

    /// A sentence naming the operation, the path and the cause.
    public var description: String {
        switch self {
        case .invalidConfiguration(let field, let reason): "invalid spool configuration: \(field) \(reason)"
        case .io(let operation, let path, let code):
            "\(operation) \(path): \(String(cString: strerror(code))) (errno \(code))"
        case .lineTooLong(let bytes): "line of \(bytes) bytes is longer than \(SegmentFormat.maximumLineBytes)"
        case .quotaExceeded(let quota, let needed): "spool quota of \(quota) bytes is full (\(needed) more needed)"
        case .corrupt(let path, let reason): "corrupt spool file \(path): \(reason)"
        case .locked(let path, let holder):
            "spool \(path) is in use by another process" + (holder.map { " (PID \($0))" } ?? "")
        case .socketUnavailable(let path, let reason): "cannot listen on \(path): \(reason)"
        }
    }

    /// Whether the disk (or the process's file size limit) is full.
    public var isDiskFull: Bool {
        if case .io(_, _, let code) = self { return code == ENOSPC || code == EFBIG || code == EDQUOT }
        return false
    }
}

extension SpoolError {
    /// Why a socket at `path` (a path, or `fd://NAME`) could not be made or taken.
    init(_ failure: ListeningSocket.Failure, path: String) {
        switch failure {
        case .unavailable(let refusal): self = .socketUnavailable(path: path, reason: refusal)
        case .system(let operation, let code): self = .io(operation: operation, path: path, errno: code)
        }
    }
}
