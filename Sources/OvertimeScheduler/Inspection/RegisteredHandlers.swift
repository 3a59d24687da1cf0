// The handlers a program runs requests with, as it records them in its schedule when it
// starts: what an inspector needs to tell a request no program can run ("no handler") from
// one waiting for its turn. A fleet keeps a record per instance.

import Overtime

/// The handlers one program (a daemon, or an instance of a fleet) registered before it
/// started, as its store records them.
@_spi(ScheduleStore) public struct RegisteredHandlers: Sendable, Hashable {
    /// The instance the record is of: `""` for the one daemon that owns a store.
    public let instance: String
    /// Identifiers registered on their own.
    public let identifiers: [String]
    /// Prefixes registered (``Scheduler/register(prefix:handler:)``).
    public let prefixes: [String]
    /// When the program recorded them (as it started).
    public let recordedAt: WallClockInstant

    /// A record of `instance`'s handlers.
    public init(instance: String, identifiers: [String], prefixes: [String], recordedAt: WallClockInstant) {
        self.instance = instance
        self.identifiers = identifiers
        self.prefixes = prefixes
        self.recordedAt = recordedAt
    }

    /// Whether the program has a handler for `identifier`.
    public func serves(_ identifier: String) -> Bool {
        identifiers.contains(identifier) || prefixes.contains { identifier.hasPrefix($0) }
    }

    /// The lines a store keeps a list of names in (no name holds a control character).
    public static func joined(_ names: [String]) -> String { names.joined(separator: "\n") }

    /// The names of a list kept by ``joined(_:)``.
    public static func split(_ text: String) -> [String] {
        text.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
    }
}
