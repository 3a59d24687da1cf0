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
    public var description: String {
        if rawValue == 0 { return "#invalid" }
        if isQueued { return "#r\(rawValue & ~Self.queuedBit)" }
        return "#\(localSlot).\(localGeneration)"
    }

    /// Parses the printed form (`#r12`, `#3.1`) or a raw value (`9223372036854775820`);
    /// `nil` for anything else.
    public init?(parsing text: String) {
        if let raw = UInt64(text) {
            self.init(rawValue: raw)
            return
        }
        guard text.hasPrefix("#") else { return nil }
        let body = text.dropFirst()
        if body.hasPrefix("r"), let number = UInt64(body.dropFirst()), number < Self.queuedBit {
            self = .queued(number)
        } else if let dot = body.firstIndex(of: "."), let slot = UInt32(body[..<dot]),
            let generation = UInt32(body[body.index(after: dot)...]), generation < 1 << 31
        {
            self = .local(slot: Int32(bitPattern: slot), generation: generation)
        } else {
            return nil
        }
    }

    // Layout. A grant begun on the loop thread encodes its table slot and the slot's
    // generation, so the loop finds it without a hash lookup. A grant begun on another
    // thread gets a number from a shared counter (its slot is not known yet) with the top
    // bit set; the loop maps those through a dictionary.
    static let queuedBit: UInt64 = 1 << 63

    static func local(slot: Int32, generation: UInt32) -> BackgroundTaskID {
        BackgroundTaskID(rawValue: UInt64(generation) << 32 | UInt64(UInt32(bitPattern: slot)))
    }

    static func queued(_ number: UInt64) -> BackgroundTaskID {
        BackgroundTaskID(rawValue: queuedBit | number)
    }

    var isQueued: Bool { rawValue & Self.queuedBit != 0 }
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
