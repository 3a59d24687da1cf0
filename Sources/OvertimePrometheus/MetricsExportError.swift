// Why metrics could not be exported: a code to match on and a sentence to print.

/// Why ``PrometheusExporter`` could not do what it was asked.
public struct MetricsExportError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure, to match on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: Hashable, Sendable {
            case invalidAddress, cannotListen, runtimeShutDown
        }
        private let value: Value

        /// The listen address is not one (not an IP address, a port out of range).
        public static let invalidAddress = Code(value: .invalidAddress)
        /// The address could not be bound or listened on (in use, not this machine's,
        /// a privileged port).
        public static let cannotListen = Code(value: .cannotListen)
        /// The runtime has shut down: nothing more can be served from its loop.
        public static let runtimeShutDown = Code(value: .runtimeShutDown)

        /// The code's name.
        public var description: String { "\(value)" }
    }

    /// What kind of failure.
    public let code: Code
    /// What went wrong, one sentence.
    public let message: String

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The message.
    public var description: String { message }
}
