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
}
