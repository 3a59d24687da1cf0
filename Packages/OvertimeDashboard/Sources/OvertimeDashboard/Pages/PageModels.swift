// What each page shows, as the templates read it: plain values, every text still raw
// (the templates escape it).

import Overtime
import OvertimeScheduler

/// What every page has: the header, the user, where the dashboard is mounted.
struct Frame {
    struct NavigationItem {
        let path: String
        let label: String
        let current: Bool
    }
    let site: String
    let title: String
    let page: String
    let base: String
    let nav: [NavigationItem]
    let user: String?
    let csrf: String?
    /// A browser's session (not a program's bearer token): it can sign out.
    let signedIn: Bool
    let readOnly: Bool
    let readAt: String
    /// Why the schedule's owner does not answer (every page warns: what it shows may be
    /// stale, and actions will fail), or `nil`.
    let ownerProblem: String?

    static let sections: [(path: String, label: String)] = [
        ("/overview", "Overview"), ("/requests", "Requests"), ("/running", "Running"), ("/history", "History"),
        ("/failed", "Failed"),
        ("/instances", "Instances"), ("/actions", "Actions"),
    ]
}

/// A page: the frame and the page's own model, whose keys the templates find on either.
struct Page<Body> {
    let frame: Frame
    let body: Body
}

struct Choice {
    let value: String
    let label: String
    let selected: Bool
}

struct RequestRow {
    let identifier: String
    let link: String
    let state: String
    let next: String?
    let nextRelative: String?
    let waitsFor: String?
    let attempt: String
    let lastRun: String?
    let lastRunRelative: String?
    let tags: String

    init(_ inspected: InspectedRequest, now: WallClockInstant) {
        identifier = inspected.request.identifier
        link = Formatting.query(identifier)
        state = inspected.state.description
        let nextRun = inspected.waitingFor.flatMap(Self.time(of:))
        next = nextRun.map(Formatting.time)
        nextRelative = nextRun.map { Self.relative($0, now: now) }
        waitsFor = inspected.waitingFor.map { Self.explain($0, now: now) }
        attempt = inspected.attempt == 0 ? "" : "\(inspected.attempt)"
        lastRun = inspected.lastRunAt.map(Formatting.time)
        lastRunRelative = inspected.lastRunAt.map { Formatting.relative($0, from: now) }
        tags = inspected.request.tags.sorted().joined(separator: ", ")
    }

    static func time(of wait: ScheduleWait) -> WallClockInstant? {
        switch wait {
        case .plannedTime(let time), .retry(let time): time
        case .requirements(_, let since), .turn(let since): since
        case .prerequisite, .handler: nil
        }
    }

    /// When the next run is, said from now: a time already past is when it became due,
    /// and it runs as soon as it can (not "1 h ago", as if it had run then).
    static func relative(_ next: WallClockInstant, now: WallClockInstant) -> String {
        next > now
            ? Formatting.relative(next, from: now) : "as soon as it can (due \(Formatting.relative(next, from: now)))"
    }

    /// What a request waits for, in words, with times relative to now.
    static func explain(_ wait: ScheduleWait, now: WallClockInstant) -> String {
        switch wait {
        case .plannedTime(let time): "its planned time, \(Formatting.relative(time, from: now))"
        case .retry(let time): "a retry after its backoff, \(Formatting.relative(time, from: now))"
        case .prerequisite(let identifier): "prerequisite \(identifier) to succeed"
        case .requirements(let requirements, let since):
            (requirements.count == 1 ? "requirement " : "requirements ")
                + requirements.map(\.description).joined(separator: ", ")
                + " (due \(Formatting.relative(since, from: now)))"
        case .turn(let since):
            "its turn: the concurrency limit or a grant (due \(Formatting.relative(since, from: now)))"
        case .handler(let instances, let recordedAt):
            instances.isEmpty
                ? "a handler: the daemon registers none for it (as it started, "
                    + "\(Formatting.relative(recordedAt, from: now)))"
                : "a handler: no instance registers one for it ("
                    + "\(instances.joined(separator: ", ")); the newest started "
                    + "\(Formatting.relative(recordedAt, from: now)))"
        }
    }
}

struct RequestsPage {
    let states: [Choice]
    let orders: [Choice]
    let sortedBy: SortedColumns
    let prefix: String
    let tag: String
    let search: String
    /// How many requests the filters select, in words; `nil` when the store cannot tell
    /// without reading each (a tag, a search).
    let total: String?
    let rows: [RequestRow]
    let filtered: Bool
    /// Fewer than a page matched in the rows a page reads, and more follow.
    let partial: Bool
    let pager: Pager
    /// The tag filtered on, its requests' bulk actions offered; `nil` without a tag, or
    /// without actions.
    let tagActions: BulkLinks?
}

/// The Requests table's headers that sort it: each a link to the list, as filtered, in
/// its column's order; the one it is sorted by says so (`aria-sort`).
struct SortedColumns {
    let nextRun: ColumnSort
    let attempt: ColumnSort
    let lastRun: ColumnSort

    /// The headers of a list in the order named `current`, whose address without the
    /// order's name is `filters`.
    init(_ current: String, filters: String) {
        nextRun = ColumnSort(filters + "next-run", "ascending", current == "next-run")
        attempt = ColumnSort(filters + "attempts", "descending", current == "attempts")
        lastRun = ColumnSort(filters + "last-run", "descending", current == "last-run")
    }
}

/// A header's link to its order, and `aria-sort` when the list is in it.
struct ColumnSort {
    let link: String
    let ariaSort: String?

    init(_ link: String, _ direction: String, _ current: Bool) {
        self.link = link
        ariaSort = current ? direction : nil
    }
}

/// A bulk action's subject, as the links to its confirmations carry it.
struct BulkLinks {
    /// What the actions act on, as the buttons say it (`tagged nightly`).
    let what: String
    /// The query of the confirmations' addresses (`tag=nightly`).
    let query: String
}

/// Links to a list's first, previous, next and last pages; `nil` where there is none to
/// go to (the first page has no previous, the last no next).
struct Pager {
    let first: String?
    let previous: String?
    let next: String?
    let last: String?
    /// Whether any link is shown (stored: templates read stored properties only).
    let any: Bool

    init(first: String?, previous: String?, next: String?, last: String?) {
        (self.first, self.previous, self.next, self.last) = (first, previous, next, last)
        any = first != nil || previous != nil || next != nil || last != nil
    }
}

struct RunningRow {
    let identifier: String
    let link: String
    let runID: Int64
    let attempt: Int
    let started: String
    let startedRelative: String
    let timeLeft: String
    let holder: String
    /// What its handler reported last; `nil` before its first report.
    let progress: RunningProgress?
}

/// A running handler's progress: a bar and the text `overtimectl schedule` shows.
struct RunningProgress {
    /// Done so far, in whole percent.
    let percent: Int
    /// `42 %: uploading segment 3`.
    let text: String
}

struct RunningPage {
    let rows: [RunningRow]
}

struct AttemptRow {
    let identifier: String
    let link: String
    let runID: Int64
    let attempt: Int
    let started: String
    let startedRelative: String
    let took: String
    let result: String
    let stopReason: String
    let output: String?

    init(_ record: RunRecord, now: WallClockInstant) {
        identifier = record.identifier
        link = Formatting.query(record.identifier)
        runID = record.runID
        attempt = record.attempt
        started = Formatting.time(record.startedAt)
        startedRelative = Formatting.relative(record.startedAt, from: now)
        took = record.endedAt.map { Formatting.duration($0 - record.startedAt) } ?? "running"
        result = record.result.description
        stopReason = record.stopReason ?? ""
        output = Formatting.bytes(record.output)
    }
}

struct AttemptsPage {
    let prefix: String
    let results: [Choice]
    let from: String
    let until: String
    let search: String
    /// How many attempts the filters select ("More than 1,000 attempts" past the count's
    /// bound); `nil` for a search, which only reading each attempt could count.
    let total: String?
    let rows: [AttemptRow]
    let filtered: Bool
    /// Where a search stopped reading, when fewer than a page matched and more attempts
    /// follow: a sentence.
    let searchedTo: String?
    let pager: Pager
}

struct FailedRow {
    let identifier: String
    let link: String
    let canRetry: Bool
    let lastResult: String
    let ended: String
    let stopReason: String
    let stoppedBy: String
}

struct FailedPage {
    let orders: [Choice]
    let prefix: String
    let tag: String
    /// How many failed for good, without a filter (the overview's count); `nil` with one:
    /// no index counts a prefix's or a tag's.
    let total: String?
    let rows: [FailedRow]
    let pager: Pager
    /// The retry of every request the filters select that failed for good; `nil` without
    /// actions or rows.
    let retryAll: BulkLinks?
}

struct InstanceRow {
    let name: String
    let link: String
    let requests: Int
    let claims: Int
    let claimsUntil: String
    let connections: Int
    let lastSeen: String
    let canRetire: Bool
}

struct InstancesPage {
    let single: Bool
    let rows: [InstanceRow]
    let canAct: Bool
}

struct StoryFacts {
    let state: String
    let waitsFor: String?
    let next: String?
    let nextRelative: String?
    let running: RunningRow?
    let repeats: String
    let requirements: String?
    let prerequisites: String?
    let tags: String?
    let submitted: String
    let cancelled: String?
    let stoppedBy: String?
    let retry: String
    let maximumDuration: String
    let input: String?
}

struct StoryPage {
    let request: StoryFacts
    let link: String
    let canAct: Bool
    let canRun: Bool
    let canCancel: Bool
    let canRetry: Bool
    let actionsOff: String?
    let attempts: [AttemptRow]
    /// What was done to it from this dashboard, newest first.
    let taken: [ActionRow]
    let hasTaken: Bool
}

struct ConfirmPage {
    let question: String
    let action: String
    /// The confirmation's one use, for a signed-in browser's form.
    let ticket: String?
    let button: String
    let buttonClass: String
    let back: String
}

struct MessagePage {
    let kind: String
    let text: String
    let back: String?
}

struct ActionRow {
    let at: String
    let user: String
    let action: String
    let identifier: String
    /// The page of what it was done to.
    let href: String
    let outcome: String
}

struct ActionsPage {
    let rows: [ActionRow]
    /// What the scheduler recorded of operators' actions, whichever client asked.
    let recorded: [RecordedActionRow]
    /// Why the scheduler's record could not be read, if it could not.
    let recordedError: String?
}

/// One action the scheduler recorded (``OperatorAction``).
struct RecordedActionRow {
    let at: String
    let by: String
    let action: String
    let subject: String
    let count: Int
    let outcome: String
}

struct LoginPage {
    let failed: Bool
}

/// One count of the overview, with the page that lists what it counts.
struct OverviewTile {
    let label: String
    let count: Int
    let href: String
    /// The state it counts, for its colour.
    let kind: String
}

/// The unfinished requests of one handler, on the overview.
struct HandlerRow {
    let name: String
    /// The page of its requests: those with its prefix, or its one request.
    let href: String?
    let kind: String
    let waiting: Int
    let running: Int
    /// No registered handler serves these requests.
    let unserved: Bool
}

/// How late the last hour's runs started, on the overview: a count and two percentiles,
/// written as the pages write durations.
struct LatenessLine {
    let started: String
    let median: String
    let percentile99: String
}

/// A tag's unfinished requests, on the overview, with the page that lists them.
struct TagRow {
    let tag: String
    let href: String
    let waiting: Int
    let running: Int
}

/// An instance of a fleet, on the overview: whether it is connected and what it holds.
struct InstanceHealth {
    let name: String
    let health: String
    let down: Bool
    let claims: Int
    let lastSeen: String
}

struct OverviewPage {
    let tiles: [OverviewTile]
    let chart: ActivityChart
    /// How late the last hour's runs started; `nil` when none was timed.
    let lateness: LatenessLine?
    let handlers: [HandlerRow]
    /// The tags of the unfinished requests, most first, at most ``DashboardRoutes/tagsShown``.
    let tags: [TagRow]
    /// Whether any unfinished request has a tag (stored: templates read stored properties only).
    let hasTags: Bool
    /// How many tags more than those shown; `nil` when every one is.
    let moreTags: Int?
    /// Whether the programs recorded their handlers (else the table says so).
    let handlersRecorded: Bool
    let fleet: Bool
    let instances: [InstanceHealth]
}
