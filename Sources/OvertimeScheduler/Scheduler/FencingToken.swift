// Which holder of a run may still act for it: a token that grows with every attempt.

/// A run's attempt as a token for effects that must happen once (a fleet's "fencing
/// token"): every attempt of every run of an identifier has a greater token than the
/// attempts before it — a retry, a run a crash interrupted, a run another instance took
/// over after this one's claim lapsed. A store of effects that keeps the greatest token it
/// accepted per identifier, and refuses writes with a smaller one, refuses a holder that
/// was paused past its claim and resumed.
public struct FencingToken: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The run's ID (the same for every attempt of the run; later runs have greater IDs).
    public let runID: Int64
    /// The attempt within the run (1 first; a takeover or a retry is the next).
    public let attempt: Int

    /// The token of attempt `attempt` of run `runID`.
    public init(runID: Int64, attempt: Int) {
        self.runID = runID
        self.attempt = attempt
    }

    /// Ordered by run, then attempt.
    public static func < (lhs: FencingToken, rhs: FencingToken) -> Bool {
        (lhs.runID, lhs.attempt) < (rhs.runID, rhs.attempt)
    }

    /// `run 42 attempt 2`.
    public var description: String { "run \(runID) attempt \(attempt)" }
}
