/// What the runtime does with a grant still open at its deadline, after reporting it.
///
/// A struct over a private enum, so that policies can be added without breaking code
/// that switches over them.
public struct TerminationPolicy: Sendable, Hashable, CustomStringConvertible {
    enum Kind: Hashable {
        case endTask
        case exitProcess(status: Int32)
    }

    let kind: Kind

    /// Force-end the grant (its end handler sees ``BackgroundTaskEndReason/terminated``);
    /// the program goes on. The default.
    public static let endTask = TerminationPolicy(kind: .endTask)

    /// Write the reports, then exit the process with `status` (what iOS does).
    public static func exitProcess(status: Int32) -> TerminationPolicy {
        TerminationPolicy(kind: .exitProcess(status: status))
    }

    /// The status the process exits with, or `nil` when the program goes on.
    public var exitStatus: Int32? {
        if case .exitProcess(let status) = kind { return status }
        return nil
    }

    /// `endTask` or `exitProcess(status: N)`.
    public var description: String {
        switch kind {
        case .endTask: "endTask"
        case .exitProcess(let status): "exitProcess(status: \(status))"
        }
    }
}
