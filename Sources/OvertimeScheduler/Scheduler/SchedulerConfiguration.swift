import Logging
import Metrics
import Overtime

/// How a ``Scheduler`` stores and starts runs.
public struct SchedulerConfiguration: Sendable {
    /// The SQLite file requests, plans and history live in (created if missing, with
    /// its folders). One scheduler per file: `<storePath>.lock` is held while it is
    /// open, and a second scheduler on the same file is refused
    /// (``SchedulerError/Code/storeInUse``).
    public var storePath: String
    /// The database the schedule lives in, when not the SQLite file at ``storePath``
    /// (`nil`, the default): e.g. a PostgreSQL database a fleet shares (`OvertimePostgres`).
    /// ``storePath``'s folder is then only where the storage requirement is measured.
    public var database: ScheduleDatabase?
    /// The most runs at once. Default 4 on a SQLite store, a device's or one server's: as
    /// many as Android's WorkManager runs at once on its default executor. A database that
    /// a fleet of servers shares may ask for more (`.postgres(…)`: 32, as many as the
    /// queues a fleet is compared with run at once), since there each run's claim and
    /// record are round trips to the server, and four at a time would leave most of an
    /// instance idle waiting on them. Set it, and the database's default no longer applies.
    public var maximumConcurrentRuns: Int {
        get { chosenMaximumConcurrentRuns ?? database?.maximumConcurrentRunsByDefault ?? 4 }
        set { chosenMaximumConcurrentRuns = newValue }
    }
    /// ``maximumConcurrentRuns`` as set; `nil`, the default (the database's, or 4).
    private var chosenMaximumConcurrentRuns: Int?
    /// The backlog — runs that fell due before the scheduler started or the wall clock
    /// stepped, and catch-up runs — starts this far apart, not all in one instant, so that
    /// catch-up after downtime does not stampede. Runs that fall due while the scheduler
    /// runs (a queue of one-shots submitted due now) are not spaced: only
    /// ``maximumConcurrentRuns`` limits them. Default 0.5 s; zero starts the backlog together.
    public var startSpacing: Duration = .milliseconds(500)
    /// Where requirements are read. `nil` (the default): Linux itself
    /// (``LinuxConditionSource``), measuring storage in the store's folder.
    public var conditions: (any ConditionSource)?
    /// While a run waits on power or storage (which change without a reliable event), the
    /// conditions are read again this often. Default 60 s; nothing waiting, nothing read.
    public var conditionRecheckInterval: Duration = .seconds(60)
    /// Whether each handler waits until its run's start is on disk (an `fsync` before the
    /// handlers of every batch of starts). Default `false`: a start is written to the
    /// store's log before its handler is called, so a crash of the process never loses it,
    /// and reaches the disk within one sync (milliseconds, off the scheduler's thread); only
    /// a power loss in between can run that attempt again, as if it had not started. A
    /// run's end is always on disk before its grant ends, and a submit before it returns.
    public var waitsForDiskBeforeStarting = false
    /// What the history keeps of finished runs and requests. Default: 30 days, at most
    /// 1,000 attempts per request (``HistoryRetention``).
    public var historyRetention = HistoryRetention()
    /// Where the scheduler logs.
    public var logger = Logger(label: "overtime.scheduler")

    /// A scheduler storing in `storePath`.
    public init(storePath: String) {
        self.storePath = storePath
    }

    /// A scheduler on `database` (a fleet's shared one); the storage requirement is
    /// measured in `storageFolder`.
    public init(database: ScheduleDatabase, storageFolder: String = "/var/tmp") {
        storePath = storageFolder + "/schedule"
        self.database = database
    }
}

/// What to do with a request submitted for an identifier that already has one.
public struct ExistingRequestPolicy: Sendable, Hashable, CustomStringConvertible {
    enum Kind: Hashable { case keep, replace, update }
    let kind: Kind

    /// Keep the pending request and its schedule; the new one is dropped. The default (a
    /// program that submits at every start does not pile up or reset its schedule). A
    /// request that finished is not pending: the new one replaces it.
    public static let keep = ExistingRequestPolicy(kind: .keep)
    /// Replace it: a new schedule from now; a run in progress is expired.
    public static let replace = ExistingRequestPolicy(kind: .replace)
    /// Take the new request's settings but keep the schedule (the planned time, the
    /// attempts so far); a run in progress is not interrupted.
    public static let update = ExistingRequestPolicy(kind: .update)

    /// `keep`, `replace` or `update`.
    public var description: String {
        switch kind {
        case .keep: "keep"
        case .replace: "replace"
        case .update: "update"
        }
    }
}

/// What a submit did with a request: whether it is now pending as submitted, or what it
/// found pending of its identifier. Only *pending* work is kept or updated: a request
/// that finished (a one-shot done, or failed for good) is replaced under every policy.
public struct SubmitOutcome: Sendable, Hashable, CustomStringConvertible {
    enum Kind: Hashable { case added, resubmitted, kept, updated, replaced }
    let kind: Kind

    /// No request of its identifier was there: it is pending as submitted.
    public static let added = SubmitOutcome(kind: .added)
    /// A finished request of its identifier (done, or failed for good) was replaced: it
    /// is pending as submitted, from a new plan.
    public static let resubmitted = SubmitOutcome(kind: .resubmitted)
    /// A pending request of its identifier was kept as it was (``ExistingRequestPolicy/keep``,
    /// or an ``ExistingRequestPolicy/update`` that changed nothing); this one was dropped.
    public static let kept = SubmitOutcome(kind: .kept)
    /// A pending request of its identifier took this one's settings and kept its plan
    /// (``ExistingRequestPolicy/update``).
    public static let updated = SubmitOutcome(kind: .updated)
    /// A pending request of its identifier was replaced, from a new plan
    /// (``ExistingRequestPolicy/replace``).
    public static let replaced = SubmitOutcome(kind: .replaced)

    /// `added`, `resubmitted`, `kept`, `updated` or `replaced`.
    public var description: String {
        switch kind {
        case .added: "added"
        case .resubmitted: "resubmitted"
        case .kept: "kept"
        case .updated: "updated"
        case .replaced: "replaced"
        }
    }
}

/// Why a scheduler call failed. A code to switch over, and a sentence.
public struct SchedulerError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure. A struct over a private enum, so that codes can be added.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        enum Kind: String, Hashable {
            case alreadyRegistered, registeredAfterStart, notRegistered, unknownIdentifier
            case alreadyStarted, notStarted, invalidRequest, store, storeInUse, alreadyRunning, refused
            case requirementUnavailable, dataTooLarge, wakeUnavailable, blockingCallOnTheLoop
        }

        let kind: Kind

        /// A handler is already registered for the identifier.
        public static let alreadyRegistered = Code(kind: .alreadyRegistered)
        /// Handlers are registered before ``Scheduler/start()``.
        public static let registeredAfterStart = Code(kind: .registeredAfterStart)
        /// No handler is registered for the identifier.
        public static let notRegistered = Code(kind: .notRegistered)
        /// No request has the identifier.
        public static let unknownIdentifier = Code(kind: .unknownIdentifier)
        /// ``Scheduler/start()`` was called before.
        public static let alreadyStarted = Code(kind: .alreadyStarted)
        /// The call needs a started scheduler.
        public static let notStarted = Code(kind: .notStarted)
        /// A field of the request is out of range.
        public static let invalidRequest = Code(kind: .invalidRequest)
        /// The store failed (see the message).
        public static let store = Code(kind: .store)
        /// Another process (or another scheduler in this one) has the store open: one
        /// scheduler per store file.
        public static let storeInUse = Code(kind: .storeInUse)
        /// A run of the identifier is in progress (one at a time).
        public static let alreadyRunning = Code(kind: .alreadyRunning)
        /// The runtime gives no grant now (suspended or terminating).
        public static let refused = Code(kind: .refused)
        /// The request needs a requirement that cannot be told on this machine at all (the
        /// network, where neither netlink nor `/proc/net` can be read): it would wait for good.
        public static let requirementUnavailable = Code(kind: .requirementUnavailable)

        /// A request's input or a run's output is larger than
        /// ``ScheduleLimits/maximumDataBytes``: the request is not submitted, the output not
        /// kept.
        public static let dataTooLarge = Code(kind: .dataTooLarge)

        /// The request asks to wake the system (``ScheduledTaskRequest/wakesSystem``), which
        /// this process cannot: it lacks `CAP_WAKE_ALARM`, or the kernel has no alarm
        /// timers (the message says which).
        public static let wakeUnavailable = Code(kind: .wakeUnavailable)

        /// A synchronous call was made on the runtime's loop thread, which it would hold
        /// until the store answered: the `async` form of the call is the one to use there.
        public static let blockingCallOnTheLoop = Code(kind: .blockingCallOnTheLoop)

        /// The code's name.
        public var description: String { kind.rawValue }
    }

    /// What kind of failure.
    public let code: Code
    /// One sentence naming the identifier or the field and the cause.
    public let message: String
    /// The field out of range (`repetition.interval`, say), for ``Code/invalidRequest``.
    public let field: String?

    /// The message.
    public var description: String { message }

    package init(code: Code, message: String, field: String? = nil) {
        self.code = code
        self.message = message
        self.field = field
    }

    static func store(_ error: ScheduleStoreError) -> SchedulerError {
        SchedulerError(code: error.isLocked ? .storeInUse : .store, message: error.message)
    }
}
