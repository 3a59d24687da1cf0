// Rows of the SQLite store read by column name: one codec for a request and for an attempt,
// whichever statement selected them.

import CSQLite
import Logging
import Overtime
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

extension SQLiteScheduleStore {
    /// The attempt a row's `identifier, run_id, attempt, started_at, ended_at, result,
    /// stop_reason, output` hold.
    static func record(_ row: SQLiteStatement) throws(SQLiteError) -> RunRecord {
        let at = try RecordLayout.of(row)
        return RunRecord(
            identifier: row.text(at.identifier), runID: row.int64(at.runID), attempt: row.int(at.attempt),
            startedAt: WallClockInstant(nanosecondsSinceEpoch: row.int64(at.startedAt)),
            endedAt: row.optionalInt64(at.endedAt).map(WallClockInstant.init(nanosecondsSinceEpoch:)),
            result: RunResult(stored: row.text(at.result)) ?? .failed, stopReason: row.optionalText(at.stopReason),
            output: row.optionalBytes(at.output))
    }

    /// The columns a request is read from (by name, in any order, among others). Where a
    /// finished request may be read (by identifier), `cancelled_at` is added.
    static let requestColumns =
        requestColumnsBeforeScope + ", scope, planned_at, details"

    /// The same without the scope, which stores before schema version 6 lack.
    static let requestColumnsBeforeScope = """
        identifier, earliest_begin, interval_ns, flex_ns, catch_up, catch_up_maximum, randomized_delay_ns,
        maximum_duration_ns, backoff, initial_delay_ns, maximum_delay_ns, maximum_attempts, requirements, anchor, owed,
        retry_at, failed_attempts, finished, submitted_at, current_run_id, running, rowid
        """

    /// The request a row's ``requestColumns`` hold.
    static func request(_ row: SQLiteStatement) throws(SQLiteError) -> StoredRequest {
        let at = try RequestLayout.of(row)
        let details = RequestDetails(packed: row.optionalBytes(at.details))
        return RequestColumns(
            identifier: row.text(at.identifier), earliestBegin: row.optionalInt64(at.earliestBegin),
            intervalNanoseconds: row.optionalInt64(at.interval), flexNanoseconds: row.optionalInt64(at.flex),
            catchUp: row.text(at.catchUp), catchUpMaximum: row.int(at.catchUpMaximum),
            randomizedDelayNanoseconds: row.int64(at.randomizedDelay),
            maximumDurationNanoseconds: row.int64(at.maximumDuration), backoff: row.text(at.backoff),
            initialDelayNanoseconds: row.int64(at.initialDelay), maximumDelayNanoseconds: row.int64(at.maximumDelay),
            maximumAttempts: row.int(at.maximumAttempts), requirements: row.text(at.requirements),
            anchor: row.int64(at.anchor), owed: row.int(at.owed), retryAt: row.optionalInt64(at.retryAt),
            failedAttempts: row.int(at.failedAttempts), finished: row.bool(at.finished),
            submittedAt: row.int64(at.submittedAt), currentRunID: row.optionalInt64(at.currentRunID),
            running: row.bool(at.running), scope: row.text(at.scope), plannedAt: row.optionalInt64(at.plannedAt),
            calendar: details.calendar, gridOffsetNanoseconds: details.gridOffsetNanoseconds, tags: details.tags,
            input: details.input, cancelledAt: at.cancelledAt.flatMap { row.optionalInt64($0) },
            prerequisites: details.prerequisites, chain: details.chain, wakesSystem: details.wakesSystem
        ).stored(rowID: row.int64(at.rowID))
    }
}

/// Where a statement's rows hold a request's columns, found by name once per prepared
/// statement (`SQLiteStatement.layout(_:)`).
final class RequestLayout {
    let identifier, earliestBegin, interval, flex, catchUp, catchUpMaximum, randomizedDelay: Int32
    let maximumDuration, backoff, initialDelay, maximumDelay, maximumAttempts, requirements, anchor: Int32
    let owed, retryAt, failedAttempts, finished, submittedAt, currentRunID, running, rowID: Int32
    let scope, plannedAt, details: Int32
    /// Selected only where a finished request may be read.
    let cancelledAt: Int32?

    /// The layout of `statement`, found once and kept with it.
    static func of(_ statement: SQLiteStatement) throws(SQLiteError) -> RequestLayout {
        try statement.layout(RequestLayout.init)
    }

    private init(_ row: SQLiteStatement) throws(SQLiteError) {
        (identifier, earliestBegin) = (try row.column("identifier"), try row.column("earliest_begin"))
        (interval, flex) = (try row.column("interval_ns"), try row.column("flex_ns"))
        (catchUp, catchUpMaximum) = (try row.column("catch_up"), try row.column("catch_up_maximum"))
        randomizedDelay = try row.column("randomized_delay_ns")
        maximumDuration = try row.column("maximum_duration_ns")
        (backoff, initialDelay) = (try row.column("backoff"), try row.column("initial_delay_ns"))
        maximumDelay = try row.column("maximum_delay_ns")
        maximumAttempts = try row.column("maximum_attempts")
        (requirements, anchor) = (try row.column("requirements"), try row.column("anchor"))
        (owed, retryAt) = (try row.column("owed"), try row.column("retry_at"))
        (failedAttempts, finished) = (try row.column("failed_attempts"), try row.column("finished"))
        (submittedAt, currentRunID) = (try row.column("submitted_at"), try row.column("current_run_id"))
        (running, rowID) = (try row.column("running"), try row.column("rowid"))
        (scope, plannedAt) = (try row.column("scope"), try row.column("planned_at"))
        details = try row.column("details")
        cancelledAt = row.column(named: "cancelled_at")
    }
}

/// Where a statement's rows hold an attempt's columns, found by name once per prepared
/// statement.
final class RecordLayout {
    let identifier, runID, attempt, startedAt, endedAt, result, stopReason, output: Int32

    /// The layout of `statement`, found once and kept with it.
    static func of(_ statement: SQLiteStatement) throws(SQLiteError) -> RecordLayout {
        try statement.layout(RecordLayout.init)
    }

    private init(_ row: SQLiteStatement) throws(SQLiteError) {
        (identifier, runID) = (try row.column("identifier"), try row.column("run_id"))
        (attempt, startedAt) = (try row.column("attempt"), try row.column("started_at"))
        (endedAt, result) = (try row.column("ended_at"), try row.column("result"))
        (stopReason, output) = (try row.column("stop_reason"), try row.column("output"))
    }
}
