// Rows of the PostgreSQL store read by column name: one codec for a request and for an
// attempt, whichever query selected them and whatever it selected beside.

import NIOCore
import Overtime
@_spi(ScheduleStore) import OvertimeScheduler
import PostgresNIO

/// A row's cells by column name. A name the query did not select is an error that names
/// it, not a trap (postgres-nio's subscript by name traps).
struct NamedCells {
    let cells: PostgresRandomAccessRow

    init(_ row: PostgresRow) { cells = row.makeRandomAccess() }

    /// The cell of column `name`, decoded as `type`.
    func callAsFunction<T: PostgresDecodable>(_ name: String, as type: T.Type = T.self) throws -> T {
        guard cells.contains(name) else { throw MissingColumn(name: name) }
        return try cells[name].decode(T.self)
    }

    /// A column a query was to select and did not: a mistake in this package.
    struct MissingColumn: Error, CustomStringConvertible {
        let name: String
        var description: String { "the query selected no column '\(name)'" }
    }
}

extension PostgresScheduleStore {
    /// The columns a request is read from (by name, in any order, among others).
    static let columns = """
        identifier, earliest_begin, interval_ns, flex_ns, catch_up, catch_up_maximum, randomized_delay_ns,
        maximum_duration_ns, backoff, initial_delay_ns, maximum_delay_ns, maximum_attempts, requirements, anchor, owed,
        retry_at, failed_attempts, finished, submitted_at, current_run_id, running, planned_at, owner, calendar,
        grid_offset_ns, tags, input, cancelled_at, prerequisites, chain, wakes_system
        """

    /// `r.identifier, r.earliest_begin, …`.
    static func prefixed(_ alias: String) -> String {
        columns.split(separator: ",").map { "\(alias).\($0.trimmingCharacters(in: .whitespacesAndNewlines))" }
            .joined(separator: ", ")
    }

    /// The request a row's ``columns`` hold.
    static func request(_ row: PostgresRow) throws -> StoredRequest {
        try request(NamedCells(row))
    }

    /// The request in `cell`'s ``columns``.
    static func request(_ cell: NamedCells) throws -> StoredRequest {
        try RequestColumns(
            identifier: cell("identifier"), earliestBegin: cell("earliest_begin"),
            intervalNanoseconds: cell("interval_ns"), flexNanoseconds: cell("flex_ns"), catchUp: cell("catch_up"),
            catchUpMaximum: Int(cell("catch_up_maximum", as: Int64.self)),
            randomizedDelayNanoseconds: cell("randomized_delay_ns"),
            maximumDurationNanoseconds: cell("maximum_duration_ns"), backoff: cell("backoff"),
            initialDelayNanoseconds: cell("initial_delay_ns"), maximumDelayNanoseconds: cell("maximum_delay_ns"),
            maximumAttempts: Int(cell("maximum_attempts", as: Int64.self)), requirements: cell("requirements"),
            anchor: cell("anchor"), owed: Int(cell("owed", as: Int64.self)), retryAt: cell("retry_at"),
            failedAttempts: Int(cell("failed_attempts", as: Int64.self)), finished: cell("finished"),
            submittedAt: cell("submitted_at"), currentRunID: cell("current_run_id"), running: cell("running"),
            scope: cell("owner", as: String.self).isEmpty ? "shared" : "perInstance", plannedAt: cell("planned_at"),
            calendar: cell("calendar"), gridOffsetNanoseconds: cell("grid_offset_ns"), tags: cell("tags"),
            input: Array(cell("input", as: ByteBuffer.self).readableBytesView), cancelledAt: cell("cancelled_at"),
            prerequisites: cell("prerequisites"),
            chain: cell("chain", as: ByteBuffer?.self).map { Array($0.readableBytesView) },
            wakesSystem: cell("wakes_system")
        ).stored(rowID: nil)
    }

    /// The attempt a row's `identifier, run_id, attempt, started_at, ended_at, result,
    /// stop_reason, output` hold.
    static func record(_ row: PostgresRow) throws -> RunRecord {
        let cell = NamedCells(row)
        return RunRecord(
            identifier: try cell("identifier"), runID: try cell("run_id"),
            attempt: Int(try cell("attempt", as: Int64.self)),
            startedAt: WallClockInstant(nanosecondsSinceEpoch: try cell("started_at")),
            endedAt: try cell("ended_at", as: Int64?.self).map(WallClockInstant.init(nanosecondsSinceEpoch:)),
            result: RunResult(stored: try cell("result")) ?? .failed, stopReason: try cell("stop_reason"),
            output: try cell("output", as: ByteBuffer?.self).map { Array($0.readableBytesView) })
    }
}
