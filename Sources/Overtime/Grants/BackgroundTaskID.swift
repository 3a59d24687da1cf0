import OvertimeControlProtocol

/// Identifies one background-task grant.
///
/// Returned by ``Runtime/beginBackgroundTask(name:maximumDuration:fileID:line:expirationHandler:endHandler:)``
/// at once, from any thread. ``invalid`` means the grant was refused.
public struct BackgroundTaskID: Hashable, Sendable, CustomStringConvertible {
    /// The raw value. `0` is ``invalid``.
    public let rawValue: UInt64

    /// Wraps a raw value.
    public init(rawValue: UInt64) {
        self.rawValue = rawValue
    }

    /// The ID of a refused grant. Ending it only logs a warning.
    public static let invalid = BackgroundTaskID(rawValue: 0)

    /// Whether this is ``invalid``.
    public var isInvalid: Bool { rawValue == 0 }

    /// `#<n>`: IDs begun on the loop thread read `#<slot>.<generation>`, IDs begun on
    /// other threads `#r<n>`.
    public var description: String { TaskIDText.text(rawValue: rawValue) }

    /// Parses the printed form (`#r12`, `#3.1`) or a raw value (`9223372036854775820`);
    /// `nil` for anything else.
    public init?(parsing text: String) {
        guard let raw = TaskIDText.rawValue(parsing: text) else { return nil }
        self.init(rawValue: raw)
    }

    // The layout is the control protocol's (see `TaskIDText`).
    static func local(slot: Int32, generation: UInt32) -> BackgroundTaskID {
        BackgroundTaskID(rawValue: UInt64(generation) << 32 | UInt64(UInt32(bitPattern: slot)))
    }

    static func queued(_ number: UInt64) -> BackgroundTaskID {
        BackgroundTaskID(rawValue: TaskIDText.queuedBit | number)
    }

    /// The top bit (`TaskIDText.queuedBit`), tested as a sign: every end of a grant asks,
    /// and reading another module's constant is a call per read.
    var isQueued: Bool { Int64(bitPattern: rawValue) < 0 }
    var localSlot: Int32 { Int32(bitPattern: UInt32(truncatingIfNeeded: rawValue)) }
    var localGeneration: UInt32 { UInt32(truncatingIfNeeded: rawValue >> 32) }
}

/// Where in the program's source something was called: `#fileID:#line`.
public struct CallSite: Sendable, Hashable, CustomStringConvertible {
    /// The file, as `#fileID` gives it (`Module/File.swift`).
    public let fileID: StaticString
    /// The line.
    public let line: UInt32

    /// Creates a call site.
    public init(fileID: StaticString, line: UInt) {
        self.fileID = fileID
        self.line = UInt32(clamping: line)
    }

    /// `Module/File.swift:88`.
    public var description: String { "\(fileID):\(line)" }

    /// Equal when file and line are.
    public static func == (lhs: CallSite, rhs: CallSite) -> Bool {
        lhs.line == rhs.line && lhs.fileID.description == rhs.fileID.description
    }

    /// Hashes file and line.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(fileID.description)
        hasher.combine(line)
    }
}
