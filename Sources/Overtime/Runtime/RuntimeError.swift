import CLibUV
import OvertimeSupport

/// Errors from creating a runtime or from its async helpers.
public enum RuntimeError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A configuration field is out of range.
    case invalidConfiguration(field: String, reason: String)
    /// A libuv call failed with `code` (a negative errno).
    case libuv(call: String, code: Int32)
    /// A system call failed with `errno`.
    case system(call: String, errno: Int32)

    /// A sentence naming the field or the call.
    public var description: String {
        switch self {
        case .invalidConfiguration(let field, let reason):
            "invalid configuration: \(field) \(reason)"
        case .libuv(let call, let code):
            "\(call) failed: \(String(cString: uv_strerror(code))) (\(code))"
        case .system(let call, let code):
            "\(call) failed: \(errnoDescription(code))"
        }
    }
}
