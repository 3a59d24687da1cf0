// How every schedule inspector pages through requests, for the stores' own tests (SQLite
// here, PostgreSQL in its package): each makes the schedule, these read it.

import Overtime
@_spi(ScheduleStore) import OvertimeScheduler

/// Reads of a ``ScheduleInspector``'s pages of requests that any store's inspector answers
/// alike, on a schedule the store's tests made.
@_spi(ScheduleStore) public enum ScheduleInspectorPaging {
    /// The identifiers on every page of `query`, page after page from its first, each read
    /// from where the one before said the next goes on (at most 100 pages).
    public static func everyPage(
        _ inspector: some ScheduleInspector, _ query: RequestQuery, now: WallClockInstant
    ) async throws -> [String] {
        var query = query
        var found: [String] = []
        var reads = 0
        repeat {
            let page = try await inspector.requests(query, now: now)
            found += page.requests.map(\.request.identifier)
            query.after = page.next
            query.afterKey = page.nextKey
            reads += 1
        } while query.after != nil && reads < 100
        return found
    }

    /// Checks that a search read a stretch at a time lists what one read whole does, for
    /// each of `texts` (which some requests hold) in every order; and that text no request
    /// holds, and a tag none has, give a first page with nothing on it and a position to go
    /// on from (only a stretch was read), and pages after it with nothing either.
    ///
    /// - Parameters:
    ///   - whole: an inspector of the schedule whose stretch holds every request.
    ///   - stretched: an inspector of the same schedule whose stretch holds fewer than
    ///     it has (a few).
    /// - Throws: ``ScheduleStoreConformance/Failure`` for the first that does not hold.
    public static func searchesReadAStretchAtATime(
        whole: some ScheduleInspector, stretched: some ScheduleInspector, texts: [String], now: WallClockInstant
    ) async throws {
        for text in texts {
            for order in [RequestQuery.Order.submitted, .nextRun, .attempts, .lastRun] {
                var query = RequestQuery(selection: .all, limit: 4)
                query.search = text
                query.order = order
                query.newestFirst = order == .submitted || order == .attempts
                let expected = try await everyPage(whole, query, now: now)
                let found = try await everyPage(stretched, query, now: now)
                guard !expected.isEmpty, found == expected else {
                    throw ScheduleStoreConformance.Failure(
                        description: "\(text) by \(order): read whole \(expected), a stretch at a time \(found)")
                }
            }
        }
        var byText = RequestQuery(selection: .all, limit: 4)
        byText.search = "nowhere"
        var byTag = RequestQuery(selection: .all, limit: 4)
        byTag.tag = "nowhere"
        for nowhere in [byText, byTag] {
            let first = try await stretched.requests(nowhere, now: now)
            guard first.requests.isEmpty, first.next != nil else {
                throw ScheduleStoreConformance.Failure(
                    description:
                        "\(nowhere): a first page of \(first.requests.count), next \(String(describing: first.next))"
                        + " (expected none, and a position after a stretch)")
            }
            let found = try await everyPage(stretched, nowhere, now: now)
            guard found.isEmpty else {
                throw ScheduleStoreConformance.Failure(description: "\(nowhere): found \(found)")
            }
        }
    }

    /// Checks that `inspector` counts the attempts each filter selects as many as the history
    /// lists: every attempt, each result, each identifier's first half and all of it but its
    /// last character as prefixes, one request's, and ranges of start times around the history's middle
    /// and before it; each counted with room to spare, and up to a bound below its number
    /// (the bound answered). A search is not counted (`nil`).
    ///
    /// - Parameter inspector: an inspector of a schedule whose history holds 2 to 999 attempts.
    /// - Throws: ``ScheduleStoreConformance/Failure`` for the first that does not hold.
    public static func historyCountsAreTheListed(_ inspector: some ScheduleInspector) async throws {
        let everything = try await inspector.history(HistoryQuery(limit: 1000))
        guard everything.count >= 2, everything.count < 1000 else {
            throw ScheduleStoreConformance.Failure(description: "a history of \(everything.count) attempts")
        }
        let starts = everything.map(\.startedAt).sorted()
        let middle = starts[starts.count / 2]
        var queries = [HistoryQuery()]
        queries += [RunResult.succeeded, .failed, .expired, .stopped, .terminated, .interrupted, .superseded].map {
            HistoryQuery(result: $0)
        }
        let prefixes = Set(
            everything.flatMap {
                [String($0.identifier.prefix($0.identifier.count / 2)), String($0.identifier.dropLast())]
            })
        queries += prefixes.sorted().map { HistoryQuery(identifierPrefix: $0) }
        var one = HistoryQuery()
        one.identifier = everything[everything.count / 2].identifier
        queries += [
            one, HistoryQuery(startedFrom: middle), HistoryQuery(startedBefore: middle),
            HistoryQuery(startedFrom: starts[0], startedBefore: middle),
            HistoryQuery(startedFrom: starts[0] - .seconds(86_400), startedBefore: starts[0]),
            HistoryQuery(identifierPrefix: String(everything[0].identifier.prefix(2)), result: everything[0].result),
        ]
        for query in queries {
            let listed = everything.filter { record in
                (query.identifier.map { record.identifier == $0 } ?? true)
                    && record.identifier.hasPrefix(query.identifierPrefix ?? "")
                    && (query.result.map { record.result == $0 } ?? true)
                    && (query.startedFrom.map { record.startedAt >= $0 } ?? true)
                    && (query.startedBefore.map { record.startedAt < $0 } ?? true)
            }.count
            // Where a page starts and its limit are no part of the count.
            var paged = query
            paged.before = HistoryPosition(everything[0])
            paged.limit = 1
            for (asked, limit, expected) in [
                (query, 1000, listed), (paged, 1000, listed), (query, max(0, listed - 1), max(0, listed - 1)),
            ] {
                let counted = try await inspector.count(asked, upTo: limit)
                guard counted == expected else {
                    throw ScheduleStoreConformance.Failure(
                        description: "\(asked) up to \(limit): counted \(String(describing: counted)), listed \(listed)"
                    )
                }
            }
        }
        var searched = HistoryQuery()
        searched.search = String(everything[0].identifier.prefix(2))
        if let counted = try await inspector.count(searched, upTo: 1000) {
            throw ScheduleStoreConformance.Failure(description: "a search counted \(counted) (expected none)")
        }
    }
}
