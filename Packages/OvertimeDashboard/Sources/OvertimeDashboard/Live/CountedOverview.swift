// The overview, counted once for every viewer until the schedule changes. Its counts pass
// over every request (a large schedule's take a third of a second), and every open overview
// page reads itself again at each change: counted per load, ten viewers cost ten passes and
// a client loading it in a loop holds the store. The schedule's change mark (read before the
// count, so a change made while counting makes the next load count again) and the hour's
// first minute say when the counts are still exact; loads that come while they are counted
// wait for that same count.

import NIOConcurrencyHelpers
import Overtime
@_spi(ScheduleStore) import OvertimeScheduler

/// The schedule's overview, counted at most once per change of the schedule (and per minute
/// of the hour its chart covers), however many pages load it.
final class CountedOverview: Sendable {
    /// What makes two counts the same: no change in between, the same minute (the chart's
    /// hour ends in it).
    private struct Key: Hashable {
        let mark: Int64
        let firstMinute: Int64
    }

    private struct State {
        var latest: (key: Key, overview: ScheduleOverview)?
        var counting: (key: Key, task: Task<ScheduleOverview, any Error>)?
        /// How many times the store was asked to count, for tests.
        var counts = 0
    }

    private enum Found {
        case counted(ScheduleOverview)
        case counting(Task<ScheduleOverview, any Error>)
    }

    private let inspector: any ScheduleInspector
    private let state = NIOLockedValueBox(State())

    init(inspector: any ScheduleInspector) {
        self.inspector = inspector
    }

    /// How many times the store counted the overview so far.
    var timesCounted: Int { state.withLockedValue { $0.counts } }

    /// The overview at `now`: the last count if the schedule has not changed since it began
    /// and `now` is in the same minute's hour, else a new count (shared with the loads that
    /// ask meanwhile). A count that fails is not kept; the next load counts again.
    func overview(now: WallClockInstant) async throws -> ScheduleOverview {
        let key = Key(
            mark: try await inspector.changeMark(), firstMinute: ScheduleOverview.firstMinute(before: now))
        let found = state.withLockedValue { state -> Found in
            if let latest = state.latest, latest.key == key { return .counted(latest.overview) }
            if let counting = state.counting, counting.key == key { return .counting(counting.task) }
            // Not the caller's task: a page that closes does not cancel the others' count.
            let task = Task { [inspector] () async throws -> ScheduleOverview in
                try await inspector.overview(now: now)
            }
            state.counting = (key, task)
            state.counts += 1
            return .counting(task)
        }
        let task: Task<ScheduleOverview, any Error>
        switch found {
        case .counted(let overview): return overview
        case .counting(let counting): task = counting
        }
        do {
            let overview = try await task.value
            state.withLockedValue { state in
                if state.counting?.key == key { state.counting = nil }
                state.latest = (key, overview)
            }
            return overview
        } catch {
            state.withLockedValue { state in
                if state.counting?.key == key { state.counting = nil }
            }
            throw error
        }
    }
}
