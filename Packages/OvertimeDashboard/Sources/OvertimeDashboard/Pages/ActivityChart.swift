// The overview's chart of the last hour's attempts, drawn on the server: the page's
// Content-Security-Policy lets no script draw, so the bars are SVG elements whose places
// are worked out here (pure, from the minutes the inspector counted).

import OvertimeScheduler

/// Bars of the attempts that ended, by the minute they started, with the failed ones over
/// them in another colour.
struct ActivityChart {
    /// One minute's bars.
    struct Bar {
        let x: Int
        let width: Int
        let endedY: Int
        let endedHeight: Int
        let failedY: Int
        let failedHeight: Int
        /// What the minute held, said when the bar is pointed at.
        let title: String
    }

    let bars: [Bar]
    /// The drawing's size in its own units.
    let width: Int
    let height: Int
    /// Where the bars stand. The time labels are the page's text below the drawing, not
    /// in it: drawn, they shrink with it (to 6 px on a phone).
    let plotHeight: Int
    /// The attempts a minute the chart's top stands for: a round number at or above the
    /// busiest minute's.
    let top: Int
    let ended: Int
    let failed: Int
    /// The chart in words, for those who do not see it.
    let summary: String

    static let slot = 10
    static let plot = 100

    init(_ minutes: [MinuteActivity]) {
        width = minutes.count * Self.slot
        plotHeight = Self.plot
        height = Self.plot + 1
        top = Self.roundUp(minutes.map(\.ended).max() ?? 0)
        ended = minutes.map(\.ended).reduce(0, +)
        failed = minutes.map(\.failed).reduce(0, +)
        bars = minutes.enumerated().map { [top] index, minute in
            let endedHeight = Self.height(of: minute.ended, top: top)
            let failedHeight = Self.height(of: minute.failed, top: top)
            return Bar(
                x: index * Self.slot + 1, width: Self.slot - 2, endedY: Self.plot - endedHeight,
                endedHeight: endedHeight,
                failedY: Self.plot - failedHeight, failedHeight: failedHeight,
                title: "\(Formatting.time(minute.start)): \(minute.ended) ended, \(minute.failed) failed")
        }
        summary =
            "Attempts by the minute they started, over the last \(minutes.count) minutes: \(ended) ended, "
            + "\(failed) failed; the busiest minute had \(minutes.map(\.ended).max() ?? 0)."
    }

    /// A count's bar height: in proportion to the top, and at least 1 for any count above 0
    /// (a minute with one failure among thousands of runs still shows).
    static func height(of count: Int, top: Int) -> Int {
        guard count > 0, top > 0 else { return 0 }
        return max(1, min(plot, (count * plot + top / 2) / top))
    }

    /// The smallest of 1, 2 or 5 times a power of ten at or above `count` (at least 1).
    static func roundUp(_ count: Int) -> Int {
        guard count < 1_000_000_000_000 else { return count }
        var power = 1
        while true {
            for step in [1, 2, 5] where step * power >= count { return step * power }
            power *= 10
        }
    }
}
