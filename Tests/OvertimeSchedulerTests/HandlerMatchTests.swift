import Overtime
import Testing

@_spi(ScheduleStore) @testable import OvertimeScheduler

@Suite("Which handler serves a request")
struct HandlerMatchTests {
    /// Two programs' handlers: identifiers on their own, and prefixes that overlap.
    private let match = HandlerMatch([
        RegisteredHandlers(
            instance: "a", identifiers: ["a.b.1", "c"], prefixes: ["a.b.", "x."],
            recordedAt: WallClockInstant(nanosecondsSinceEpoch: 0)),
        RegisteredHandlers(
            instance: "b", identifiers: ["x.1"], prefixes: ["a.", "a.b.", "é."],
            recordedAt: WallClockInstant(nanosecondsSinceEpoch: 0)),
    ])

    @Test func eachPrefixsShareLeavesOutItsOwnIdentifiersAndTheEarlierPrefixesOverlappingIt() {
        #expect(match.prefixes == ["a.b.", "x.", "a.", "é."])
        #expect(match.share(ofPrefixAt: 0) == (["a.b.1"], []))
        #expect(match.share(ofPrefixAt: 1) == (["x.1"], []))
        #expect(match.share(ofPrefixAt: 2) == (["a.b.1"], ["a.b."]))
        #expect(match.share(ofPrefixAt: 3) == ([], []))
    }

    /// A store counts a prefix's requests by its share: each identifier lies in the share
    /// of the one prefix that serves it, and in none when an identifier handler or no
    /// handler does.
    @Test func anIdentifierIsInTheShareOfThePrefixThatServesItAndNoOther() {
        for identifier in ["a.b.1", "a.b.2", "a.c", "a.", "c", "c.1", "x.1", "x.2", "é.1", "e.1", ""] {
            let shares = match.prefixes.indices.filter { index in
                let prefix = match.prefixes[index]
                let (registered, overlapping) = match.share(ofPrefixAt: index)
                return identifier.utf8.starts(with: prefix.utf8) && !registered.contains(identifier)
                    && !overlapping.contains { identifier.utf8.starts(with: $0.utf8) }
            }.map { match.prefixes[$0] }
            let served = match.handler(of: identifier)
            #expect(shares == (served.isPrefix ? [served.name ?? ""] : []), "\(identifier)")
        }
    }
}
