// The schedule store over an in-memory schedule: the SQLite store's answers, from
// dictionaries, for tests that must not wait for a disk.

import Overtime
@_spi(ScheduleStore) import OvertimeScheduler
import OvertimeSupport

/// One request as the in-memory schedule keeps it, with what the SQLite store keeps in
/// columns beside it (its due time and requirement bits as written, its submission order,
/// its run in progress).
struct InMemoryRow: Sendable {
    var stored: StoredRequest
    /// When its next run may start, as last written (`nil`: nothing more runs).
    var dueAt: WallClockInstant?
    /// One bit per requirement.
    var requirementMask: Int64
    /// Submission order.
    var sequence: Int64
    /// The row's own key: a request replaced by a new submission is a new row, and a plan
    /// written for the old one (``StoredRequest/rowID``) finds nothing.
    var rowID: Int64
    /// The attempt in progress.
    var active: (runID: Int64, attempt: Int, startedAt: WallClockInstant)?

    init(_ stored: StoredRequest, sequence: Int64, rowID: Int64) {
        self.stored = stored
        self.sequence = sequence
        self.rowID = rowID
        dueAt = stored.nextStart
        requirementMask = RequestColumns(stored).requirementMask
    }

    /// The request as a store returns it.
    var read: StoredRequest {
        var read = stored
        read.rowID = rowID
        return read
    }

    var isRunning: Bool { stored.isRunning }
    var isFinished: Bool { stored.plan.isFinished }
}

/// What the questions about due times read of a row, kept beside it. Nothing in it is
/// counted by reference, so a scan of thousands of rows retains no strings or arrays: a
/// scheduler asks for the next due after every run, and with a whole row copied at each
/// step of each scan, that was most of the time of a test of 2,000 due requests.
struct RowSummary: Sendable {
    var dueAt: WallClockInstant?
    var sequence: Int64
    var requirementMask: Int64
    var isRunning: Bool
    var isFinished: Bool
    var wakesSystem: Bool
    /// Whether it waits for prerequisites: only those can be another's dependents.
    var hasPrerequisites: Bool

    init(_ row: InMemoryRow) {
        dueAt = row.dueAt
        sequence = row.sequence
        requirementMask = row.requirementMask
        isRunning = row.isRunning
        isFinished = row.isFinished
        wakesSystem = row.stored.request.wakesSystem
        hasPrerequisites = !(row.stored.chain?.waitingOn.isEmpty ?? true)
    }
}

/// The rows by identifier, each one's ``RowSummary`` kept in step by the only way to
/// change them (the subscript).
struct InMemoryRows: Sendable {
    private(set) var byIdentifier: [String: InMemoryRow] = [:]
    private(set) var summaries: [String: RowSummary] = [:]

    subscript(identifier: String) -> InMemoryRow? {
        get { byIdentifier[identifier] }
        set {
            byIdentifier[identifier] = newValue
            summaries[identifier] = newValue.map(RowSummary.init)
        }
    }

    var count: Int { byIdentifier.count }

    /// The row whose summary is at `index` of ``summaries``.
    func row(at index: [String: RowSummary].Index) -> InMemoryRow {
        byIdentifier[summaries.keys[index]]!  // the two hold the same identifiers
    }
}

/// What an ``InMemorySchedule`` holds.
struct InMemoryTables: Sendable {
    var rows = InMemoryRows()
    /// Attempts that ended, by identifier, run and attempt.
    var history: [HistoryKey: RunRecord] = [:]
    /// What operators did, in the order recorded.
    var operatorActions: [OperatorAction] = []
    var lastRunID: Int64 = 0
    var sequence: Int64 = 0
    var nextRowID: Int64 = 1
    /// The store that has it open.
    var openedBy: ObjectIdentifier?

    struct HistoryKey: Hashable, Sendable {
        let identifier: String
        let runID: Int64
        let attempt: Int
    }

    /// Rows whose summary matches `summary` and which then match `condition`, in
    /// submission order.
    func rows(
        summary: (RowSummary) -> Bool = { _ in true }, where condition: (InMemoryRow) -> Bool = { _ in true }
    ) -> [InMemoryRow] {
        let summaries = rows.summaries
        var found: [(sequence: Int64, row: InMemoryRow)] = []
        for index in summaries.indices where summary(summaries.values[index]) {
            let row = rows.row(at: index)
            if condition(row) { found.append((summaries.values[index].sequence, row)) }
        }
        return found.sorted { $0.sequence < $1.sequence }.map(\.row)
    }

    /// Rows not running with a due time matching `condition` (and then `rowCondition`),
    /// earliest first (then in submission order), at most `limit`. Only the rows returned
    /// (and those `rowCondition` reads) are copied.
    func dueOrder(
        limit: Int = .max, where condition: (RowSummary, WallClockInstant) -> Bool,
        and rowCondition: ((InMemoryRow) -> Bool)? = nil
    ) -> [InMemoryRow] {
        typealias Key = (due: WallClockInstant, sequence: Int64, index: [String: RowSummary].Index)
        let summaries = rows.summaries
        var keys: [Key] = []
        for index in summaries.indices {
            let summary = summaries.values[index]
            guard !summary.isRunning, let due = summary.dueAt, condition(summary, due) else { continue }
            if let rowCondition, !rowCondition(rows.row(at: index)) { continue }
            keys.append((due, summary.sequence, index))
        }
        let earlier = { (a: Key, b: Key) in (a.due, a.sequence) < (b.due, b.sequence) }
        if limit == 1 { return keys.min(by: earlier).map { [rows.row(at: $0.index)] } ?? [] }
        return keys.sorted(by: earlier).prefix(max(limit, 0)).map { rows.row(at: $0.index) }
    }
}

/// The ``ScheduleStore`` over an ``InMemorySchedule``, open for one scheduler.
final class InMemoryScheduleStore: ScheduleStore {
    private let schedule: InMemorySchedule
    let recovery: StoreRecovery

    static let interruptedReason = "the process ended while it ran"

    init(schedule: InMemorySchedule, now: WallClockInstant) throws(ScheduleStoreError) {
        self.schedule = schedule
        var interrupted: [RunRecord] = []
        let opened: Bool = schedule.tables.withLock { tables in
            guard tables.openedBy == nil else { return false }
            // Runs in progress when the last scheduler went away: interrupted, free to run again.
            for (identifier, row) in tables.rows.byIdentifier {
                if let active = row.active {
                    let record = RunRecord(
                        identifier: identifier, runID: active.runID, attempt: active.attempt,
                        startedAt: active.startedAt, endedAt: now, result: .interrupted,
                        stopReason: Self.interruptedReason)
                    tables.history[.init(identifier: identifier, runID: active.runID, attempt: active.attempt)] =
                        record
                    interrupted.append(record)
                }
                if row.active != nil || row.isRunning {
                    tables.rows[identifier]?.active = nil
                    tables.rows[identifier]?.stored.isRunning = false
                }
            }
            return true
        }
        guard opened else {
            throw ScheduleStoreError("in-memory schedule: in use by another scheduler (one at a time has it open)")
        }
        self.recovery = StoreRecovery(
            interruptedRuns: interrupted.sorted { ($0.runID, $0.attempt) < ($1.runID, $1.attempt) })
        schedule.tables.withLock { $0.openedBy = ObjectIdentifier(self) }
    }

    /// Runs `body` on the tables while this store has them open.
    private func using<T>(_ body: (inout InMemoryTables) -> T) throws(ScheduleStoreError) -> T {
        let identity = ObjectIdentifier(self)
        let result: T? = schedule.tables.withLock { tables in
            tables.openedBy == identity ? body(&tables) : nil
        }
        guard let result else { throw ScheduleStoreError("in-memory schedule: closed") }
        return result
    }

    func close() {
        let identity = ObjectIdentifier(self)
        schedule.tables.withLock { tables in
            if tables.openedBy == identity { tables.openedBy = nil }
        }
    }

    // MARK: Reading requests

    func request(_ identifier: String) throws(ScheduleStoreError) -> StoredRequest? {
        try using { $0.rows[identifier]?.read }
    }

    func pendingRequests() throws(ScheduleStoreError) -> [StoredRequest] {
        try using { $0.rows(summary: { !$0.isFinished }).map(\.read) }
    }

    func pendingRequests(tagged tag: String) throws(ScheduleStoreError) -> [StoredRequest] {
        try using { $0.rows(summary: { !$0.isFinished }, where: { $0.stored.request.tags.contains(tag) }).map(\.read) }
    }

    func finishedRequests(after: String?, prefix: String?, tagged tag: String?, limit: Int)
        throws(ScheduleStoreError) -> [StoredRequest]
    {
        try using { tables in
            let found = tables.rows(summary: \.isFinished) { row in
                let identifier = row.stored.request.identifier
                return row.stored.cancelledAt == nil && after.map { identifier > $0 } ?? true
                    && prefix.map(identifier.hasPrefix) ?? true && tag.map(row.stored.request.tags.contains) ?? true
            }
            return Array(
                found.map(\.read).sorted { $0.request.identifier < $1.request.identifier }.prefix(max(0, limit)))
        }
    }

    func operatorActions(limit: Int) throws(ScheduleStoreError) -> [OperatorAction] {
        try using { Array($0.operatorActions.reversed().prefix(max(0, limit))) }
    }

    func dependents(of identifiers: [String]) throws(ScheduleStoreError) -> [StoredRequest] {
        try using { tables in
            var seen = Set<String>()
            var found: [StoredRequest] = []
            for identifier in identifiers {
                for row in tables.rows(
                    summary: { !$0.isFinished && $0.hasPrerequisites },
                    where: { $0.stored.chain?.waitingOn.contains(identifier) == true })
                where seen.insert(row.stored.request.identifier).inserted {
                    found.append(row.read)
                }
            }
            return found
        }
    }

    func waitingOnFinishedPrerequisites() throws(ScheduleStoreError) -> [StoredRequest] {
        try using { tables in
            tables.rows(summary: { !$0.isFinished && $0.hasPrerequisites }) { row in
                (row.stored.chain?.waitingOn ?? []).contains { tables.rows[$0]?.isFinished ?? true }
            }.map(\.read)
        }
    }

    func nextWakingStart() throws(ScheduleStoreError) -> WallClockInstant? {
        try using { tables in
            tables.rows.summaries.values.filter { !$0.isRunning && $0.wakesSystem }.compactMap(\.dueAt).min()
        }
    }

    func pendingCount() throws(ScheduleStoreError) -> Int {
        try using { tables in tables.rows.summaries.values.count { !$0.isFinished } }
    }

    func waitingCounts(at now: WallClockInstant) throws(ScheduleStoreError) -> (enqueued: Int, blocked: Int) {
        try using { tables in
            var counts = (enqueued: 0, blocked: 0)
            for row in tables.rows.summaries.values where !row.isFinished && !row.isRunning {
                if let due = row.dueAt, due > now { counts.enqueued += 1 } else { counts.blocked += 1 }
            }
            return counts
        }
    }

    func due(at now: WallClockInstant, unmet: Int64, limit: Int) throws(ScheduleStoreError) -> [StoredRequest] {
        try using { tables in
            tables.dueOrder(limit: limit) { row, due in due <= now && row.requirementMask & unmet == 0 }.map(\.read)
        }
    }

    func nextDue(after now: WallClockInstant, unmet: Int64) throws(ScheduleStoreError) -> (
        identifier: String, at: WallClockInstant
    )? {
        try using { tables in
            tables.dueOrder(limit: 1) { _, due in due > now }.first.map { ($0.stored.request.identifier, $0.dueAt!) }
        }
    }

    func dueWaiting(at now: WallClockInstant, on requirements: Int64) throws(ScheduleStoreError) -> Bool {
        try using { tables in
            tables.rows.summaries.values.contains { row in
                guard !row.isRunning, let due = row.dueAt else { return false }
                return due <= now && row.requirementMask & requirements != 0
            }
        }
    }

    func plannedAheadOfClock(_ now: WallClockInstant) throws(ScheduleStoreError) -> [StoredRequest] {
        try using { tables in
            tables.rows(summary: { !$0.isFinished }) { row in
                guard let repetition = row.stored.request.repetition else { return false }
                if repetition.calendar != nil {
                    return SchedulePlanner.previousWindowStart(row.stored.plan, row.stored.request).map { $0 > now }
                        ?? false
                }
                let interval = repetition.interval
                guard interval > .zero else { return false }
                return row.stored.plan.anchor - interval - min(repetition.flex, interval) > now
            }.map(\.read)
        }
    }

    func waitsForALength(after threshold: WallClockInstant) throws(ScheduleStoreError) -> [StoredRequest] {
        try using { tables in
            tables.dueOrder(where: { _, due in due > threshold }) { row in
                let request = row.stored.request
                return row.stored.plan.retryAt != nil || (request.repetition == nil && request.earliestBegin == nil)
            }.map(\.read)
        }
    }

    func lastRunID() throws(ScheduleStoreError) -> Int64 {
        try using { $0.lastRunID }
    }

    // MARK: Writing

    func commit(_ batch: ScheduleBatch, lastRunID: Int64) throws(ScheduleStoreError) -> CommitRefusals {
        try using { tables in
            var found = CommitRefusals()
            for write in batch.writes { Self.apply(write, to: &tables, &found) }
            for end in batch.ends {
                let record = end.record
                tables.history[.init(identifier: record.identifier, runID: record.runID, attempt: record.attempt)] =
                    record
                if let plan = end.plan {
                    Self.writePlan(plan, start: nil, in: &tables)
                } else if tables.rows[record.identifier] != nil {
                    // Cancelled or replaced meanwhile: the identifier may run again.
                    tables.rows[record.identifier]?.stored.isRunning = false
                    tables.rows[record.identifier]?.active = nil
                }
            }
            for (record, plan) in batch.starts { Self.writePlan(plan, start: record, in: &tables) }
            if !batch.starts.isEmpty { tables.lastRunID = max(tables.lastRunID, lastRunID) }
            tables.operatorActions += batch.actions
            return found
        }
    }

    private static func apply(_ write: RequestWrite, to tables: inout InMemoryTables, _ found: inout CommitRefusals) {
        switch write {
        case .save(let stored):
            tables.sequence += 1
            let identifier = stored.request.identifier
            if var row = tables.rows[identifier] {
                // An update keeps its place in the order, its row and its run in progress.
                row.stored = stored
                row.stored.rowID = nil
                row.dueAt = stored.nextStart
                row.requirementMask = RequestColumns(stored).requirementMask
                tables.rows[identifier] = row
            } else {
                insert(stored, into: &tables)
            }
        case .replan(let stored, let from):
            guard let row = tables.rows[stored.request.identifier], !row.isRunning, !row.isFinished,
                row.stored.plan == from
            else { return }
            var replanned = stored
            replanned.rowID = nil
            writePlan(replanned, start: nil, in: &tables)
        case .insertUnlessPending(let stored):
            let identifier = stored.request.identifier
            if let existing = tables.rows[identifier] {
                guard existing.isFinished else {
                    found.kept.insert(identifier)
                    return
                }
                found.resubmitted.insert(identifier)
            }
            tables.sequence += 1
            insert(stored, into: &tables)
        case .cancel(let identifier, let time):
            cancel(identifier, at: time, in: &tables)
        case .cancelAll(let time):
            for identifier in tables.rows.byIdentifier.keys { cancel(identifier, at: time, in: &tables) }
        }
    }

    /// A new row, last in the order.
    private static func insert(_ stored: StoredRequest, into tables: inout InMemoryTables) {
        var stored = stored
        stored.rowID = nil
        tables.rows[stored.request.identifier] = InMemoryRow(
            stored, sequence: tables.sequence, rowID: tables.nextRowID)
        tables.nextRowID += 1
    }

    private static func cancel(_ identifier: String, at time: WallClockInstant, in tables: inout InMemoryTables) {
        guard var row = tables.rows[identifier], !row.isFinished else { return }
        row.stored.plan.isFinished = true
        row.stored.plan.owed = 0
        row.stored.plan.retryAt = nil
        row.stored.cancelledAt = time
        row.dueAt = nil
        tables.rows[identifier] = row
    }

    /// Writes only where a request's schedule stands and its run in progress (`start` when
    /// one starts), on the row `stored` was read from when it says which.
    private static func writePlan(_ stored: StoredRequest, start: RunRecord?, in tables: inout InMemoryTables) {
        let identifier = stored.request.identifier
        guard var row = tables.rows[identifier] else { return }
        if let rowID = stored.rowID, rowID != row.rowID { return }
        row.stored.plan = stored.plan
        row.stored.currentRunID = stored.currentRunID
        row.stored.isRunning = start != nil
        row.active = start.map { ($0.runID, $0.attempt, $0.startedAt) }
        row.dueAt = stored.nextStart
        tables.rows[identifier] = row
    }

    func sync() throws(ScheduleStoreError) {
        try using { _ in }
    }

    // MARK: History

    func history(identifier: String, limit: Int) throws(ScheduleStoreError) -> [RunRecord] {
        try using { tables in
            var records = tables.history.values.filter { $0.identifier == identifier }
            if let active = tables.rows[identifier]?.active {
                records.append(
                    RunRecord(
                        identifier: identifier, runID: active.runID, attempt: active.attempt,
                        startedAt: active.startedAt, endedAt: nil, result: .running, stopReason: nil))
            }
            return Array(records.sorted { ($0.runID, $0.attempt) > ($1.runID, $1.attempt) }.prefix(max(limit, 0)))
        }
    }

    func pruneHistory(endedBefore: WallClockInstant?, keepingPerIdentifier: Int?) throws(ScheduleStoreError) -> Int {
        try using { tables in
            var deleted = 0
            if let endedBefore {
                let old = tables.history.filter { $0.value.endedAt.map { $0 < endedBefore } ?? false }.keys
                for key in old { tables.history[key] = nil }
                deleted += old.count
                tables.operatorActions.removeAll { $0.at < endedBefore }
            }
            if let keep = keepingPerIdentifier {
                let byIdentifier = Dictionary(grouping: tables.history.keys, by: \.identifier)
                for keys in byIdentifier.values {
                    let surplus = keys.sorted { ($0.runID, $0.attempt) > ($1.runID, $1.attempt) }.dropFirst(
                        max(keep, 0))
                    for key in surplus { tables.history[key] = nil }
                    deleted += surplus.count
                }
            }
            if let endedBefore {
                // Finished, not running, and nothing of it younger left in the history.
                let younger = Set(
                    tables.history.values.filter { $0.endedAt.map { $0 >= endedBefore } ?? false }.map(\.identifier))
                let gone = tables.rows.byIdentifier.filter { identifier, row in
                    row.isFinished && !row.isRunning && row.stored.submittedAt < endedBefore
                        && (row.stored.cancelledAt ?? WallClockInstant(nanosecondsSinceEpoch: 0)) < endedBefore
                        && !younger.contains(identifier)
                }.keys
                for identifier in gone { tables.rows[identifier] = nil }
            }
            return deleted
        }
    }
}
