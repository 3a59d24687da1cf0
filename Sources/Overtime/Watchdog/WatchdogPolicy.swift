/// What the watchdog does when one callback holds the loop past the timeout.
///
/// A struct over a private enum, so that policies can be added without breaking code
/// that switches over them.
public struct WatchdogPolicy: Sendable, Hashable, CustomStringConvertible {
    enum Kind: Hashable {
        case exitProcess(status: Int32)
        case reportOnly
    }

    let kind: Kind

    /// Report, then exit the process with `status`. The default, with
    /// ``WatchdogPolicy/defaultExitStatus``.
    public static func exitProcess(status: Int32) -> WatchdogPolicy {
        WatchdogPolicy(kind: .exitProcess(status: status))
    }

    /// Report only; the program goes on.
    public static let reportOnly = WatchdogPolicy(kind: .reportOnly)

    /// The status the default policy exits with: 70 (`EX_SOFTWARE`).
    public static let defaultExitStatus: Int32 = 70

    /// The status the process exits with, or `nil` when the program goes on.
    public var exitStatus: Int32? {
        if case .exitProcess(let status) = kind { return status }
        return nil
    }

    /// `reportOnly` or `exitProcess(status: N)`.
    public var description: String {
        switch kind {
        case .reportOnly: "reportOnly"
        case .exitProcess(let status): "exitProcess(status: \(status))"
        }
    }
}
